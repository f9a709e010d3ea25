#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The guard (examples/guard) end to end, over a real PostgreSQL, and the client snippets
(examples/snippets) against the live daemon. Prints TAP.

Makes a throwaway PostgreSQL cluster (examples/guard/throwaway_pg.py: Debian's initdb and
pg_ctl, a temporary directory, a free loopback port, pg_stat_statements loaded), seeds USERS
users, starts $BLOSSOMD_BIN (free loopback ports, temporary data directory) and the example
backend, which bulk-loads every id into the filter before it listens. Then:
  - every seeded id is in the filter, and every one is found through the backend (200, its
    own row), each lookup one query by pg_stat_statements;
  - users created through the backend are found by a GET sent the moment the create answers,
    from several threads at once: never a 404;
  - ABSENT random absent ids are all 404, and the lookups that reached PostgreSQL
    (pg_stat_statements' calls of the lookup query, before and after) are exactly the filter's
    false positives among them (asked of blossomd directly), at most 2 % of them (the filter is
    made for 1 %, and is half full);
  - snippet.py and snippet.mjs print what they should against the daemon, and doc/http-api.md shows
    each file verbatim;
  - with blossomd stopped (SIGTERM, exit 0), a lookup still finds an existing user (fail open)
    and a create answers 503 and leaves no row behind.
PostgreSQL is stopped by PID and the daemons killed at the end, on failure and on SIGTERM.
$BLOSSOMD_WRAPPER, if set, is put in front of the binary (split at spaces).

Run with Debian's /usr/bin/python3 (python3-psycopg2, python3-requests).
"""
import ctypes
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GUARD_DIR = os.path.join(ROOT, "examples", "guard")
SNIPPETS = os.path.join(ROOT, "examples", "snippets")
USERS = 20000
CREATES = 400          # through the backend, CREATE_THREADS at once
CREATE_THREADS = 4
ABSENT = 5000
CAPACITY = 40000       # the filter's, at 1 %: USERS + CREATES fill it to about half
FP_TOLERANCE = 0.02

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


def check(name, cond, diag=""):
    if cond:
        ok(name)
    else:
        not_ok(name, diag)
    return cond


def is_(name, got, want):
    return check(name, got == want, f"expected: {want!r}\ngot:      {got!r}")


def bail(msg):
    print(f"Bail out! {msg}", flush=True)
    sys.exit(1)


def case(fn):
    """Run fn as a group of cases; an unexpected exception fails one."""
    try:
        fn()
    except Exception:  # noqa: BLE001 - reported as a failed case
        not_ok(f"{fn.__name__}: unexpected exception", traceback.format_exc())
    return fn


sys.dont_write_bytecode = True  # no __pycache__ in examples/guard
sys.path.insert(0, GUARD_DIR)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ports import free_port  # noqa: E402  (tests/ports.py)
try:
    import psycopg2
    import requests
    import throwaway_pg
except ImportError as e:
    bail(f"{e} (scripts/bootstrap installs python3-psycopg2 and python3-requests; "
         "run with /usr/bin/python3)")


# ---- processes ------------------------------------------------------------------------

def pdeathsig():
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def wait_port(port, proc, what, log_path, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            bail(f"{what} exited {proc.returncode} during start-up:\n{read(log_path)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    bail(f"{what} did not listen on {port} within {timeout} s:\n{read(log_path)}")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


class Procs:
    """The test's children: killed by PID at the end, whatever happens."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def start(self, name, argv, env=None):
        log_path = os.path.join(self.tmp, name + ".log")
        with open(log_path, "wb") as log:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, env=env, preexec_fn=pdeathsig)
        self.procs.append(p)
        print(f"# {name} pid {p.pid}", flush=True)
        return p, log_path

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# ---- HTTP to the backend ----------------------------------------------------------------

_local = threading.local()


def get(port, path):
    """(status, parsed body) of a GET over this thread's kept-alive connection (http.client:
    lighter than requests, which matters for tens of thousands of lookups)."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.will_close:
        conn.close()
        _local.conn = None
    return r.status, json.loads(body)


def parallel(fn, items, threads=8):
    with ThreadPoolExecutor(threads) as ex:
        return list(ex.map(fn, items))


def lookup_calls(db):
    """How many times PostgreSQL ran the backend's lookup, by pg_stat_statements."""
    with db.cursor() as cur:
        cur.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
                    "WHERE query LIKE 'SELECT id, name, created_at FROM users WHERE id =%'")
        return int(cur.fetchone()[0])


