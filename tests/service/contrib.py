#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""contrib/: the Grafana dashboard and the Prometheus alerting rules against the daemon they
watch. The dashboard is valid JSON laid out as Grafana wants it, its PromQL parses, and every
metric it queries is on a live daemon's /metrics; the rules pass `promtool check rules` and
their unit tests (`promtool test rules`, each alert fired on crafted series), and every metric
they use is on that /metrics too. The live daemon gets a plain and a counting filter, keys
added, checked and deleted over RESP, a SAVE and an HTTP request first, so that every labelled
family has samples.

Usage: contrib.py (with $BLOSSOMD_BIN and $BLOSSOMD_SOURCE_ROOT set); prints TAP."""
import json
import os
import re
import shutil
import subprocess
import urllib.request

from servicetest import Skip, Tap, connect, env_path, free_port, spawn, stop, tempdir, wait_port

SRC = env_path("BLOSSOMD_SOURCE_ROOT")
DASHBOARD = os.path.join(SRC, "contrib", "grafana", "blossomd.json")
RULES = os.path.join(SRC, "contrib", "prometheus", "blossomd.rules.yml")
RULES_TEST = os.path.join(SRC, "contrib", "prometheus", "blossomd.rules.test.yml")

# Series Prometheus makes itself for every target rather than reading them from /metrics.
SCRAPE_SERIES = {"up"}

KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "bool", "offset", "inf", "nan"}


def promtool():
    path = shutil.which("promtool") or "/usr/bin/promtool"
    if not os.path.exists(path):
        raise AssertionError("promtool not installed (Debian package prometheus; scripts/bootstrap)")
    return path


def run_promtool(*args):
    r = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"promtool {' '.join(args)}: exit {r.returncode}\n" \
        f"{r.stdout}{r.stderr}"
    return r.stdout


# PromQL -------------------------------------------------------------------------------------

def metric_names(expr):
    """The metric names a PromQL expression selects: what is left once strings (label values),
    Grafana's variables, range and subquery brackets, label matchers, grouping clauses
    (by, without, on, ignoring, group_left, group_right), offset and @ modifiers, numbers,
    keywords and function or aggregation names are taken out."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    e = re.sub(r"\$\{[^}]*\}|\$\w+", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+-?[\w.]+|@\s*[\w.()]+", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.:])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()", e):
        if m.group(1).lower() not in KEYWORDS:
            names.add(m.group(1))
    return names


