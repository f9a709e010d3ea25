#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write proto/commands.json: COMMAND INFO and COMMAND DOCS of every command blossomd serves.

The Redis commands' entries are what a live Redis 7.0 answers (run one with
`redis-server --port 0 --unixsocket /tmp/r.sock`), cut to the subcommands blossomd has; the
BF.* entries are RedisBloom's (src/rebloom.c flags and ACL categories, src/cmd_info/bf_info.c
key specs and docs), as a Redis 7.4 with RedisBloom 2.8 shows them, plus blossomd's own
extensions (BF.DEL, COUNTING). Usage: command-info-fetch.py /tmp/r.sock proto/commands.json
"""
import json
import socket
import sys

# The commands blossomd serves (proto/resp_cmd.c), in its table's order, and the subcommands
# of each container it has.
REDIS = ["ping", "echo", "quit", "hello", "auth", "select", "client", "command", "config",
         "info", "dbsize", "exists", "del", "unlink", "type", "keys", "scan", "save", "bgsave",
         "lastsave", "flushall", "flushdb", "memory", "rename", "renamenx", "expire", "pexpire",
         "expireat", "pexpireat", "ttl", "pttl", "expiretime", "pexpiretime", "persist",
         "multi", "exec", "discard", "watch", "unwatch", "module", "object", "wait", "debug",
         "shutdown", "subscribe", "unsubscribe", "psubscribe", "punsubscribe", "publish",
         "pubsub", "monitor", "reset", "replicaof", "slaveof", "replconf", "psync", "role"]
SUBS = {
    "client": ["setname", "getname", "id", "list", "info", "kill", "setinfo", "help"],
    "command": ["count", "docs", "getkeys", "getkeysandflags", "info", "list", "help"],
    "config": ["get", "set", "resetstat", "rewrite", "help"],
    "memory": ["usage", "help"],
    "module": ["list", "help"],
    "object": ["encoding", "freq", "idletime", "refcount", "help"],
    "pubsub": ["channels", "numsub", "numpat", "shardchannels", "shardnumsub", "help"],
}
# Redis 7.2's CLIENT SETINFO (clients send it on connect; Redis 7.0 lacks it).
CLIENT_SETINFO = {
    "name": "client|setinfo", "arity": 4, "flags": ["noscript", "loading", "stale"],
    "first": 0, "last": 0, "step": 0, "acl": ["@slow", "@connection"],
    "tips": ["request_policy:all_nodes", "response_policy:all_succeeded"],
    "key_specs": [], "subcommands": [],
    "docs": {"summary": "Sets information specific to the client or connection.",
             "since": "7.2.0", "group": "connection", "complexity": "O(1)",
             "arguments": [{"name": "attr", "type": "oneof", "arguments": [
                 {"name": "libname", "type": "string", "token": "lib-name"},
                 {"name": "libver", "type": "string", "token": "lib-ver"}]}]},
}


def resp_send(sock, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)


def resp_read(f):
    line = f.readline()[:-2]
    t, rest = chr(line[0]), line[1:]
    if t in "+":
        return rest.decode()
    if t == "-":
        raise RuntimeError(rest.decode())
    if t == ":":
        return int(rest)
    if t in "$=":
        n = int(rest)
        return f.read(n + 2)[:-2].decode() if n >= 0 else None
    if t == "_":
        return None
    if t in "*~":
        return [resp_read(f) for _ in range(int(rest))]
    if t == "%":
        return [(resp_read(f), resp_read(f)) for _ in range(int(rest))]
    raise RuntimeError("reply type " + t)


def spec_of(pairs):
    d = dict(pairs)
    out = {}
    if "notes" in d:
        out["notes"] = d["notes"]
    out["flags"] = d["flags"]
    for part in ("begin_search", "find_keys"):
        p = dict(d[part])
        out[part] = {"type": p["type"], "spec": dict(p["spec"])}
    return out


def info_of(e):
    return {"name": e[0], "arity": e[1], "flags": e[2], "first": e[3], "last": e[4],
            "step": e[5], "acl": e[6], "tips": e[7], "key_specs": [spec_of(s) for s in e[8]],
            "subcommands": []}


def args_of(lst):
    out = []
    for a in lst:
        d = dict(a)
        if "arguments" in d:
            d["arguments"] = args_of(d["arguments"])
        out.append(d)
    return out


def docs_of(pairs):
    d = dict(pairs)
    d.pop("subcommands", None)
    if "arguments" in d:
        d["arguments"] = args_of(d["arguments"])
    return d


def redis_entries(path):
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    f = sock.makefile("rb")
    resp_send(sock, "HELLO", "3")
    resp_read(f)
    out = []
    for name in REDIS:
        resp_send(sock, "COMMAND", "INFO", name)
        e = resp_read(f)[0]
        resp_send(sock, "COMMAND", "DOCS", name)
        docs = dict(resp_read(f))[name]
        entry = info_of(e)
        entry["docs"] = docs_of(docs)
        subdocs = dict(dict(docs).get("subcommands", []))
        subinfo = {s[0]: s for s in e[9]}
        for sub in SUBS.get(name, []):
            full = name + "|" + sub
            if full == "client|setinfo":
                entry["subcommands"].append(CLIENT_SETINFO)
                continue
            se = info_of(subinfo[full])
            se["docs"] = docs_of(subdocs[full])
            entry["subcommands"].append(se)
        out.append(entry)
    return out


def bf(name, arity, flags, acl, spec, summary, complexity, since, args, tips=()):
    docs = {"summary": summary}
    if since:
        docs["since"] = since
    docs.update({"group": "module", "complexity": complexity, "module": "bf",
                 "arguments": args})
    return {"name": name, "arity": arity, "flags": flags, "first": 1, "last": 1, "step": 1,
            "acl": acl, "tips": list(tips),
            "key_specs": [{"flags": [spec], "begin_search": {"type": "index",
                                                            "spec": {"index": 1}},
                           "find_keys": {"type": "range", "spec": {"lastkey": 0,
                                                                   "keystep": 1,
                                                                   "limit": 0}}}],
            "subcommands": [], "docs": docs}


KEY = {"name": "key", "type": "key", "key_spec_index": 0}
ITEM = {"name": "item", "type": "string"}
ITEMS = {"name": "item", "type": "string", "flags": ["multiple"]}
ADD_COMPLEXITY = "O(k), where k is the number of hash functions used by the last sub-filter"
MANY_COMPLEXITY = ("O(k * n), where k is the number of hash functions and n is the number "
                   "of items")
CREATED = ("Adds one or more items to a Bloom Filter. A filter will be created if it does not "
           "exist")
# blossomd's extension: a counting filter (BF.DEL deletes from it).
COUNTING = {"name": "counting", "type": "pure-token", "token": "COUNTING",
            "flags": ["optional"]}


def block(name, token, kind):
    return {"name": name, "type": "block", "token": token, "flags": ["optional"],
            "arguments": [{"name": name, "type": kind}]}


def bf_entries():
    w, r = ["write", "denyoom", "module"], ["readonly", "module", "fast"]
    return [
        bf("bf.add", 3, w, ["@write", "@bloom"], "RW", "Adds an item to a Bloom Filter",
           ADD_COMPLEXITY, "1.0.0", [KEY, ITEM]),
        bf("bf.exists", 3, r, ["@read", "@bloom"], "RO",
           "Checks whether an item exists in a Bloom Filter", ADD_COMPLEXITY, "1.0.0",
           [KEY, ITEM]),
        bf("bf.madd", -3, w, ["@write", "@bloom"], "RW", CREATED, MANY_COMPLEXITY, "1.0.0",
           [KEY, ITEMS]),
        bf("bf.mexists", -3, r, ["@read", "@bloom"], "RO",
           "Checks whether one or more items exist in a Bloom Filter", MANY_COMPLEXITY,
           "1.0.0", [KEY, ITEMS]),
        bf("bf.insert", -4, w, ["@write", "@bloom"], "RW", CREATED, MANY_COMPLEXITY, "1.0.0",
           [KEY, block("capacity", "CAPACITY", "integer"), block("error", "ERROR", "double"),
            block("expansion", "EXPANSION", "integer"),
            {"name": "nocreate", "type": "pure-token", "token": "NOCREATE",
             "flags": ["optional"]},
            {"name": "nonscaling", "type": "pure-token", "token": "NONSCALING",
             "flags": ["optional"]}, COUNTING,
            {"name": "items", "type": "pure-token", "token": "ITEMS"}, ITEMS]),
        bf("bf.reserve", -4, w, ["@write", "@fast", "@bloom"], "RW",
           "Creates a new Bloom Filter", "O(1)", "1.0.0",
           [KEY, {"name": "error_rate", "type": "double"},
            {"name": "capacity", "type": "integer"},
            block("expansion", "EXPANSION", "integer"),
            {"name": "nonscaling", "type": "pure-token", "token": "NONSCALING",
             "flags": ["optional"]}, COUNTING]),
        bf("bf.info", -2, r, ["@read", "@fast", "@bloom"], "RO",
           "Returns information about a Bloom Filter", "O(1)", "1.0.0",
           [KEY, {"name": "single_value", "type": "oneof", "flags": ["optional"],
                  "arguments": [
                      {"name": "capcaity", "type": "pure-token", "token": "CAPACITY"},
                      {"name": "SIZE", "type": "pure-token", "token": "SIZE"},
                      {"name": "FILTERS", "type": "pure-token", "token": "FILTERS"},
                      {"name": "ITEMS", "type": "pure-token", "token": "ITEMS"},
                      {"name": "EXPANSION", "type": "pure-token", "token": "EXPANSION"}]}],
           tips=["dont_cache"]),
        bf("bf.card", 2, r, ["@read", "@fast", "@bloom"], "RO",
           "Returns the cardinality of a Bloom filter", "O(1)", "2.4.4", [KEY]),
        bf("bf.del", 3, ["write", "module", "fast"], ["@write", "@fast", "@bloom"], "RW",
           "Deletes an item from a counting Bloom filter (blossomd's extension)",
           "O(k), where k is the number of hash functions", None, [KEY, ITEM]),
        bf("bf.scandump", 3, r, ["@read", "@bloom"], "RW",
           "Begins an incremental save of the bloom filter", "O(n), where n is the capacity",
           "1.0.0", [KEY, {"name": "iterator", "type": "integer"}], tips=["dont_cache"]),
        bf("bf.loadchunk", 4, w, ["@write", "@bloom"], "RW",
           "Restores a filter previously saved using SCANDUMP",
           "O(n), where n is the capacity", "1.0.0",
           [KEY, {"name": "iterator", "type": "integer"}, {"name": "data", "type": "string"}]),
        bf("bf.debug", 2, r, ["@read", "@bloom"], "RO",
           "Returns internal debug information about a Bloom Filter",
           "O(n), where n is the number of sub-filters", "1.0.0", [KEY], tips=["dont_cache"]),
    ]


def main():
    entries = bf_entries() + redis_entries(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        json.dump(entries, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
