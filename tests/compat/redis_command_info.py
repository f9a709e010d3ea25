#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""COMMAND INFO, COMMAND DOCS and COMMAND GETKEYSANDFLAGS: blossomd against a live Redis.

Starts $BLOSSOMD_BIN and Debian's redis-server (7.0, on a unix socket in a temporary
directory, no persistence) and compares reply bytes, RESP2 and RESP3: the INFO and DOCS entry
of every Redis command and subcommand blossomd lists (COMMAND LIST), containers excepted (they
list only the subcommands blossomd has), and the keys of a sample call of every Redis command
that has keys. Prints TAP.
"""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis_py  # noqa: E402  (the daemon and TAP helpers)
from redis_py import Daemon, bail, is_, not_ok, ok, pdeathsig  # noqa: E402

# A call of every Redis command blossomd has that takes keys (COMMAND GETKEYS wants a whole
# call); BF.* is checked by tests/proto (Redis has no BF.*).
KEYED = [
    ["del", "a", "b", "c"], ["unlink", "a", "b"], ["exists", "a", "b", "a"], ["type", "a"],
    ["rename", "a", "b"], ["renamenx", "a", "b"], ["expire", "a", "10", "NX"],
    ["pexpire", "a", "10"], ["expireat", "a", "10"], ["pexpireat", "a", "10", "GT"],
    ["ttl", "a"], ["pttl", "a"], ["expiretime", "a"], ["pexpiretime", "a"], ["persist", "a"],
    ["watch", "a", "b"], ["object", "encoding", "a"], ["object", "freq", "a"],
    ["object", "idletime", "a"], ["object", "refcount", "a"],
    ["memory", "usage", "a", "SAMPLES", "5"],
]


def read_reply(f):
    """The bytes of one whole reply."""
    line = f.readline()
    if not line:
        raise EOFError("connection closed")
    t, rest = line[:1], line[1:-2]
    if t in b"$=!":
        n = int(rest)
        return line + (f.read(n + 2) if n >= 0 else b"")
    if t in b"*~>":
        n = int(rest)
        return line + b"".join(read_reply(f) for _ in range(max(n, 0)))
    if t == b"%":
        return line + b"".join(read_reply(f) for _ in range(2 * int(rest)))
    return line


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.f = sock.makefile("rb")

    def call(self, *args):
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(req)
        return read_reply(self.f)


def redis_server(tmp):
    exe = shutil.which("redis-server")
    if not exe:
        bail("redis-server not found (scripts/bootstrap installs redis-server)")
    path = os.path.join(tmp, "r.sock")
    proc = subprocess.Popen([exe, "--port", "0", "--unixsocket", path, "--daemonize", "no",
                             "--save", "", "--appendonly", "no", "--dir", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            preexec_fn=pdeathsig)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            return proc, s
        except OSError:
            time.sleep(0.05)
    proc.kill()
    bail("redis-server did not start")


def pair(port, rsock, resp):
    b = Conn(socket.create_connection(("127.0.0.1", port)))
    r = Conn(rsock)
    if resp == 3:
        b.call("HELLO", "3")
        r.call("HELLO", "3")
    else:
        r.call("HELLO", "2")
    return b, r


def run(port, rsock):
    names = Conn(socket.create_connection(("127.0.0.1", port))).call("COMMAND", "LIST")
    names = [n for n in names.split(b"\r\n")[2::2] if n]
    names = [n.decode() for n in names]
    containers = {n.split("|")[0] for n in names if "|" in n}
    for resp in (2, 3):
        b, r = pair(port, rsock, resp)
        for name in names:
            if name.startswith("bf.") or name in containers:
                continue
            want = r.call("COMMAND", "INFO", name)
            if want in (b"*1\r\n$-1\r\n", b"*1\r\n_\r\n"):
                ok(f"RESP{resp} COMMAND INFO {name}: Redis 7.0 lacks it")
                continue
            is_(f"RESP{resp} COMMAND INFO {name}", b.call("COMMAND", "INFO", name), want)
            is_(f"RESP{resp} COMMAND DOCS {name}", b.call("COMMAND", "DOCS", name),
                r.call("COMMAND", "DOCS", name))
        for call in KEYED:
            is_(f"RESP{resp} COMMAND GETKEYSANDFLAGS {' '.join(call)}",
                b.call("COMMAND", "GETKEYSANDFLAGS", *call),
                r.call("COMMAND", "GETKEYSANDFLAGS", *call))
        for call in (["ping"], ["nosuch", "a"], ["rename", "a"], ["object", "nosuch", "a"],
                     ["client", "list"]):
            is_(f"RESP{resp} COMMAND GETKEYS {' '.join(call)} (an error)",
                b.call("COMMAND", "GETKEYS", *call), r.call("COMMAND", "GETKEYS", *call))
    listed = {n for n in names if not n.startswith("bf.")} - containers
    missing = [n for n in listed if n not in {" ".join(c[:2]).replace(" ", "|") for c in KEYED}
               and n not in {c[0] for c in KEYED}]
    # Every Redis command with keys is in KEYED: one without a sample would go unchecked.
    b, r = pair(port, rsock, 2)
    for n in missing:
        reply = r.call("COMMAND", "INFO", n)
        if b"begin_search" in reply:
            not_ok(f"{n} has keys but no sample call in KEYED")
    ok("every Redis command with keys has a sample call")


def main():
    d = Daemon()
    tmp = d.dir
    proc = None
    try:
        d.start()
        proc, rsock = redis_server(tmp)
        try:
            run(d.port, rsock)
        except Exception as e:  # noqa: BLE001
            not_ok("cases ran to the end", repr(e))
        status = d.stop()
        is_("blossomd exits 0 on SIGTERM", status, 0)
        print(f"1..{redis_py.N}", flush=True)
    finally:
        if proc:
            proc.kill()
            proc.wait()
        d.cleanup()
    sys.exit(1 if redis_py.FAILED else 0)


if __name__ == "__main__":
    main()
