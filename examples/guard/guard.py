#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""guard: users by id from PostgreSQL, with blossomd in front of the database.

    GET  /users/<id>   200 {"id":…,"name":…,"created_at":…} or 404
    POST /users        {"name":"…"} → 201 {"id":…,"name":…,"created_at":…}

A lookup asks blossomd first (GET /v1/filters/users/keys/<id>): "absent" is certain, so the
answer is 404 without touching the database; "present" may be a false positive (about
GUARD_ERROR_RATE of absent ids), which costs one query and still answers 404. A create
INSERTs, adds the id to the filter (PUT …/keys/<id>, acknowledged once durable) and only then
COMMITs and answers: once a row is visible its id is in the filter, so a lookup never misses an
existing user. If the add fails the INSERT is rolled back and the answer is 503. If blossomd
cannot be asked during a lookup, the lookup goes to the database (fail open: slower, never
wrong).

At start it creates the table (schema.sql) and the filter if missing, then streams every
existing id to blossomd in one request (POST …/add, text/plain, one id per line, chunked),
and only then listens.

Environment (defaults in brackets):
  GUARD_DSN            libpq connection string ["dbname=guard"]
  GUARD_BLOSSOMD_URL   blossomd's HTTP API ["http://127.0.0.1:8674"]
  GUARD_BLOSSOMD_TOKEN bearer token, if blossomd has an auth_token_file [none]
  GUARD_FILTER         filter name ["users"]
  GUARD_CAPACITY       capacity of the filter when this creates it [10000000]
  GUARD_ERROR_RATE     its false-positive rate [0.01]
  GUARD_BIND, GUARD_PORT  where to listen ["127.0.0.1", 8080]
  GUARD_DB_POOL        PostgreSQL connections [8]
  GUARD_SKIP_FILTER    1: lookups go straight to the database (for comparison in
                       bench/guard); creates still add to the filter [0]