def label_values_names(query):
    """The metric names in a Grafana variable query: label_values(SELECTOR, label) selects
    SELECTOR's; label_values(label) and label_names() select none."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, re.S)
    if m:
        return metric_names(m.group(1))
    assert re.fullmatch(r"\s*(?:label_values\(\s*\w+\s*\)|label_names\(\))\s*", query), \
        f"variable query not understood: {query!r}"
    return set()


def case_parser():
    got = metric_names('histogram_quantile(0.99, sum by (le, instance) (rate('
                       'blossomd_wal_fsync_seconds_bucket{job=~"$job", x="a{b}(c)"}'
                       '[$__rate_interval]))) / on (instance) group_left(version) '
                       'blossomd_build_info offset 5m > 1e6 and topk(10, sum without (op) '
                       "(blossomd_keys_total[5m:1m])) unless time() - "
                       "blossomd_start_time_seconds > bool 0x1F or vector(1) / Inf")
    want = {"blossomd_wal_fsync_seconds_bucket", "blossomd_build_info",
            "blossomd_keys_total", "blossomd_start_time_seconds"}
    assert got == want, got
    assert label_values_names('label_values(blossomd_build_info{job=~"$job"}, instance)') \
        == {"blossomd_build_info"}


# The dashboard ------------------------------------------------------------------------------

def dashboard():
    with open(DASHBOARD, encoding="utf-8") as f:
        return json.load(f)


def all_panels(d):
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])  # a collapsed row keeps its panels inside


def dashboard_queries(d):
    """Every PromQL expression of the dashboard (panel targets, annotations) and every
    variable query, as (where, text, is_variable)."""
    out = []
    for p in all_panels(d):
        for t in p.get("targets", []):
            out.append((f"panel {p['id']} \"{p['title']}\" {t['refId']}", t["expr"], False))
    for a in d.get("annotations", {}).get("list", []):
        if "expr" in a:
            out.append((f"annotation {a['name']}", a["expr"], False))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out.append((f"variable {v['name']}", q, True))
    return out


def case_dashboard_valid():
    d = dashboard()
    assert d["title"] and d["uid"] and 36 <= d["schemaVersion"] <= 41, \
        (d.get("title"), d.get("uid"), d.get("schemaVersion"))
    assert d.get("id") is None, "an exported dashboard's id must be null to import"
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds = [v for v in variables.values() if v["type"] == "datasource"]
    assert len(ds) == 1 and ds[0]["query"] == "prometheus", "want one Prometheus datasource " \
        "variable"
    ds_ref = {"type": "prometheus", "uid": "${" + ds[0]["name"] + "}"}
    ids, cells, bad = set(), {}, []
    for p in all_panels(d):
        assert p["id"] not in ids, f"panel id {p['id']} twice"
        ids.add(p["id"])
        g = p["gridPos"]
        if not (g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0):
            bad.append(f"panel {p['id']} outside the 24-column grid: {g}")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    bad.append(f"panels {cells[(x, y)]} and {p['id']} overlap at {x},{y}")
                cells[(x, y)] = p["id"]
        if p["type"] == "row":
            continue
        assert p.get("title") and p.get("description"), f"panel {p['id']}: title, description"
        for t in [p] + p["targets"]:
            if t.get("datasource") != ds_ref:
                bad.append(f"panel {p['id']} \"{p['title']}\" {t.get('refId', '')}: "
                           f"datasource {t.get('datasource')} (want {ds_ref}: no datasource "
                           "uid of one Grafana)")
        assert p["targets"], f"panel {p['id']} \"{p['title']}\" has no query"
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs), f"panel {p['id']}: refIds {refs}"
    assert not bad, "\n".join(bad[:20])
    # Every $variable a query names is defined (or one of Grafana's own).
    for where, text, _ in dashboard_queries(d):
        for name in re.findall(r"\$\{?(\w+)", text):
            assert name in variables or name.startswith("__"), f"{where}: ${name} undefined"


def case_dashboard_parses(tmp):
    """Grafana's variables replaced by what they expand to, every expression of the dashboard
    becomes a recording rule, which `promtool check rules` parses."""
    subst = {"__rate_interval": "5m", "__range": "1h", "__interval": "1m",
             "__range_s": "3600", "__interval_ms": "60000"}
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    n = 0
    for where, text, is_var in dashboard_queries(dashboard()):
        if is_var:
            continue
        expr = re.sub(r"\$\{?(\w+)\}?", lambda m: subst.get(m.group(1), ".*"), text)
        n += 1
        lines += [f"      - record: dashboard:expr_{n}", f"        expr: {json.dumps(expr)}"]
    path = os.path.join(tmp, "dashboard.rules.yml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    out = run_promtool("check", "rules", path)
    assert f"SUCCESS: {n} rules found" in out, out


# The live daemon ----------------------------------------------------------------------------

def resp(sock, reader, *args):
    """Send one RESP command, return its reply (errors as ("ERR", text))."""
    msg = f"*{len(args)}\r\n".encode()
    for a in args:
        a = str(a).encode()
        msg += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(msg)
    return read_reply(reader)


def read_reply(reader):
    line = reader.readline()
    assert line.endswith(b"\r\n"), f"connection closed mid-reply: {line!r}"
    kind, body = line[:1], line[1:-2].decode()
    if kind == b"+":
        return body
    if kind == b"-":
        return ("ERR", body)
    if kind == b":":
        return int(body)
    if kind == b"$":
        return None if int(body) < 0 else reader.read(int(body) + 2)[:-2].decode()
    if kind == b"*":
        return [read_reply(reader) for _ in range(int(body))]
    raise AssertionError(f"unexpected reply {line!r}")


def exposition(text):
    """(family name -> TYPE, set of sample names, set of (sample name, filter label))."""
    types, samples, filters = {}, set(), set()
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)$", line)
        if m:
            types[m.group(1)] = m.group(2)
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][\w:]*)(\{[^}]*\})? \S+$", line)
        assert m, f"not a sample line: {line!r}"
        samples.add(m.group(1))
        f = re.search(r'filter="([^"]*)"', m.group(2) or "")
        if f:
            filters.add((m.group(1), f.group(1)))
    return types, samples, filters


class Live:
    """/metrics of a daemon that has done a little of everything, fetched once."""
    cache = None

    @classmethod
    def metrics(cls):
        if cls.cache is None:
            cls.cache = cls.fetch()
        return cls.cache

    @staticmethod
    def fetch():
        port, http = free_port(), free_port()
        with tempdir("contrib") as tmp:
            proc = spawn([env_path("BLOSSOMD_BIN"), "--port", str(port), "--http-port",
                          str(http), "--data-dir", os.path.join(tmp, "data"), "--log-level",
                          "warning"])
            try:
                wait_port(port, proc)
                wait_port(http, proc)
                with connect(port) as s, s.makefile("rb") as r:
                    keys = [f"key-{i}" for i in range(100)]
                    assert resp(s, r, "BF.RESERVE", "plain", "0.01", "1000") == "OK"
                    assert resp(s, r, "BF.RESERVE", "counted", "0.01", "1000",
                                "COUNTING") == "OK"
                    assert resp(s, r, "BF.MADD", "plain", *keys) == [1] * 100
                    assert resp(s, r, "BF.MADD", "counted", *keys[:10]) == [1] * 10
                    assert resp(s, r, "BF.EXISTS", "plain", "key-1") == 1
                    assert resp(s, r, "BF.MEXISTS", "counted", "key-1", "absent") == [1, 0]
                    assert resp(s, r, "BF.DEL", "counted", "key-0") == 1
                    assert resp(s, r, "SAVE") == "OK"
                base = f"http://127.0.0.1:{http}"
                with urllib.request.urlopen(base + "/v1/filters", timeout=10) as f:
                    names = sorted(x["name"] for x in json.load(f)["filters"])
                    assert names == ["counted", "plain"], names
                with urllib.request.urlopen(base + "/metrics", timeout=10) as f:
                    text = f.read().decode()
            finally:
                stop(proc)
        types, samples, filters = exposition(text)
        for name in ("blossomd_filter_items", "blossomd_filter_fpr_estimate"):
            for filt in ("plain", "counted"):
                assert (name, filt) in filters, f"no {name}{{filter=\"{filt}\"}}:\n{text}"
        return types, samples


def check_names(used):
    """used: {metric name: [where it is used]}; every name must be a sample on /metrics; a
    _bucket, _sum or _count one of a histogram's (summary's) own."""
    types, samples = Live.metrics()
    missing = []
    for name, where in sorted(used.items()):
        if name in SCRAPE_SERIES:
            continue
        m = re.fullmatch(r"(.+)_(bucket|sum|count)", name)
        if m and m.group(1) in types:
            kinds = ("histogram",) if m.group(2) == "bucket" else ("histogram", "summary")
            if types[m.group(1)] not in kinds:
                missing.append(f"{name} ({m.group(1)} is a {types[m.group(1)]}, not a "
                               f"{' or '.join(kinds)}), in {where[0]}")
                continue
        elif name in types and types[name] in ("histogram", "summary"):
            missing.append(f"{name} is a {types[name]}: query its _bucket, _sum or _count, "
                           f"in {where[0]}")
            continue
        if name not in samples:
            missing.append(f"{name} ({'declared, no samples' if name in types else 'absent'}"
                           f"), in {', '.join(where[:3])}")
    assert not missing, "not on /metrics:\n" + "\n".join(missing)


def case_dashboard_metrics():
    used = {}
    for where, text, is_var in dashboard_queries(dashboard()):
        names = label_values_names(text) if is_var else metric_names(text)
        if not is_var:
            assert names, f"{where}: no metric in {text!r}"
        for n in names:
            used.setdefault(n, []).append(where)
    assert len(used) >= 40, f"only {len(used)} metrics: {sorted(used)}"
    check_names(used)


# The rules ----------------------------------------------------------------------------------

def rules():
    """(alert name, expr, labels text, annotations text) of each rule in the rules file, read
    without a YAML library: `- alert:`/`- record:` start a rule, `expr:` is one line or a block
    scalar."""
    out = []
    lines = open(RULES, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"(\s*)- (alert|record): (\S+)", lines[i])
        if not m:
            i += 1
            continue
        indent, body = len(m.group(1)), []
        i += 1
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip()) > indent):
            body.append(lines[i])
            i += 1
        text = "\n".join(body)
        e = re.search(r"^(\s*)expr: *(.*)$", text, re.M)
        assert e, f"rule {m.group(3)} has no expr"
        expr = e.group(2).strip()
        if expr in ("|", "|-", ">", ">-"):
            rest = text[e.end():].split("\n")[1:]
            block = []
            for line in rest:
                if line.strip() and len(line) - len(line.lstrip()) <= len(e.group(1)):
                    break
                block.append(line.strip())
            expr = " ".join(block)
        elif expr[:1] in ("'", '"'):
            expr = json.loads(expr) if expr[0] == '"' else expr[1:-1].replace("''", "'")
        out.append((m.group(2), m.group(3), expr, text))
    assert out, f"no rules in {RULES}"
    return out


def case_check_rules():
    out = run_promtool("check", "rules", RULES)
    assert f"SUCCESS: {len(rules())} rules found" in out, out


def case_test_rules():
    out = run_promtool("test", "rules", RULES_TEST)
    assert "SUCCESS" in out, out


def case_rules_complete():
    """Each alert has a severity and a summary and description, the issue's list is covered,
    and the rule tests fire every alert at least once."""
    alerts = {name: text for kind, name, _, text in rules() if kind == "alert"}
    for name, text in alerts.items():
        assert re.search(r"^\s+severity: (critical|warning)$", text, re.M), f"{name}: severity"
        for key in ("summary", "description"):
            assert re.search(rf"^\s+{key}: \S", text, re.M), f"{name}: no {key}"
    exprs = " ".join(expr for _, _, expr, _ in rules())
    for metric in ("up", "blossomd_ready", "blossomd_wal_failing", "blossomd_wal_failures_total",
                   "blossomd_snapshot_failing_filters", "blossomd_filter_capacity",
                   "blossomd_filter_fpr_estimate", "blossomd_memory_limit_bytes"):
        assert metric in metric_names(exprs), f"no rule on {metric}"
    fired, current = set(), None
    for line in open(RULES_TEST, encoding="utf-8"):
        m = re.search(r"alertname: (\w+)", line)
        if m:
            current = m.group(1)
        if re.match(r"\s*- exp_labels:", line):
            fired.add(current)
    assert set(alerts) <= fired, f"never fired in {RULES_TEST}: {sorted(set(alerts) - fired)}"


def case_rules_metrics():
    used = {}
    for _, name, expr, _ in rules():
        for n in metric_names(expr):
            used.setdefault(n, []).append(f"rule {name}")
    check_names(used)


def main():
    tap = Tap()
    with tempdir("contrib-rules") as tmp:
        tap.case("the PromQL metric-name parser", case_parser)
        tap.case("dashboard: valid JSON, datasource variable, panels on the grid",
                 case_dashboard_valid)
        tap.case("dashboard: every expression parses (promtool)", case_dashboard_parses, tmp)
        tap.case("dashboard: every metric it queries is on a live /metrics",
                 case_dashboard_metrics)
        tap.case("rules: promtool check rules", case_check_rules)
        tap.case("rules: promtool test rules", case_test_rules)
        tap.case("rules: severities, annotations, each alert fired by a test",
                 case_rules_complete)
        tap.case("rules: every metric they use is on a live /metrics", case_rules_metrics)
    tap.done()


if __name__ == "__main__":
    main()
