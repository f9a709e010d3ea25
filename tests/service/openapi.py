# SPDX-License-Identifier: MIT
"""doc/openapi.yaml against the real daemon. The document must validate as OpenAPI 3.1
(@seriousme/openapi-schema-validator), its $refs resolve and its examples match their schemas;
then live daemons are asked every route's successes and every problem they can be made to
answer (a daemon with small limits, one whose data directory is taken away, one with a token),
and each answer must be documented for its route, method and status, carry the headers the
document declares, and have a body its schema takes (JSON Schema 2020-12, ajv). The checks
that need those run in node (tests/service/openapi-node/check.mjs, pinned by its
package-lock.json; scripts/bootstrap runs npm ci there); a missing node or node_modules is a
failure ("Bail out!"), not a skip."""
import gzip
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from servicetest import Tap, env_path, free_port, spawn, stop, tempdir, wait_port, write

ROOT = env_path("BLOSSOMD_SOURCE_ROOT")
DOC = os.path.join(ROOT, "doc", "openapi.yaml")
NODE_DIR = os.path.join(ROOT, "tests", "service", "openapi-node")

JSON = "application/json"
F = "/v1/filters/{name}"
ADD, CHECK, DELETE = F + "/add", F + "/check", F + "/delete"
KEY, SNAPSHOT, RENAME = F + "/keys/{key}", F + "/snapshot", F + "/rename"

# The problem types each live daemon must have answered at least once.
WANTED_TYPES = {
    "bad_request", "invalid_filter_name", "key_too_long", "unauthorized", "not_found",
    "filter_not_found", "method_not_allowed", "filter_exists", "filter_full", "not_counting",
    "ambiguous_delete", "payload_too_large", "unsupported_media_type", "internal_error",
    "not_implemented", "log_unavailable", "not_ready", "insufficient_memory",
}


class Daemon:
    """blossomd on free loopback ports with a temporary data directory and config."""

    def __init__(self, tag, conf, token=None):
        self.tmp = tempdir(f"openapi-{tag}")
        self.data = os.path.join(self.tmp.name, "data")
        conf_path = os.path.join(self.tmp.name, "blossomd.conf")
        lines = ["[blossomd]"] + conf
        if token:
            token_path = os.path.join(self.tmp.name, "token")
            write(token_path, token + "\n")
            os.chmod(token_path, 0o600)
            lines.append(f"auth_token_file = {token_path}")
        write(conf_path, "\n".join(lines) + "\n")
        self.port, self.http = free_port(), free_port()
        self.log = open(os.path.join(self.tmp.name, "log"), "wb")
        self.proc = spawn([env_path("BLOSSOMD_BIN"), "-c", conf_path, "--port", str(self.port),
                           "--http-port", str(self.http), "--data-dir", self.data,
                           "--log-level", "err"], stdout=self.log, stderr=self.log)
        wait_port(self.http, self.proc)

    def close(self):
        try:
            stop(self.proc)
        finally:
            self.log.close()
            self.tmp.cleanup()


class Recorder:
    """Sends requests and keeps each answer, with the route template it was sent to, for
    check.mjs."""

    def __init__(self):
        self.seen = []

    def keep(self, label, method, template, status, headers, body, record=True):
        headers = {k.lower(): v for k, v in headers}
        answer = {
            "label": label, "method": method, "path": template, "status": status,
            "content_type": headers.get("content-type"), "headers": headers,
            "body": body.decode("utf-8", "replace"),
        }
        if record:
            self.seen.append(answer)
        return answer

    def req(self, d, method, target, template, body=None, ctype=None, headers=None,
            label=None, token=None, record=True):
        """One request on a new connection; the answer as kept (record: for check.mjs too;
        the loops below keep only the answer that ends them)."""
        h = dict(headers or {})
        if ctype:
            h["Content-Type"] = ctype
        if token:
            h["Authorization"] = f"Bearer {token}"
        if isinstance(body, str):
            body = body.encode()
        elif isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", JSON)
        conn = http.client.HTTPConnection("127.0.0.1", d.http, timeout=10)
        try:
            conn.request(method, target, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return self.keep(label or f"{method} {target[:60]}", method, template, r.status,
                             r.getheaders(), data, record)
        finally:
            conn.close()

    def raw(self, d, data, method, template, label):
        """Bytes sent as they are, the answer read to the end of the connection (each of
        these answers closes it)."""
        with socket.create_connection(("127.0.0.1", d.http), timeout=10) as s:
            try:
                s.sendall(data)
            except OSError:
                pass  # refused before all of it was read: the answer is there
            got = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                got += chunk
        head, _, body = got.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:] if ":" in line]
        return self.keep(label, method, template, status, headers, body)