Debian packages only: python3 and python3-psycopg2.
"""
import http.client
import http.server
import json
import os
import queue
import re
import sys
import time
import urllib.parse

try:
    import psycopg2
except ImportError:
    sys.exit("guard: psycopg2 is missing (apt-get install python3-psycopg2)")

HERE = os.path.dirname(os.path.abspath(__file__))
DSN = os.environ.get("GUARD_DSN", "dbname=guard")
BLOSSOMD_URL = os.environ.get("GUARD_BLOSSOMD_URL", "http://127.0.0.1:8674")
BLOSSOMD_TOKEN = os.environ.get("GUARD_BLOSSOMD_TOKEN", "")
FILTER = os.environ.get("GUARD_FILTER", "users")
CAPACITY = int(os.environ.get("GUARD_CAPACITY", "10000000"))
ERROR_RATE = float(os.environ.get("GUARD_ERROR_RATE", "0.01"))
BIND = os.environ.get("GUARD_BIND", "127.0.0.1")
PORT = int(os.environ.get("GUARD_PORT", "8080"))
DB_POOL = int(os.environ.get("GUARD_DB_POOL", "8"))
SKIP_FILTER = os.environ.get("GUARD_SKIP_FILTER", "0") == "1"

USER_PATH = re.compile(r"/users/([0-9]{1,19})")
MAX_ID = 2**63 - 1


def log(msg):
    print(f"guard: {msg}", file=sys.stderr, flush=True)


class BlossomdError(Exception):
    pass


class Blossomd:
    """One filter of blossomd's HTTP API, over kept-alive connections (one per request in
    flight, reused afterwards)."""

    def __init__(self, url, name, token):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.base = u.path.rstrip("/") + "/v1/filters/" + urllib.parse.quote(name, safe="")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.idle = queue.LifoQueue()

    def request(self, method, path, body=None, headers=None, timeout=5):
        """(status, parsed JSON body). A kept-alive connection the daemon has closed in the
        meantime is retried once on a new one; BlossomdError if it cannot be asked."""
        hdrs = dict(self.headers, **(headers or {}))
        for attempt in (1, 2):
            try:
                conn = self.idle.get_nowait()
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
            except queue.Empty:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            try:
                conn.request(method, self.base + path, body=body, headers=hdrs,
                             encode_chunked=body is not None and not isinstance(body, bytes))
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if attempt == 2 or not isinstance(body, (bytes, type(None))):
                    raise BlossomdError(f"{method} {self.base}{path}: {e}") from e
                continue
            if resp.will_close:
                conn.close()
            else:
                self.idle.put(conn)
            try:
                return resp.status, json.loads(data) if data else None
            except ValueError as e:
                raise BlossomdError(f"{method} {self.base}{path}: not JSON: {data[:200]!r}") from e

    def create(self, capacity, error_rate):
        """Create the filter unless it exists; True if this created it."""
        body = json.dumps({"capacity": capacity, "error_rate": error_rate}).encode()
        status, doc = self.request("PUT", "", body, {"Content-Type": "application/json"})
        if status not in (201, 409):
            raise BlossomdError(f"create {self.base}: {status} {doc}")
        return status == 201

    def present(self, key):
        status, doc = self.request("GET", "/keys/" + urllib.parse.quote(key, safe=""))
        if status != 200:
            raise BlossomdError(f"check {key}: {status} {doc}")
        return doc["present"]

    def add(self, key):
        status, doc = self.request("PUT", "/keys/" + urllib.parse.quote(key, safe=""))
        if status != 200:
            raise BlossomdError(f"add {key}: {status} {doc}")

    def bulk_add(self, lines, timeout=3600):
        """Stream an iterable of b"key\\n" chunks as one text/plain body; {"added","present"}."""
        status, doc = self.request("POST", "/add", lines, {"Content-Type": "text/plain"},
                                   timeout=timeout)
        if status != 200:
            raise BlossomdError(f"bulk add: {status} {doc}")
        return doc


class Database:
    """A fixed pool of PostgreSQL connections; a broken one is replaced on its next use."""

    def __init__(self, dsn, size):
        self.dsn = dsn
        self.pool = queue.Queue()
        for _ in range(size):
            self.pool.put(None)

    def _get(self):
        try:
            conn = self.pool.get(timeout=10)
        except queue.Empty:
            raise psycopg2.OperationalError("no free database connection within 10 s")
        if conn is None or conn.closed:
            try:
                conn = psycopg2.connect(self.dsn, application_name="guard")
                conn.autocommit = True
            except psycopg2.Error:
                self.pool.put(None)
                raise
        return conn

    def _put(self, conn, broken):
        if broken:
            conn.close()
        self.pool.put(None if broken else conn)

    def user(self, uid):
        conn = self._get()
        broken = True
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT id, name, created_at FROM users WHERE id = %s", (uid,))
                row = cur.fetchone()
            broken = False
        finally:
            self._put(conn, broken)
        return row

    def create(self, name, then):
        """INSERT, call then(id) inside the transaction, COMMIT; the row. If then raises, the
        INSERT is rolled back."""
        conn = self._get()
        broken = True
        try:
            with conn:  # a transaction (psycopg2 2.9: also on an autocommit connection)
                with conn.cursor() as cur:
                    cur.execute("INSERT INTO users (name) VALUES (%s) "
                                "RETURNING id, name, created_at", (name,))
                    row = cur.fetchone()
                then(row[0])
            broken = False
        except BlossomdError:
            broken = False
            raise
        finally:
            self._put(conn, broken)
        return row


def user_json(row):
    return {"id": row[0], "name": row[1], "created_at": row[2].isoformat()}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "guard"
    # Each answer in one write, sent at once: split small writes meet delayed ACKs otherwise.
    wbufsize = 65536
    disable_nagle_algorithm = True

    def reply(self, status, doc, headers=()):
        body = json.dumps(doc).encode() + b"\n"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):  # no access log; errors are logged where they happen
        pass

    def do_GET(self):
        m = USER_PATH.fullmatch(self.path)
        if not m or int(m[1]) > MAX_ID:
            return self.reply(404, {"error": "not found"})
        uid = int(m[1])
        if not SKIP_FILTER:
            try:
                if not self.server.filter.present(str(uid)):
                    return self.reply(404, {"error": "no such user"})
            except BlossomdError as e:
                log(f"filter unavailable, asking the database: {e}")
        try:
            row = self.server.db.user(uid)
        except psycopg2.Error as e:
            log(f"lookup {uid}: {e}")
            return self.reply(503, {"error": "database unavailable"})
        if row is None:
            return self.reply(404, {"error": "no such user"})
        self.reply(200, user_json(row))

    def do_POST(self):
        if self.path != "/users":
            return self.reply(404, {"error": "not found"})
        try:
            n = int(self.headers.get("Content-Length", "0"))
            if not 0 < n <= 65536:
                raise ValueError("a JSON body of at most 64 KiB is needed")
            name = json.loads(self.rfile.read(n))["name"]
            if not isinstance(name, str) or not name:
                raise ValueError('"name" must be a non-empty string')
        except (ValueError, KeyError, TypeError) as e:
            self.close_connection = True
            return self.reply(400, {"error": f"bad request: {e}"})
        try:
            row = self.server.db.create(name, lambda uid: self.server.filter.add(str(uid)))
        except BlossomdError as e:
            log(f"create rolled back, the filter did not take the id: {e}")
            return self.reply(503, {"error": "filter unavailable, nothing created"})
        except psycopg2.Error as e:
            log(f"create: {e}")
            return self.reply(503, {"error": "database unavailable"})
        self.reply(201, user_json(row), [("Location", f"/users/{row[0]}")])


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def bulk_load(dsn, flt):
    """Every id in users, streamed to the filter from a server-side cursor."""
    conn = psycopg2.connect(dsn, application_name="guard-bulk-load")
    try:
        with conn, conn.cursor(name="guard_ids") as cur:
            cur.itersize = 50000
            cur.execute("SELECT id FROM users")

            def chunks():
                batch = []
                for (uid,) in cur:
                    batch.append(b"%d\n" % uid)
                    if len(batch) == 50000:
                        yield b"".join(batch)
                        batch = []
                if batch:
                    yield b"".join(batch)

            return flt.bulk_add(chunks())
    finally:
        conn.close()


def start(flt):
    """The table and the filter if missing, then every id into the filter."""
    with psycopg2.connect(DSN, application_name="guard") as conn, conn.cursor() as cur:
        cur.execute(open(os.path.join(HERE, "schema.sql")).read())
    conn.close()
    if flt.create(CAPACITY, ERROR_RATE):
        log(f"created filter {FILTER} (capacity {CAPACITY}, error rate {ERROR_RATE})")
    t0 = time.monotonic()
    counts = bulk_load(DSN, flt)
    log(f"bulk load: {counts['added'] + counts['present']} ids in "
        f"{time.monotonic() - t0:.2f} s ({counts['added']} added, {counts['present']} present)")


def main():
    flt = Blossomd(BLOSSOMD_URL, FILTER, BLOSSOMD_TOKEN)
    try:
        start(flt)
    except (BlossomdError, psycopg2.Error) as e:
        sys.exit(f"guard: cannot start: {e}")
    server = Server((BIND, PORT), Handler)
    server.filter = flt
    server.db = Database(DSN, DB_POOL)
    log(f"listening on {BIND}:{server.server_address[1]}"
        + (" (GUARD_SKIP_FILTER: every lookup queries the database)" if SKIP_FILTER else ""))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
