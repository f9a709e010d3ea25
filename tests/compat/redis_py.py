#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Debian's redis-py (python3-redis, r.bf()) against the real blossomd. Prints TAP.

Starts $BLOSSOMD_BIN on a free loopback port with its own temporary directory (HTTP off),
runs the cases, stops the daemon by PID with SIGTERM and checks that it exits 0. The daemon
gets PR_SET_PDEATHSIG so it dies with this process whatever happens.
$BLOSSOMD_WRAPPER, if set, is put in front of the binary (split at spaces).

Run with Debian's /usr/bin/python3: it is the one with python3-redis.
"""
import ctypes
import datetime
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ports import free_port  # noqa: E402  (tests/ports.py)

N = 0
FAILED = 0


def ok(name):
    global N
    N += 1
    print(f"ok {N} - {name}", flush=True)


def not_ok(name, diag=""):
    global N, FAILED
    N += 1
    FAILED += 1
    print(f"not ok {N} - {name}", flush=True)
    for line in str(diag).splitlines():
        print(f"#   {line}", flush=True)


def bail(msg):
    print(f"Bail out! {msg}", flush=True)
    sys.exit(1)


def is_(name, got, want):
    if got == want:
        ok(name)
    else:
        not_ok(name, f"expected: {want!r}\ngot:      {got!r}")


def raises(name, fn, exc_type, message):
    """fn() must raise exc_type whose str() is exactly message."""
    try:
        got = fn()
    except exc_type as e:
        is_(name, str(e), message)
        return
    except Exception as e:  # noqa: BLE001 - reported as a failed case
        not_ok(name, f"raised {type(e).__name__}: {e}")
        return
    not_ok(name, f"no exception; returned {got!r}")


def case(name):
    """Decorator: run the function as a group of cases; an unexpected exception fails one."""

    def wrap(fn):
        try:
            fn()
        except Exception:  # noqa: BLE001
            not_ok(f"{name}: unexpected exception", traceback.format_exc())
        return fn

    return wrap


try:
    import redis
    from redis.exceptions import ResponseError, WatchError
except ImportError as e:
    bail(f"redis-py not importable by {sys.executable} ({e}); "
         "install python3-redis and run with /usr/bin/python3")


# ---- the daemon ------------------------------------------------------------------------

def pdeathsig():
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Daemon:
    def __init__(self):
        self.bin = os.environ.get("BLOSSOMD_BIN")
        if not self.bin or not os.access(self.bin, os.X_OK):
            bail("BLOSSOMD_BIN is not set to an executable")
        self.dir = tempfile.mkdtemp(prefix="blossomd-compat.")
        os.mkdir(os.path.join(self.dir, "data"))
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.proc = None
        self.port = None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def start(self):
        wrapper = os.environ.get("BLOSSOMD_WRAPPER", "").split()
        for attempt in range(3):
            self.port = free_port()
            argv = wrapper + [self.bin, "--port", str(self.port), "--http-port", "0",
                              "--data-dir", os.path.join(self.dir, "data")]
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, preexec_fn=pdeathsig)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    print(f"# blossomd pid {self.proc.pid} on 127.0.0.1:{self.port}", flush=True)
                    return
                except OSError:
                    time.sleep(0.05)
            if self.proc.poll() is None:
                self.kill()
                bail("blossomd did not accept connections within 20 s\n" + self.log())
            print(f"# blossomd exited during start-up (try {attempt + 1}):", flush=True)
            for line in self.log().splitlines():
                print(f"#   {line}")
            self.proc = None
        bail("blossomd did not start")

    def stop(self, timeout=30):
        """SIGTERM; the exit status, or None if it had to be killed."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self.proc = None
        return status

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Text:
    """A text-protocol connection: one line out, one reply (or START ... END) back."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.sock.makefile("rb")

    def cmd(self, line):
        self.sock.sendall(line.encode() + b"\n")
        reply = self.f.readline().decode()
        if reply == "START\n":
            while True:
                more = self.f.readline().decode()
                reply += more
                if more in ("END\n", ""):
                    break
        return reply

    def close(self):
        self.f.close()
        self.sock.close()


# ---- the cases -------------------------------------------------------------------------

def run(port):
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
    bf = r.bf()

    @case("connection")
    def _():
        is_("PING", r.ping(), True)
        is_("INFO has loading:0", r.info().get("loading"), 0)
        is_("CLIENT SETNAME", r.client_setname("compat"), True)

    @case("create/add/madd")
    def _():
        is_("bf().create('f', 0.01, 1000)", bf.create("f", 0.01, 1000), True)
        raises("create on an existing name", lambda: bf.create("f", 0.01, 1000),
               ResponseError, "item exists")
        is_("add new", bf.add("f", "a"), 1)
        is_("add again", bf.add("f", "a"), 0)
        is_("madd", bf.madd("f", "a", "b", "c"), [0, 1, 1])
        is_("add bytes with NUL and 0xff", bf.add("f", b"\x00\xff\x00"), 1)

    @case("exists/mexists")
    def _():
        is_("exists present", bf.exists("f", "b"), 1)
        is_("exists absent", bf.exists("f", "never-added"), 0)
        is_("exists binary", bf.exists("f", b"\x00\xff\x00"), 1)
        is_("exists binary prefix differs", bf.exists("f", b"\x00\xff"), 0)
        is_("exists on a missing filter", bf.exists("missing", "x"), 0)
        is_("mexists", bf.mexists("f", "a", "c", "never-added"), [1, 1, 0])
        is_("mexists on a missing filter", bf.mexists("missing", "x", "y"), [0, 0])

    @case("insert")
    def _():
        is_("insert with capacity and error creates",
            bf.insert("g", ["x", "y", "x"], capacity=500, error=0.001), [1, 1, 0])
        info = bf.info("g")
        is_("insert's capacity is the filter's", info.capacity, 500)
        is_("insert noCreate into an existing filter", bf.insert("g", ["x", "z"], noCreate=True),
            [0, 1])
        raises("insert noCreate on a missing filter",
               lambda: bf.insert("nope", ["x"], noCreate=True), ResponseError, "not found")
        is_("insert expansion", bf.insert("h", ["x"], expansion=4), [1])
        is_("insert expansion is the filter's", bf.info("h").expansionRate, 4)
        is_("insert noScale", bf.insert("ns", ["x"], capacity=10, noScale=True), [1])
        is_("insert noScale: expansionRate None", bf.info("ns").expansionRate, None)
        raises("insert bad capacity", lambda: bf.insert("bad", ["a"], capacity=0),
               ResponseError, "Bad capacity")
        raises("insert bad error", lambda: bf.insert("bad", ["a"], error=1.5),
               ResponseError, "Bad error rate")

    @case("info/card")
    def _():
        info = bf.info("f")
        is_("info.capacity", info.capacity, 1000)
        is_("info.size is a positive integer", isinstance(info.size, int) and info.size > 0, True)
        is_("info.filterNum", info.filterNum, 1)
        is_("info.insertedNum", info.insertedNum, 4)
        is_("info.expansionRate", info.expansionRate, 2)
        t = Text(port)
        storage = [ln for ln in t.cmd("info f").splitlines() if ln.startswith("storage ")]
        t.close()
        is_("info.size equals the text protocol's storage", storage, [f"storage {info.size}"])
        # r.bf() set BF.INFO's reply callback on r; a plain client reads the one-field form.
        plain = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
        is_("BF.INFO f ITEMS", plain.execute_command("BF.INFO", "f", "ITEMS"), [4])
        plain.close()
        # redis-py 4.3.4's r.bf() has no card(); the command goes through execute_command.
        is_("BF.CARD", r.execute_command("BF.CARD", "f"), 4)
        is_("BF.CARD on a missing filter", r.execute_command("BF.CARD", "missing"), 0)
        raises("info on a missing filter", lambda: bf.info("missing"), ResponseError, "not found")

    @case("errors")
    def _():
        raises("create: error rate out of range", lambda: bf.create("e", 1.5, 100),
               ResponseError, "error rate must be in the range (0.000000, 1.000000)")
        raises("create: bad error rate", lambda: bf.create("e", "abc", 100),
               ResponseError, "bad error rate")
        raises("create: bad capacity", lambda: bf.create("e", 0.01, "lots"),
               ResponseError, "bad capacity")
        raises("create: capacity out of range", lambda: bf.create("e", 0.01, 0),
               ResponseError, "capacity must be in the range [1, 1073741824]")
        raises("BF.ADD wrong arity", lambda: r.execute_command("BF.ADD", "f"),
               ResponseError, "wrong number of arguments for 'bf.add' command")
        is_("create noScale", bf.create("n", 0.01, 2, noScale=True), True)
        res = bf.madd("n", "a", "b", "c", "d")
        is_("madd into a full non-scaling filter: two results and an error",
            [type(x).__name__ for x in res], ["int", "int", "ResponseError"])
        is_("the error element's message", str(res[2]), "non scaling filter is full")
        raises("add into a full non-scaling filter", lambda: bf.add("n", "e"),
               ResponseError, "non scaling filter is full")

    @case("keyspace")
    def _():
        is_("TYPE", r.type("f"), b"MBbloom--")
        is_("EXISTS", r.exists("f", "g", "missing"), 2)
        is_("DEL", r.delete("h"), 1)
        is_("KEYS", sorted(r.keys("*")), [b"f", b"g", b"n", b"ns"])
        # A real cursor: scan_iter follows it over several calls and sees each name once.
        p = r.pipeline(transaction=False)
        for i in range(300):
            p.bf().create(f"scan:{i}", 0.01, 100)
        p.execute()
        cursor, first = r.scan(0, match="scan:*", count=10)
        is_("SCAN COUNT 10 over 300 filters returns a cursor to go on from", cursor != 0, True)
        names = list(r.scan_iter(match="scan:*", count=10))
        is_("scan_iter sees each of 300 filters once", sorted(names),
            sorted(f"scan:{i}".encode() for i in range(300)))
        r.delete(*[f"scan:{i}" for i in range(300)])

    @case("scandump/loadchunk")
    def _():
        # A scaling filter with several layers, and a large one that needs several chunks.
        p = r.pipeline(transaction=False)
        p.bf().create("layers", 0.01, 1000)
        for i in range(5000):
            p.bf().add("layers", f"k{i}")
        p.execute()
        is_("the scaling filter grew", bf.info("layers").filterNum > 1, True)
        bf.create("big", 0.001, 1500000)
        bf.madd("big", *[f"b{i}" for i in range(2000)])

        for name in ("layers", "big"):
            chunks = []
            it = 0
            while True:
                it, data = bf.scandump(name, it)
                if it == 0:
                    break
                chunks.append((it, data))
            if name == "big":
                is_("the big dump has several chunks", len(chunks) > 2, True)
            for it, data in chunks:
                bf.loadchunk(name + "-copy", it, data)
            a, b = bf.info(name), bf.info(name + "-copy")
            is_(f"{name}: the copy's info is the same",
                (b.capacity, b.size, b.filterNum, b.insertedNum, b.expansionRate),
                (a.capacity, a.size, a.filterNum, a.insertedNum, a.expansionRate))
            prefix, added = ("k", 5000) if name == "layers" else ("b", 2000)
            keys = [f"{prefix}{i}" for i in range(0, 10000, 7)]
            is_(f"{name}: the copy answers as the original for present and absent keys",
                bf.mexists(name + "-copy", *keys), bf.mexists(name, *keys))
            present = [f"{prefix}{i}" for i in range(added)]
            is_(f"{name}: the copy holds every added key",
                all(bf.mexists(name + "-copy", *present)), True)
        raises("loadchunk of a bad header", lambda: bf.loadchunk("bad", 1, b"not a header"),
               ResponseError, "received bad data")

    @case("pipeline")
    def _():
        bf.create("p", 0.001, 100000)
        p = r.pipeline(transaction=False)
        for i in range(1000):
            p.bf().add("p", f"pipe{i}")
        res = p.execute()
        is_("a pipeline of 1000 BF.ADD answers 1000 replies", len(res), 1000)
        is_("every pipelined add was new", sum(res), 1000)
        is_("BF.CARD after the pipeline", r.execute_command("BF.CARD", "p"), 1000)
        is_("mexists of the 1000 keys", bf.mexists("p", *[f"pipe{i}" for i in range(1000)]),
            [1] * 1000)

    @case("text <-> RESP")
    def _():
        t = Text(port)
        is_("text create", t.cmd("create x capacity=1000 prob=0.01"), "Done\n")
        is_("text set", t.cmd("set x from-text"), "Yes\n")
        is_("set over text, exists over redis-py", bf.exists("x", "from-text"), 1)
        is_("add over redis-py", bf.add("x", "from-resp"), 1)
        is_("add over redis-py, check over text", t.cmd("check x from-resp"), "Yes\n")
        is_("madd over redis-py, multi over text",
            (bf.madd("x", "m1", "m2"), t.cmd("multi x m1 m2 m3")), ([1, 1], "Yes Yes No\n"))
        is_("a key with spaces: add over redis-py, check over text",
            (bf.add("x", "two words"), t.cmd("check x two words")), (1, "Yes\n"))
        is_("bulk over text, mexists over redis-py",
            (t.cmd("bulk x t1 t2"), bf.mexists("x", "t1", "t2", "t3")), ("Yes Yes\n", [1, 1, 0]))
        is_("insertedNum counts both protocols' adds", bf.info("x").insertedNum, 7)
        t.close()

    @case("rename/renamenx")
    def _():
        bf.create("rn:a", 0.0001, 1000)
        bf.madd("rn:a", "a1", "a2", "a3")
        is_("rename", r.rename("rn:a", "rn:b"), True)
        is_("the old name is gone", r.exists("rn:a"), 0)
        is_("the new name holds the keys", bf.mexists("rn:b", "a1", "a2", "a3", "zz"),
            [1, 1, 1, 0])
        is_("the new name's info", (bf.info("rn:b").capacity, bf.info("rn:b").insertedNum),
            (1000, 3))
        is_("TYPE of the new name", r.type("rn:b"), b"MBbloom--")
        raises("rename of a missing key", lambda: r.rename("rn:a", "rn:c"), ResponseError,
               "no such key")
        raises("renamenx of a missing key", lambda: r.renamenx("rn:a", "rn:c"), ResponseError,
               "no such key")
        is_("rename to its own name", r.rename("rn:b", "rn:b"), True)
        is_("renamenx to its own name", r.renamenx("rn:b", "rn:b"), False)
        is_("renamenx to a free name", r.renamenx("rn:b", "rn:c"), True)
        bf.create("rn:t", 0.0001, 500)
        bf.add("rn:t", "t1")
        is_("renamenx to a taken name", r.renamenx("rn:c", "rn:t"), False)
        is_("renamenx refused: both unchanged",
            (bf.exists("rn:c", "a1"), bf.exists("rn:t", "t1"), bf.exists("rn:t", "a1")),
            (1, 1, 0))
        is_("rename over an existing filter", r.rename("rn:c", "rn:t"), True)
        is_("the target is the renamed filter",
            (bf.mexists("rn:t", "a1", "t1"), bf.info("rn:t").capacity, r.exists("rn:c")),
            ([1, 0], 1000, 0))
        raises("rename to a name with a space", lambda: r.rename("rn:t", "rn x"), ResponseError,
               "bad filter name")
        raises("rename to an empty name", lambda: r.rename("rn:t", ""), ResponseError,
               "bad filter name")
        raises("renamenx to a 201-byte name", lambda: r.renamenx("rn:t", "n" * 201),
               ResponseError, "bad filter name")
        is_("rename to a 200-byte name and back",
            (r.rename("rn:t", "n" * 200), r.rename("n" * 200, "rn:t")), (True, True))
        is_("rename to a UTF-8 name and back",
            (r.rename("rn:t", "caf\u00e9"), bf.exists("caf\u00e9", "a1"),
             r.rename("caf\u00e9", "rn:t")), (True, 1, True))
        raises("RENAME wrong arity", lambda: r.execute_command("RENAME", "rn:t"), ResponseError,
               "wrong number of arguments for 'rename' command")
        raises("RENAMENX wrong arity", lambda: r.execute_command("RENAMENX", "rn:t", "a", "b"),
               ResponseError, "wrong number of arguments for 'renamenx' command")
        # A pipeline of a swap: build rn:new, rename it over rn:t, check.
        p = r.pipeline(transaction=False)
        p.bf().add("rn:new", "fresh")
        p.rename("rn:new", "rn:t")
        p.bf().exists("rn:t", "fresh")
        p.bf().exists("rn:t", "a1")
        p.exists("rn:new")
        is_("a pipelined swap", p.execute(), [1, True, 1, 0, 0])
        is_("KEYS rn:* after the renames", sorted(r.keys("rn:*")), [b"rn:t"])
        r.delete("rn:t")

    @case("expire/ttl/persist")
    def _():
        bf.create("ex", 0.0001, 1000)
        bf.madd("ex", "e1", "e2")
        is_("ttl of a filter without a time", (r.ttl("ex"), r.pttl("ex")), (-1, -1))
        is_("ttl of a missing filter", (r.ttl("nope"), r.pttl("nope")), (-2, -2))
        is_("expiretime of a filter without a time / a missing one",
            (r.expiretime("ex"), r.expiretime("nope")), (-1, -2))
        is_("expire of a missing filter", r.expire("nope", 100), False)
        is_("persist without a time", r.persist("ex"), False)
        is_("expire", r.expire("ex", 100), True)
        is_("ttl", r.ttl("ex"), 100)
        is_("pttl within the second", 99000 < r.pttl("ex") <= 100000, True)
        is_("expire nx with a time set", r.expire("ex", 200, nx=True), False)
        is_("expire xx with a time set", r.expire("ex", 200, xx=True), True)
        is_("ttl after xx", r.ttl("ex"), 200)
        is_("expire gt with an earlier time", r.expire("ex", 100, gt=True), False)
        is_("expire gt with a later time", r.expire("ex", 300, gt=True), True)
        is_("expire lt with a later time", r.expire("ex", 400, lt=True), False)
        is_("expire lt with an earlier time", r.expire("ex", 50, lt=True), True)
        is_("ttl after lt", r.ttl("ex"), 50)
        is_("expire xx gt together", r.expire("ex", 60, xx=True, gt=True), True)
        is_("pexpire", r.pexpire("ex", 70000), True)
        is_("ttl after pexpire", r.ttl("ex"), 70)
        at = int(time.time()) + 5000
        is_("expireat", r.expireat("ex", at), True)
        is_("expiretime is the time given", r.expiretime("ex"), at)
        pat = int(time.time() * 1000) + 6000123
        is_("pexpireat", r.pexpireat("ex", pat), True)
        is_("pexpiretime is the time given", r.execute_command("PEXPIRETIME", "ex"), pat)
        is_("expire with a timedelta", r.expire("ex", datetime.timedelta(seconds=90)), True)
        is_("ttl after the timedelta", r.ttl("ex"), 90)
        is_("persist", r.persist("ex"), True)
        is_("ttl after persist", r.ttl("ex"), -1)
        is_("expire gt on a filter without a time (an infinite one)",
            r.expire("ex", 10, gt=True), False)
        is_("expire lt on a filter without a time", r.expire("ex", 10, lt=True), True)
        r.persist("ex")
        raises("expire nx and xx", lambda: r.expire("ex", 10, nx=True, xx=True), ResponseError,
               "NX and XX, GT or LT options at the same time are not compatible")
        raises("expire gt and lt", lambda: r.expire("ex", 10, gt=True, lt=True), ResponseError,
               "GT and LT options at the same time are not compatible")
        raises("expire with an unknown option",
               lambda: r.execute_command("EXPIRE", "ex", 10, "SOON"), ResponseError,
               "Unsupported option SOON")
        raises("expire of a word", lambda: r.execute_command("EXPIRE", "ex", "soon"),
               ResponseError, "value is not an integer or out of range")
        raises("expire past the largest time",
               lambda: r.execute_command("EXPIRE", "ex", 2**63 - 1), ResponseError,
               "invalid expire time in 'expire' command")
        raises("TTL wrong arity", lambda: r.execute_command("TTL"), ResponseError,
               "wrong number of arguments for 'ttl' command")
        is_("the filter is unchanged by the errors",
            (r.ttl("ex"), bf.mexists("ex", "e1", "e2")), (-1, [1, 1]))
        # RENAME keeps the time.
        r.expire("ex", 500)
        is_("rename keeps the time", (r.rename("ex", "ex2"), r.ttl("ex2"), r.ttl("ex")),
            (True, 500, -2))
        r.rename("ex2", "ex")
        # A time in the past drops the filter at once.
        bf.add("past", "x")
        is_("expire with a time past", r.expire("past", -1), True)
        is_("the filter is gone", (r.exists("past"), bf.exists("past", "x")), (0, 0))
        # A short time runs out: the filter and its keys are gone, on both protocols.
        bf.create("short", 0.0001, 1000)
        bf.madd("short", "s1", "s2")
        t = Text(port)
        is_("the text protocol sees it", t.cmd("check short s1"), "Yes\n")
        t0 = time.monotonic()
        is_("pexpire 300 ms", r.pexpire("short", 300), True)
        there = (r.exists("short"), bf.exists("short", "s1"))
        early = time.monotonic() - t0 < 0.25  # else the machine stalled: nothing to say
        is_("there before its time", there if early else (1, 1), (1, 1))
        while r.exists("short") and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        elapsed = time.monotonic() - t0
        is_("gone at its time, not before", 0.29 <= elapsed < 2, True)
        is_("ttl of the gone filter", r.ttl("short"), -2)
        is_("BF.EXISTS on the gone filter", bf.exists("short", "s1"), 0)
        is_("text check on the gone filter", t.cmd("check short s1"), "Filter does not exist\n")
        is_("text expires sets a time", (t.cmd("expires ex 40"), r.ttl("ex")), ("Done\n", 40))
        is_("text info's ttl line", t.cmd("info ex").splitlines()[-2], "ttl 40")
        t.close()
        is_("the other filter is untouched", (r.ttl("ex"), bf.mexists("ex", "e1", "e2")),
            (40, [1, 1]))
        is_("info keyspace: one filter with a time", r.info("keyspace")["db0"]["expires"], 1)
        is_("info stats: the one whose time came (not the one given a time past)",
            r.info("stats")["expired_keys"], 1)
        r.delete("ex")

    @case("flushall/flushdb")
    def _():
        bf.add("fl:a", "k")
        r.rename("fl:a", "fl:b")
        is_("flushall", r.flushall(), True)
        is_("dbsize after flushall", r.dbsize(), 0)
        is_("a renamed filter is gone after flushall", r.exists("fl:a", "fl:b"), 0)
        raises("rename after flushall", lambda: r.rename("fl:b", "fl:c"), ResponseError,
               "no such key")
        is_("add after flushall creates anew", bf.add("f", "a"), 1)
        is_("flushdb(asynchronous=True)", r.flushdb(asynchronous=True), True)
        is_("dbsize after flushdb", r.dbsize(), 0)
        bf.add("fl:a", "k")
        is_("FLUSHALL SYNC", r.execute_command("FLUSHALL", "SYNC"), True)
        is_("dbsize after FLUSHALL SYNC", r.dbsize(), 0)
        bf.add("fl:a", "k")
        is_("flushall(asynchronous=True)", r.flushall(asynchronous=True), True)
        is_("dbsize after FLUSHALL ASYNC", r.dbsize(), 0)
        bf.add("fl:a", "k")
        is_("FLUSHDB SYNC", r.execute_command("FLUSHDB", "SYNC"), True)
        is_("dbsize after FLUSHDB SYNC", r.dbsize(), 0)
        is_("a name used before a flush is new again",
            (bf.add("fl:a", "k"), bf.info("fl:a").insertedNum), (1, 1))
        raises("flushall with a bad argument", lambda: r.execute_command("FLUSHALL", "NOW"),
               ResponseError, "syntax error")
        raises("flushdb with two arguments",
               lambda: r.execute_command("FLUSHDB", "SYNC", "ASYNC"), ResponseError,
               "syntax error")


    @case("transactions (MULTI/EXEC, WATCH)")
    def _():
        r.flushall()
        p = r.pipeline()  # transaction=True: MULTI ... EXEC
        p.execute_command("BF.ADD", "tx", "a")
        p.execute_command("BF.MADD", "tx", "a", "b")
        p.execute_command("BF.EXISTS", "tx", "b")
        is_("pipeline(transaction=True) executes, one reply per command", p.execute(),
            [1, [0, 1], 1])
        # A command refused at queue time: EXECABORT, which redis-py reports as that error,
        # and nothing of the transaction applies.
        p = r.pipeline()
        p.execute_command("BF.ADD", "tx:abort", "a")
        p.execute_command("BF.ADD", "tx:abort")
        raises("EXECABORT", p.execute, ResponseError,
               "Command # 2 (BF.ADD tx:abort) of pipeline caused error: wrong number of "
               "arguments for 'bf.add' command")
        is_("nothing of an aborted transaction applied", r.exists("tx:abort"), 0)
        # A command failing at run time: its error in its place, the others applied.
        p = r.pipeline()
        p.execute_command("BF.RESERVE", "tx", "0.01", "10")
        p.execute_command("BF.ADD", "tx", "z")
        got = p.execute(raise_on_error=False)
        is_("run-time error in its place", ([str(x) for x in got[:1]], got[1]),
            (["item exists"], 1))
        # WATCH: a change by another client since makes EXEC return null (WatchError).
        other = redis.Redis(host="127.0.0.1", port=r.connection_pool.connection_kwargs["port"])
        with r.pipeline() as p:
            p.watch("tx:w")
            other.execute_command("BF.ADD", "tx:w", "x")
            p.multi()
            p.execute_command("BF.ADD", "tx:w", "y")
            raises("a WATCHed filter changed: WatchError", p.execute, WatchError,
                   "Watched variable changed.")
        is_("the transaction did not run", r.execute_command("BF.EXISTS", "tx:w", "y"), 0)
        # r.transaction() retries until no conflict.
        tries = []

        def body(pipe):
            tries.append(1)
            if len(tries) == 1:
                other.execute_command("BF.ADD", "tx:w", "again")
            pipe.multi()
            pipe.execute_command("BF.ADD", "tx:w", "y")

        is_("r.transaction() retries after a conflict", (r.transaction(body, "tx:w"), len(tries)),
            ([1], 2))
        other.close()

    @case("pub/sub (r.pubsub())")
    def _():
        def next_message(p, timeout=10):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                m = p.get_message(timeout=0.5)
                if m is not None:
                    return m
            return None

        p = r.pubsub()
        p.subscribe("news")
        is_("subscribe confirmation", next_message(p),
            {"type": "subscribe", "pattern": None, "channel": b"news", "data": 1})
        p.psubscribe("n*")
        is_("psubscribe confirmation", next_message(p),
            {"type": "psubscribe", "pattern": None, "channel": b"n*", "data": 2})
        is_("publish: two deliveries", r.publish("news", "hello"), 2)
        is_("message", next_message(p),
            {"type": "message", "pattern": None, "channel": b"news", "data": b"hello"})
        is_("pmessage", next_message(p),
            {"type": "pmessage", "pattern": b"n*", "channel": b"news", "data": b"hello"})
        is_("pubsub_numsub", r.pubsub_numsub("news", "none"), [(b"news", 1), (b"none", 0)])
        is_("pubsub_numpat", r.pubsub_numpat(), 1)
        is_("pubsub_channels", r.pubsub_channels(), [b"news"])
        is_("CLIENT LIST shows the subscriber",
            [(c["flags"], c["sub"], c["psub"]) for c in r.client_list() if c["flags"] == "P"],
            [("P", "1", "1")])
        p.unsubscribe()
        p.punsubscribe()
        is_("unsubscribe confirmation", next_message(p)["type"], "unsubscribe")
        is_("punsubscribe confirmation", next_message(p)["type"], "punsubscribe")
        p.close()

    @case("keyspace notifications")
    def _():
        is_("config_set notify-keyspace-events KEA",
            r.config_set("notify-keyspace-events", "KEA"), True)
        is_("config_get", r.config_get("notify-keyspace-events"),
            {"notify-keyspace-events": "AKE"})
        listener = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
        p = listener.pubsub(ignore_subscribe_messages=True)
        p.psubscribe("__keyspace@0__:ks*")
        p.subscribe("__keyevent@0__:del")
        deadline = time.monotonic() + 10
        while listener.pubsub_numpat() != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        # A change from another client, over RESP and over the text protocol.
        other = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
        other.execute_command("BF.ADD", "ks1", "x")
        t = Text(port)
        t.cmd("drop ks1")
        t.close()
        got = []
        while len(got) < 4 and time.monotonic() < deadline + 10:
            m = p.get_message(timeout=0.5)
            if m is not None:
                got.append((m["type"], m["channel"], m["data"]))
        is_("the events arrive, in order", got,
            [("pmessage", b"__keyspace@0__:ks1", b"bf.reserve"),
             ("pmessage", b"__keyspace@0__:ks1", b"bf.add"),
             ("pmessage", b"__keyspace@0__:ks1", b"del"),
             ("message", b"__keyevent@0__:del", b"ks1")])
        is_("config_set back to off", r.config_set("notify-keyspace-events", ""), True)
        p.close()
        other.close()
        listener.close()

def main():
    d = Daemon()
    try:
        d.start()
        try:
            run(d.port)
        except Exception:  # noqa: BLE001
            not_ok("cases ran to the end", traceback.format_exc())
        status = d.stop()
        if status == 0:
            ok("blossomd exits 0 on SIGTERM")
        else:
            not_ok("blossomd exits 0 on SIGTERM",
                   f"status {status} (None: killed after 30 s)\n{d.log()}")
        print(f"1..{N}", flush=True)
        if FAILED:
            print("# daemon log:")
            for line in d.log().splitlines():
                print(f"#   {line}")
    finally:
        d.cleanup()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