def expect(answer, status, ptype=None):
    assert answer["status"] == status, \
        f"{answer['label']}: status {answer['status']}, expected {status}: {answer['body']}"
    if ptype:
        got = json.loads(answer["body"])["type"]
        assert got == ptype, f"{answer['label']}: type {got}, expected {ptype}"
    return answer


def scenario_limits(rec, d, _):
    """Every route's successes and the problems small limits make, on one daemon."""
    R = lambda *a, **k: rec.req(d, *a, **k)  # noqa: E731 (a short name for the many calls)
    for path in ("/healthz", "/readyz", "/metrics", "/v1/metrics/history", "/v1/openapi.yaml",
                 "/v1/filters", "/"):
        expect(R("GET", path, path), 200)
        expect(R("HEAD", path, path), 200)
    doc = R("GET", "/v1/openapi.yaml", "/v1/openapi.yaml", label="the document")
    with open(DOC, encoding="utf-8") as f:
        assert doc["body"] == f.read(), "GET /v1/openapi.yaml is not doc/openapi.yaml"
    assert doc["content_type"] == "application/yaml", doc["content_type"]

    # Filters.
    a = expect(R("PUT", "/v1/filters/users", F, {"capacity": 1000, "error_rate": 0.01}), 201)
    assert a["headers"].get("location") == "/v1/filters/users", a["headers"]
    expect(R("PUT", "/v1/filters/users", F), 409, "filter_exists")
    expect(R("PUT", "/v1/filters/counts", F,
             {"type": "counting", "capacity": 100, "ttl_seconds": 3600}), 201)
    a = expect(R("PUT", "/v1/filters/%FFab", F), 201)
    assert json.loads(a["body"])["name_b64"] == "/2Fi", a["body"]
    expect(R("PUT", "/v1/filters/bad%20name", F), 400, "invalid_filter_name")
    expect(R("PUT", "/v1/filters/x", F, {"expansion": 32769}), 400, "bad_request")
    expect(R("PUT", "/v1/filters/x", F, {"ttl_seconds": 0}), 400, "bad_request")
    expect(R("PUT", "/v1/filters/x", F, "<capacity/>", ctype="text/xml"), 415,
           "unsupported_media_type")
    expect(R("PUT", "/v1/filters/huge", F, {"capacity": 100000000}), 507,
           "insufficient_memory")
    a = expect(R("GET", "/v1/filters?limit=1", "/v1/filters"), 200)
    assert json.loads(a["body"])["more"] is True, a["body"]
    expect(R("GET", "/v1/filters?prefix=c&after=b", "/v1/filters"), 200)
    expect(R("GET", "/v1/filters?limit=0", "/v1/filters"), 400, "bad_request")
    a = expect(R("GET", "/v1/filters?detail=true&limit=2", "/v1/filters"), 200)
    assert "fpr_estimate" in json.loads(a["body"])["filters"][0], a["body"]
    expect(R("GET", "/v1/filters?detail=true", "/v1/filters"), 400, "bad_request")
    expect(R("GET", "/v1/filters/users", F), 200)
    expect(R("HEAD", "/v1/filters/users", F), 200)
    expect(R("GET", "/v1/filters/nope", F), 404, "filter_not_found")
    expect(R("GET", "/v1/filters/a%ZZ", F), 400, "bad_request")
    expect(R("PATCH", "/v1/filters/users", F, {"ttl_seconds": 60}), 200)
    expect(R("PATCH", "/v1/filters/users", F, {"ttl_seconds": None}), 200)
    expect(R("PATCH", "/v1/filters/users", F, {"ttl": 1}), 400, "bad_request")
    expect(R("PATCH", "/v1/filters/nope", F, {"ttl_seconds": 1}), 404, "filter_not_found")

    # Keys: JSON bodies, streamed bodies, one key.
    expect(R("POST", "/v1/filters/users/add", ADD, {"keys": ["alice", "bob"]}), 200)
    expect(R("POST", "/v1/filters/users/add", ADD, {"keys_b64": ["YWxpY2U=", "AP8"]}), 200)
    expect(R("POST", "/v1/filters/users/add", ADD, "a\nb\r\n\nalice\n", ctype="text/plain"),
           200)
    expect(R("POST", "/v1/filters/users/add", ADD, '"c"\n"d"\n', ctype="application/x-ndjson"),
           200)
    expect(R("POST", "/v1/filters/users/add", ADD, gzip.compress(b"e\nf\n"), ctype="text/plain",
             headers={"Content-Encoding": "gzip"}), 200)
    expect(R("POST", "/v1/filters/users/add", ADD, '"g"\nh\n', ctype="application/x-ndjson"),
           400, "bad_request")
    expect(R("POST", "/v1/filters/users/add", ADD, "x" * 17 + "\n", ctype="text/plain"), 400,
           "key_too_long")
    expect(R("POST", "/v1/filters/users/add", ADD, "i\n", ctype="text/plain",
             headers={"Content-Encoding": "br"}), 415, "unsupported_media_type")
    expect(R("POST", "/v1/filters/nope/add", ADD, "i\n", ctype="text/plain"), 404,
           "filter_not_found")
    expect(R("POST", "/v1/filters/users/add", ADD, {"keys": ["x" * 17]}), 400, "key_too_long")
    expect(R("POST", "/v1/filters/users/add", ADD, {"keys": [str(i) for i in range(9)]}), 413,
           "payload_too_large")
    expect(R("POST", "/v1/filters/users/add", ADD, {"keys": ["k" * 10] * 400}), 413,
           "payload_too_large")
    expect(R("POST", "/v1/filters/users/add", ADD, "a", ctype="text/xml"), 415,
           "unsupported_media_type")
    expect(R("POST", "/v1/filters/users/add", ADD, '{"keys":', ctype=JSON), 400, "bad_request")
    expect(R("POST", "/v1/filters/users/check", CHECK, {"keys": ["alice", "carol"]}), 200)
    expect(R("POST", "/v1/filters/users/check", CHECK, {"keys": 1}), 400, "bad_request")
    expect(R("POST", "/v1/filters/nope/check", CHECK, {"keys": ["a"]}), 404, "filter_not_found")
    expect(R("POST", "/v1/filters/users/delete", DELETE, {"keys": ["alice"]}), 409,
           "not_counting")
    expect(R("POST", "/v1/filters/counts/delete", DELETE, {"keys_b64": ["YWxpY2U="]}), 200)
    expect(R("POST", "/v1/filters/counts/delete", DELETE, {"keys_b64": ["!"]}), 400,
           "bad_request")
    expect(R("GET", "/v1/filters/users/keys/alice", KEY), 200)
    expect(R("HEAD", "/v1/filters/users/keys/alice", KEY), 200)
    expect(R("PUT", "/v1/filters/users/keys/https%3A%2F%2Fx%2F", KEY), 200)
    expect(R("GET", "/v1/filters/users/keys/" + "x" * 17, KEY), 400, "key_too_long")
    expect(R("PUT", "/v1/filters/nope/keys/a", KEY), 404, "filter_not_found")
    expect(R("POST", "/v1/filters/users/snapshot", SNAPSHOT), 200)
    expect(R("POST", "/v1/filters/nope/snapshot", SNAPSHOT), 404, "filter_not_found")

    # A full non-scaling filter; a scaling one that max_memory stops growing.
    expect(R("PUT", "/v1/filters/tiny", F, {"capacity": 2, "nonscaling": True}), 201)
    a = expect(R("POST", "/v1/filters/tiny/add", ADD, {"keys": ["a", "b", "c", "d", "e"]}), 409,
               "filter_full")
    assert "results" in json.loads(a["body"]), a["body"]
    expect(R("PUT", "/v1/filters/tiny/keys/zz", KEY), 409, "filter_full")
    expect(R("POST", "/v1/filters/tiny/add", ADD, "y\nz\n", ctype="text/plain"), 409,
           "filter_full")
    expect(R("PUT", "/v1/filters/grow", F, {"capacity": 100, "expansion": 32768}), 201)
    for i in range(100):
        a = R("POST", "/v1/filters/grow/add", ADD, {"keys": [f"{c}{i}" for c in "abcdefgh"]},
              record=False)
        if a["status"] != 200:
            break
    rec.seen.append(a)
    expect(a, 507, "insufficient_memory")
    assert "results" in json.loads(a["body"]), a["body"]
    expect(R("POST", "/v1/filters/grow/add", ADD, "".join(f"s{i}\n" for i in range(100)),
             ctype="text/plain"), 507, "insufficient_memory")

    # A key that tests present in two layers of a scaling counting filter is not deleted: at
    # a 50 % error rate over 7 layers one shows up among the first keys, as a rule (a few
    # filters are tried, so that chance cannot fail the test).
    for n in range(5):
        expect(R("PUT", f"/v1/filters/amb{n}", F,
                 {"type": "counting", "capacity": 4, "error_rate": 0.5}), 201)
        for i in range(300):
            expect(R("PUT", f"/v1/filters/amb{n}/keys/k{i}", KEY, record=False), 200)
        for i in range(300):
            a = R("POST", f"/v1/filters/amb{n}/delete", DELETE, {"keys": [f"k{i}"]},
                  record=False)
            if a["status"] != 200:
                break
        if a["status"] != 200:
            break
    rec.seen.append(a)
    expect(a, 409, "ambiguous_delete")

    # Rename, drop.
    expect(R("POST", "/v1/filters/users/rename", RENAME, {"to": "counts"}), 409,
           "filter_exists")
    expect(R("POST", "/v1/filters/users/rename", RENAME, {"to": "bad name"}), 400,
           "invalid_filter_name")
    expect(R("POST", "/v1/filters/users/rename", RENAME, {"to": 5}), 400, "bad_request")
    expect(R("POST", "/v1/filters/nope/rename", RENAME, {"to": "x"}), 404, "filter_not_found")
    expect(R("POST", "/v1/filters/users/rename", RENAME, {"to": "people"}), 200)
    expect(R("POST", "/v1/filters/tiny/rename", RENAME, {"to": "people", "replace": True}), 200)
    expect(R("DELETE", "/v1/filters/people", F), 204)
    expect(R("DELETE", "/v1/filters/people", F), 404, "filter_not_found")

    # No such route, no such method.
    expect(R("GET", "/nope", None), 404, "not_found")
    expect(R("GET", "/v1/filters/f/keys", None), 404, "not_found")
    for method, target, template in (("POST", "/healthz", "/healthz"),
                                     ("DELETE", "/metrics", "/metrics"),
                                     ("POST", "/v1/openapi.yaml", "/v1/openapi.yaml"),
                                     ("POST", "/v1/filters", "/v1/filters"),
                                     ("POST", "/v1/filters/f", F),
                                     ("GET", "/v1/filters/f/add", ADD),
                                     ("DELETE", "/v1/filters/f/keys/k", KEY),
                                     ("GET", "/v1/filters/f/rename", RENAME)):
        expect(R(method, target, template), 405, "method_not_allowed")

    # Framing, answered before any route runs; libmicrohttpd's own 414 and 431.
    raw = lambda data, m, t, label: rec.raw(d, data, m, t, label)  # noqa: E731
    expect(raw(b"POST /v1/filters/grow/add HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n"
               b"\r\n", "POST", ADD, "Transfer-Encoding: gzip"), 501, "not_implemented")
    expect(raw(b"GET /v1/filters HTTP/1.1\r\n\r\n", "GET", "/v1/filters", "no Host"), 400,
           "bad_request")
    expect(raw(b"GET /v1/filters HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", "GET",
               "/v1/filters", "Content-Length: abc"), 400, "bad_request")
    expect(raw(b"PUT /v1/filters/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
               b"Content-Length: 1\r\n\r\nxx", "PUT", F, "two Content-Lengths"), 400,
           "bad_request")
    expect(raw(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n", "GET",
               "/healthz", "Content-Length over max_body_bytes"), 413, "payload_too_large")
    expect(raw(b"GET /v1/filters/" + b"a" * 40000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", "GET", F,
               "a 40 KB request line"), 414)
    expect(raw(b"GET /v1/filters HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n",
               "GET", "/v1/filters", "a 40 KB header"), 431)