def main(tmp, procs, pg):
    db = psycopg2.connect(pg.dsn)
    db.autocommit = True
    with db.cursor() as cur:
        cur.execute(read(os.path.join(GUARD_DIR, "schema.sql")))
        cur.execute("INSERT INTO users (name) SELECT 'user ' || g FROM generate_series(1, %s) g",
                    (USERS,))
        cur.execute("SELECT id, name FROM users ORDER BY id")
        seeded = cur.fetchall()
    print(f"# postgres pid {pg.pid} on 127.0.0.1:{pg.port}, {len(seeded)} users", flush=True)

    bin_ = os.environ.get("BLOSSOMD_BIN")
    if not bin_ or not os.access(bin_, os.X_OK):
        bail("BLOSSOMD_BIN is not set to an executable")
    data = os.path.join(tmp, "blossomd")
    os.mkdir(data)
    bport, hport = free_port(), free_port()
    wrapper = os.environ.get("BLOSSOMD_WRAPPER", "").split()  # e.g. valgrind (scripts/test)
    blossomd, blog = procs.start("blossomd", wrapper + [bin_, "--port", str(bport),
                                                        "--http-port", str(hport),
                                                        "--data-dir", data])
    wait_port(hport, blossomd, "blossomd", blog, timeout=60)
    burl = f"http://127.0.0.1:{hport}"

    gport = free_port()
    env = dict(os.environ, GUARD_DSN=pg.dsn, GUARD_BLOSSOMD_URL=burl, GUARD_PORT=str(gport),
               GUARD_CAPACITY=str(CAPACITY), GUARD_ERROR_RATE="0.01", GUARD_DB_POOL="8",
               PYTHONDONTWRITEBYTECODE="1")
    t0 = time.monotonic()
    guard, glog = procs.start("guard", ["/usr/bin/python3", os.path.join(GUARD_DIR, "guard.py")],
                              env)
    wait_port(gport, guard, "the guard backend", glog)
    print(f"# backend listening after {time.monotonic() - t0:.2f} s; its log:", flush=True)
    for line in read(glog).splitlines():
        print(f"#   {line}", flush=True)
    gurl = f"http://127.0.0.1:{gport}"

    @case
    def bulk_load():
        check(f"the backend bulk-loaded {USERS} ids at start",
              f"bulk load: {USERS} ids" in read(glog), read(glog))
        missing = []
        for i in range(0, len(seeded), 5000):
            keys = [str(uid) for uid, _ in seeded[i:i + 5000]]
            r = requests.post(f"{burl}/v1/filters/users/check", json={"keys": keys}, timeout=30)
            r.raise_for_status()
            missing += [k for k, present in zip(keys, r.json()["results"]) if not present]
        is_(f"blossomd holds all {USERS} seeded ids", missing[:10], [])

    @case
    def existing_found():
        before = lookup_calls(db)
        t = time.monotonic()

        def lookup(row):
            return (row, *get(gport, f"/users/{row[0]}"))

        wrong = [(row, status, doc) for row, status, doc in parallel(lookup, seeded)
                 if status != 200 or (doc["id"], doc["name"]) != row]
        print(f"# {USERS} lookups in {time.monotonic() - t:.2f} s", flush=True)
        is_(f"every one of {USERS} existing ids is found (200, its own row)", wrong[:5], [])
        is_("each of those lookups queried PostgreSQL once (pg_stat_statements)",
            lookup_calls(db) - before, USERS)

    @case
    def create_then_get():
        def worker(t):
            s = requests.Session()
            bad = []
            for i in range(CREATES // CREATE_THREADS):
                name = f"new {t}.{i}"
                r = s.post(f"{gurl}/users", json={"name": name}, timeout=30)
                if r.status_code != 201:
                    bad.append(("create", name, r.status_code, r.text))
                    continue
                uid = r.json()["id"]
                g = s.get(f"{gurl}/users/{uid}", timeout=30)
                if g.status_code != 200 or g.json().get("name") != name:
                    bad.append(("get", uid, g.status_code, g.text))
            return bad

        bad = sum(parallel(worker, range(CREATE_THREADS), CREATE_THREADS), [])
        is_(f"{CREATES} users created through the backend ({CREATE_THREADS} threads), each "
            "found by a GET sent the moment its create answered: never a 404", bad[:5], [])

    @case
    def absent_skip_database():
        rnd = random.Random()
        ids = rnd.sample(range(10**12, 2**63 - 1), ABSENT)  # identity ids never get there
        before = lookup_calls(db)
        statuses = parallel(lambda uid: get(gport, f"/users/{uid}")[0], ids)
        queried = lookup_calls(db) - before
        is_(f"{ABSENT} random absent ids are all 404",
            sorted(set(statuses)), [404])
        r = requests.post(f"{burl}/v1/filters/users/check",
                          json={"keys": [str(i) for i in ids]}, timeout=30)
        r.raise_for_status()
        fps = sum(r.json()["results"])
        print(f"# absent lookups that reached PostgreSQL: {queried} of {ABSENT} "
              f"({100 * queried / ABSENT:.2f} %); the filter's false positives among them: "
              f"{fps}", flush=True)
        is_("only the filter's false positives among them reached PostgreSQL "
            "(pg_stat_statements calls before and after)", queried, fps)
        check(f"false positives at most {FP_TOLERANCE:.0%} of the absent lookups "
              "(the filter is made for 1 %)", fps <= FP_TOLERANCE * ABSENT,
              f"{fps} of {ABSENT}")

    @case
    def snippets():
        env = dict(os.environ, BLOSSOMD_URL=burl)
        want_py = ("added: [True, True]\nalice@example.com present: True\n"
                   "carol@example.com present: False\n")
        want_js = ("added: [ true, true ]\nalice@example.com present: true\n"
                   "carol@example.com present: false\n")
        node = shutil.which("node")
        runs = [("snippet.py", ["/usr/bin/python3"], want_py),
                ("snippet.mjs", [node] if node else None, want_js)]
        page = read(os.path.join(ROOT, "doc", "http-api.md"))
        for name, interp, want in runs:
            path = os.path.join(SNIPPETS, name)
            check(f"doc/http-api.md shows examples/snippets/{name} verbatim", read(path) in page)
            if interp is None:
                not_ok(f"{name} runs", "node not found (scripts/bootstrap installs nodejs)")
                continue
            requests.delete(f"{burl}/v1/filters/emails", timeout=10)  # a fresh filter each
            p = subprocess.run(interp + [path], env=env, capture_output=True, text=True,
                               timeout=30)
            is_(f"{name} against the live daemon: exit 0 and its output",
                (p.returncode, p.stdout, p.stderr), (0, want, ""))

    @case
    def blossomd_down():
        with db.cursor() as cur:
            cur.execute("SELECT count(*) FROM users")
            count = cur.fetchone()[0]
        blossomd.send_signal(signal.SIGTERM)
        status = blossomd.wait(60)
        check("blossomd stops on SIGTERM with exit 0", status == 0,
              f"exit status {status}; its log:\n{read(blog)}")
        uid, name = seeded[123]
        r = requests.get(f"{gurl}/users/{uid}", timeout=30)
        is_("with blossomd down, an existing id is still found (the lookup fails open to "
            "PostgreSQL)", (r.status_code, r.json().get("name")), (200, name))
        r = requests.get(f"{gurl}/users/{10**15}", timeout=30)
        is_("with blossomd down, an absent id is still 404", r.status_code, 404)
        r = requests.post(f"{gurl}/users", json={"name": "lost"}, timeout=30)
        is_("with blossomd down, a create answers 503", r.status_code, 503)
        with db.cursor() as cur:
            cur.execute("SELECT count(*) FROM users")
            is_("... and its INSERT was rolled back (no row the filter does not know)",
                cur.fetchone()[0], count)

    check("the backend is still running", guard.poll() is None, read(glog))
    db.close()


def run():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below runs
    tmp = tempfile.mkdtemp(prefix="blossomd-guard.")
    procs = Procs(tmp)
    pg = None
    t0 = time.monotonic()
    try:
        try:
            pg = throwaway_pg.Cluster(prefix="blossomd-guard-pg.").start()
        except throwaway_pg.PgError as e:
            bail(f"no throwaway PostgreSQL cluster: {e}")
        main(tmp, procs, pg)
    finally:
        procs.kill_all()
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{N}")
    print(f"# {time.monotonic() - t0:.1f} s", flush=True)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    run()