def scenario_broken(rec, d, unanswered):
    """Its data directory taken away: a snapshot fails (500), the log cannot rotate (503
    log_unavailable) and /readyz says not ready (503). The change whose log write failed (its
    response held for that write) gets the 503 log_unavailable at once, well before
    request_timeout (2 s here) would cut it: one answered late or not at all goes into
    unanswered."""
    R = lambda *a, **k: rec.req(d, *a, **k)  # noqa: E731
    expect(R("PUT", "/v1/filters/f", F), 201)
    shutil.rmtree(d.data)
    expect(R("POST", "/v1/filters/f/snapshot", SNAPSHOT), 500, "internal_error")
    for i in range(2000):
        target = f"/v1/filters/f/keys/key-number-{i}"
        t0 = time.monotonic()
        try:
            a = R("PUT", target, KEY, record=False)
        except (TimeoutError, http.client.RemoteDisconnected) as e:
            unanswered.append(f"PUT {target}: {type(e).__name__}")
            continue
        took = time.monotonic() - t0
        if took > 1:
            unanswered.append(f"PUT {target}: {a['status']} after {took:.1f} s")
        if a["status"] != 200:
            break
    rec.seen.append(a)
    expect(a, 503, "log_unavailable")
    expect(R("POST", "/v1/filters/f/add", ADD, {"keys": ["more"]}), 503, "log_unavailable")
    expect(R("GET", "/readyz", "/readyz"), 503, "not_ready")
    expect(R("GET", "/healthz", "/healthz"), 200)


def scenario_token(rec, d, token):
    """With auth_token_file: probes open, everything else 401 without the token."""
    R = lambda *a, **k: rec.req(d, *a, **k)  # noqa: E731
    expect(R("GET", "/healthz", "/healthz"), 200)
    expect(R("GET", "/readyz", "/readyz"), 200)
    for path in ("/metrics", "/v1/metrics/history", "/v1/openapi.yaml", "/v1/filters", "/"):
        expect(R("GET", path, path), 401, "unauthorized")
        expect(R("GET", path, path, token=token), 200)
    expect(R("PUT", "/v1/filters/f", F, {"capacity": 10}), 401, "unauthorized")
    expect(R("POST", "/v1/filters/f/add", ADD, "a\n", ctype="text/plain"), 401, "unauthorized")
    expect(R("PUT", "/v1/filters/f", F, {"capacity": 10}, token="wrong" * 8), 401,
           "unauthorized")
    expect(R("PUT", "/v1/filters/f", F, {"capacity": 10}, token=token), 201)
    expect(R("GET", "/v1/filters/f/keys/a", KEY, token=token), 200)


def run_check(observed):
    """check.mjs's verdict on the document and on the answers."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(observed, f)
    try:
        r = subprocess.run(["node", os.path.join(NODE_DIR, "check.mjs"), DOC, f.name],
                           capture_output=True, text=True, timeout=120, cwd=NODE_DIR)
    finally:
        os.unlink(f.name)
    assert r.returncode == 0, f"check.mjs exited {r.returncode}: {r.stderr}"
    return json.loads(r.stdout)


def main():
    tap = Tap()
    if not shutil.which("node"):
        print("Bail out! node not found (scripts/bootstrap installs nodejs)", flush=True)
        sys.exit(1)
    if not os.path.exists(os.path.join(NODE_DIR, "node_modules", ".package-lock.json")):
        print("Bail out! tests/service/openapi-node/node_modules missing (run scripts/bootstrap)",
              flush=True)
        sys.exit(1)

    rec = Recorder()
    token = "openapi-test-token-" + "0123456789abcdef" * 2
    scenarios = (
        ("limits", ["max_body_bytes = 4k", "max_key_bytes = 16", "max_args = 8",
                    "max_memory = 512k", "wal_fsync = no"], None, scenario_limits),
        ("broken", ["wal_segment_bytes = 4096", "wal_fsync = no", "snapshot_interval = 0",
                    "request_timeout = 2"], None, scenario_broken),
        ("token", ["wal_fsync = no"], token, scenario_token),
    )
    unanswered = []
    for tag, conf, tok, fn in scenarios:
        def run(tag=tag, conf=conf, tok=tok, fn=fn):
            d = Daemon(tag, conf, tok)
            try:
                fn(rec, d, unanswered if tag == "broken" else tok)
            finally:
                d.close()
        tap.case(f"live daemon ({tag}): every request answered as expected", run)

    def answered_at_once():
        assert not unanswered, "unanswered or late: " + "; ".join(unanswered)
    tap.case("every change is answered at once when its log write fails (503 log_unavailable)",
             answered_at_once)

    verdict = run_check(rec.seen)

    def document():
        doc = verdict["document"]
        assert doc["valid"], json.dumps(doc["errors"], indent=1)[:4000]
        assert doc["version"] == "3.1", doc["version"]
    tap.case("doc/openapi.yaml validates as OpenAPI 3.1", document)

    def version():
        r = subprocess.run([env_path("BLOSSOMD_BIN"), "--version"], capture_output=True,
                           text=True, timeout=10)
        want = r.stdout.split()[-1]
        got = verdict["document"]["info_version"]
        assert got == want, f"info.version {got}, blossomd --version {want}"
    tap.case("the document's info.version is blossomd's version", version)

    def refs():
        assert not verdict["refs"], "\n".join(verdict["refs"])
    tap.case("every $ref in the document resolves", refs)

    def examples():
        assert not verdict["examples"], "\n".join(verdict["examples"])
    tap.case("every example matches its schema", examples)

    for seen, problem in zip(rec.seen, verdict["observed"]):
        def case(seen=seen, problem=problem):
            assert problem is None, f"{problem}\n--- body\n{seen['body'][:500]}"
        ct = (seen["content_type"] or "no Content-Type").split(";")[0]
        tap.case(f"{seen['label']} -> {seen['status']} {ct}: documented, body matches "
                 f"{seen['method']} {seen['path'] or '(no route)'}", case)

    def every_operation():
        ok = {f"{s['method']} {s['path']}" for s in rec.seen if 200 <= s["status"] < 300}
        missing = [op for op in verdict["operations"] if op not in ok]
        assert not missing, f"operations never answered with success: {missing}"
    tap.case("every operation of the document answered a success", every_operation)

    def every_type():
        seen = set()
        for s in rec.seen:
            if (s["content_type"] or "").startswith("application/problem+json"):
                seen.add(json.loads(s["body"])["type"])
        assert WANTED_TYPES <= seen, f"problem types never answered: {WANTED_TYPES - seen}"
    tap.case("every problem type answered at least once", every_type)
    tap.done()


if __name__ == "__main__":
    main()
