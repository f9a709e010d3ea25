#!/usr/bin/env python3
"""Generates contrib/grafana/blossomd.json: edit this, run it (python3
contrib/grafana/gen_dashboard.py > contrib/grafana/blossomd.json), commit both."""
import json
import sys

DS = {"type": "prometheus", "uid": "${datasource}"}
S = 'job=~"$job", instance=~"$instance"'
SF = S + ', filter=~"$filter"'
RI = "$__rate_interval"

panels = []
next_id = [1]


def pid():
    n = next_id[0]
    next_id[0] += 1
    return n


def targets(queries, table=False, instant=False):
    out = []
    for i, q in enumerate(queries):
        expr, legend = q[0], q[1]
        t = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i)}
        if table:
            t.update({"format": "table", "instant": True, "range": False})
        elif instant:
            t.update({"instant": True, "range": False})
        else:
            t.update({"range": True})
        out.append(t)
    return out


def thresholds(steps):
    return {"mode": "absolute",
            "steps": [{"color": c, "value": v} for v, c in steps]}


def row(title, y):
    panels.append({"type": "row", "title": title, "id": pid(), "collapsed": False,
                   "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})


def timeseries(title, desc, queries, grid, unit="short", extra=None, overrides=None,
               stack=False, log=False, steps=None, threshold_style="off", min0=True,
               soft_max=None):
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
              "spanNulls": False, "axisSoftMin": 0 if min0 else None,
              "stacking": {"mode": "normal" if stack else "none", "group": "A"},
              "thresholdsStyle": {"mode": threshold_style}}
    if custom["axisSoftMin"] is None:
        del custom["axisSoftMin"]
    if soft_max is not None:
        custom["axisSoftMax"] = soft_max
    if log:
        custom["scaleDistribution"] = {"type": "log", "log": 10}
    p = {"type": "timeseries", "title": title, "description": desc, "id": pid(),
         "datasource": DS, "gridPos": grid, "targets": targets(queries),
         "fieldConfig": {"defaults": {"unit": unit, "custom": custom,
                                      "color": {"mode": "palette-classic"},
                                      "thresholds": thresholds(steps or [(None, "green")])},
                         "overrides": overrides or []},
         "options": {"legend": {"displayMode": "list", "placement": "bottom",
                                "showLegend": True},
                     "tooltip": {"mode": "multi", "sort": "desc"}}}
    if extra:
        p["fieldConfig"]["defaults"].update(extra)
    panels.append(p)


def stat(title, desc, queries, grid, unit="short", steps=None, mappings=None, text_mode="auto",
         color_mode="value", decimals=None, graph="none"):
    defaults = {"unit": unit, "color": {"mode": "thresholds"},
                "thresholds": thresholds(steps or [(None, "green")]),
                "mappings": mappings or []}
    if decimals is not None:
        defaults["decimals"] = decimals
    panels.append({"type": "stat", "title": title, "description": desc, "id": pid(),
                   "datasource": DS, "gridPos": grid, "targets": targets(queries),
                   "fieldConfig": {"defaults": defaults, "overrides": []},
                   "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                                 "values": False},
                               "colorMode": color_mode, "graphMode": graph,
                               "textMode": text_mode, "justifyMode": "auto",
                               "orientation": "auto", "wideLayout": True}})


def bargauge(title, desc, queries, grid, unit, steps, vmax=None):
    defaults = {"unit": unit, "min": 0, "color": {"mode": "thresholds"},
                "thresholds": thresholds(steps)}
    if vmax is not None:
        defaults["max"] = vmax
    panels.append({"type": "bargauge", "title": title, "description": desc, "id": pid(),
                   "datasource": DS, "gridPos": grid,
                   "targets": targets(queries, instant=True),
                   "fieldConfig": {"defaults": defaults, "overrides": []},
                   "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                                 "values": False},
                               "displayMode": "gradient", "orientation": "horizontal",
                               "showUnfilled": True, "valueMode": "color",
                               "namePlacement": "auto", "sizing": "auto",
                               "minVizHeight": 16, "maxVizHeight": 300}})


def gauge(title, desc, queries, grid, unit, steps, vmax):
    panels.append({"type": "gauge", "title": title, "description": desc, "id": pid(),
                   "datasource": DS, "gridPos": grid, "targets": targets(queries),
                   "fieldConfig": {"defaults": {"unit": unit, "min": 0, "max": vmax,
                                                "color": {"mode": "thresholds"},
                                                "thresholds": thresholds(steps)},
                                   "overrides": []},
                   "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                                 "values": False},
                               "showThresholdLabels": False, "showThresholdMarkers": True}})


def grid(x, y, w, h):
    return {"h": h, "w": w, "x": x, "y": y}


UP_MAP = [{"type": "value", "options": {
    "0": {"text": "down", "color": "red", "index": 0},
    "1": {"text": "up", "color": "green", "index": 1}}}]
READY_MAP = [{"type": "value", "options": {
    "0": {"text": "not ready", "color": "red", "index": 0},
    "1": {"text": "ready", "color": "green", "index": 1}}}]
RED_GREEN = [(None, "red"), (1, "green")]
FILL_STEPS = [(None, "green"), (0.8, "yellow"), (0.9, "orange"), (1, "red")]
RATE_STEPS = [(None, "green"), (0.5, "yellow"), (1, "red")]
MEM_STEPS = [(None, "green"), (0.75, "yellow"), (0.9, "red")]
BAD_IF_ANY = [(None, "green"), (1, "red")]

y = 0
row("Overview", y)
y += 1
stat("Scrape", "Prometheus's `up` for each selected instance: 0 when the scrape of /metrics "
     "fails (daemon down, still loading snapshots and replaying the log, or unreachable).",
     [(f"up{{{S}}}", "{{instance}}")], grid(0, y, 3, 4), steps=RED_GREEN, mappings=UP_MAP,
     color_mode="background")
stat("Readiness", "blossomd_ready: 1 when /readyz answers 200. 0 while the write-ahead log "
     "cannot write, snapshot writes are failing, or the daemon is shutting down.",
     [(f"blossomd_ready{{{S}}}", "{{instance}}")], grid(3, y, 3, 4), steps=RED_GREEN,
     mappings=READY_MAP, color_mode="background")
stat("Uptime", "Time since the daemon started (blossomd_start_time_seconds).",
     [(f"time() - blossomd_start_time_seconds{{{S}}}", "{{instance}}")], grid(6, y, 3, 4),
     unit="s", steps=[(None, "orange"), (600, "green")])
stat("Version", "blossomd_build_info's version label.",
     [(f"blossomd_build_info{{{S}}}", "{{version}}")], grid(9, y, 3, 4), text_mode="name",
     color_mode="none")
stat("Filters", "Filters in the registry (blossomd_filters).",
     [(f"sum(blossomd_filters{{{S}}})", "filters")], grid(12, y, 3, 4), color_mode="none")
stat("Filters without series", "Filters that have no per-filter series "
     "(blossomd_filters_unlabelled): the per-filter families are capped at the first 100 "
     "filters in name order, and a name that is not UTF-8 never gets a label. The Filters "
     "row below shows only the others.",
     [(f"sum(blossomd_filters_unlabelled{{{S}}})", "unlabelled")], grid(15, y, 3, 4),
     steps=[(None, "green"), (1, "yellow")])
gauge("Memory of max_memory", "Bytes held by all filters against max_memory "
      "(blossomd_memory_bytes / blossomd_memory_limit_bytes; empty when max_memory is 0, "
      "no limit). Past max_memory creates and growth are refused.",
      [(f"blossomd_memory_bytes{{{S}}} / (blossomd_memory_limit_bytes{{{S}}} > 0)",
        "{{instance}}")], grid(18, y, 3, 4), "percentunit", MEM_STEPS, 1)
stat("Last good snapshot", "Time since the last successful snapshot write "
     "(blossomd_snapshot_last_success_timestamp_seconds; empty when none has been written "
     "since start, which is normal while no persistent filter changed).",
     [(f"time() - (blossomd_snapshot_last_success_timestamp_seconds{{{S}}} > 0)",
       "{{instance}}")], grid(21, y, 3, 4), unit="s",
     steps=[(None, "green"), (3600, "yellow")])
y += 4

row("Throughput", y)
y += 1
timeseries("Commands and errors", "Commands of every protocol per second "
           "(blossomd_commands_total) and those answered with an error "
           "(blossomd_errors_total).",
           [(f"sum by (instance) (rate(blossomd_commands_total{{{S}}}[{RI}]))",
             "{{instance}} commands"),
            (f"sum by (instance) (rate(blossomd_errors_total{{{S}}}[{RI}]))",
             "{{instance}} errors")],
           grid(0, y, 12, 8), unit="ops")
timeseries("Operations by type", "Command-layer operations per second, any protocol "
           "(blossomd_operations_total by op: create, drop, add, check, delete, flush).",
           [(f"sum by (op) (rate(blossomd_operations_total{{{S}}}[{RI}]))", "{{op}}")],
           grid(12, y, 12, 8), unit="ops")
y += 8
timeseries("Keys by operation", "Keys given to add, check and delete per second, any "
           "protocol (blossomd_keys_total by op). A BF.MADD of 100 keys is one operation "
           "and 100 keys.",
           [(f"sum by (op) (rate(blossomd_keys_total{{{S}}}[{RI}]))", "{{op}}")],
           grid(0, y, 8, 8), unit="ops")
timeseries("HTTP requests by route and code", "HTTP requests answered per second "
           "(blossomd_http_requests_total by route template and status code).",
           [(f"sum by (route, code) (rate(blossomd_http_requests_total{{{S}}}[{RI}]))",
             "{{route}} {{code}}")],
           grid(8, y, 8, 8), unit="reqps")
timeseries("Traffic by protocol", "Bytes received from and sent to clients per second, per "
           "listener: text_resp (the text and RESP port) and http "
           "(blossomd_received_bytes_total, blossomd_sent_bytes_total; HTTP sent bytes are "
           "those the client acknowledged).",
           [(f"sum by (protocol) (rate(blossomd_received_bytes_total{{{S}}}[{RI}]))",
             "{{protocol}} in"),
            (f"sum by (protocol) (rate(blossomd_sent_bytes_total{{{S}}}[{RI}]))",
             "{{protocol}} out")],
           grid(16, y, 8, 8), unit="Bps")
y += 8
timeseries("Open connections by protocol", "Client connections open now per listener "
           "(blossomd_connections). max_connections applies to each listener apart.",
           [(f"sum by (protocol) (blossomd_connections{{{S}}})", "{{protocol}}")],
           grid(0, y, 12, 8))
timeseries("Connections accepted and rejected", "Connections accepted per second per "
           "listener (blossomd_connections_total) and refused because max_connections were "
           "open (blossomd_connections_rejected_total).",
           [(f"sum by (protocol) (rate(blossomd_connections_total{{{S}}}[{RI}]))",
             "{{protocol}} accepted"),
            (f"sum by (protocol) (rate(blossomd_connections_rejected_total{{{S}}}[{RI}]))",
             "{{protocol}} rejected")],
           grid(12, y, 12, 8), unit="cps",
           overrides=[{"matcher": {"id": "byRegexp", "options": ".* rejected"},
                       "properties": [{"id": "color", "value": {"mode": "fixed",
                                                                "fixedColor": "red"}}]}])
y += 8

CAP_NOTE = (" Per-filter series exist for the first 100 filters (in name order) only; see "
            "\"Filters without series\".")
row("Filters", y)
y += 1
bargauge("Fill (items / capacity)", "Keys added to each filter against the keys its layers "
         "hold so far (blossomd_filter_items / blossomd_filter_capacity). At 100 % a "
         "non-scaling filter refuses new keys and a scalable one adds a layer with its next "
         "key." + CAP_NOTE,
         [(f"sort_desc(blossomd_filter_items{{{SF}}} / blossomd_filter_capacity{{{SF}}})",
           "{{filter}} ({{instance}})")],
         grid(0, y, 12, 10), "percentunit", FILL_STEPS, 1)
bargauge("Estimated false-positive rate / target", "The model's estimate of each filter's "
         "current false-positive rate against the rate it was created for "
         "(blossomd_filter_fpr_estimate / blossomd_filter_error_rate); past 100 % the filter "
         "answers \"maybe present\" more often than promised." + CAP_NOTE,
         [(f"sort_desc(blossomd_filter_fpr_estimate{{{SF}}} / "
           f"blossomd_filter_error_rate{{{SF}}})", "{{filter}} ({{instance}})")],
         grid(12, y, 12, 10), "percentunit", RATE_STEPS, 1)
y += 10
timeseries("Fill over time", "blossomd_filter_items / blossomd_filter_capacity per filter."
           + CAP_NOTE,
           [(f"blossomd_filter_items{{{SF}}} / blossomd_filter_capacity{{{SF}}}",
             "{{filter}} ({{instance}})")],
           grid(0, y, 12, 8), unit="percentunit", steps=FILL_STEPS,
           threshold_style="dashed", soft_max=1)
timeseries("Estimated false-positive rate vs target", "Estimated rate "
           "(blossomd_filter_fpr_estimate, solid) and the target it was created for "
           "(blossomd_filter_error_rate, dashed), log scale." + CAP_NOTE,
           [(f"blossomd_filter_fpr_estimate{{{SF}}}", "{{filter}} estimate"),
            (f"blossomd_filter_error_rate{{{SF}}}", "{{filter}} target")],
           grid(12, y, 12, 8), unit="percentunit", log=True, min0=False,
           overrides=[{"matcher": {"id": "byRegexp", "options": ".* target"},
                       "properties": [{"id": "custom.lineStyle",
                                       "value": {"fill": "dash", "dash": [10, 10]}},
                                      {"id": "custom.fillOpacity", "value": 0}]}])
y += 8
FILTER_TABLE = [
    (f"blossomd_filter_items{{{SF}}}", "items"),
    (f"blossomd_filter_capacity{{{SF}}}", "capacity"),
    (f"blossomd_filter_items{{{SF}}} / blossomd_filter_capacity{{{SF}}}", "fill"),
    (f"blossomd_filter_layers{{{SF}}}", "layers"),
    (f"blossomd_filter_bytes{{{SF}}}", "memory"),
    (f"blossomd_filter_error_rate{{{SF}}}", "target rate"),
    (f"blossomd_filter_fpr_estimate{{{SF}}}", "estimated rate"),
]
rename = {"filter": "filter", "instance": "instance"}
for i, (_, name) in enumerate(FILTER_TABLE):
    rename[f"Value #{chr(ord('A') + i)}"] = name
panels.append({
    "type": "table", "title": "Filters", "id": pid(), "datasource": DS,
    "description": "One line per labelled filter: items, capacity, fill, layers (a scalable "
    "filter adds one each time it fills), memory of its layers, the configured "
    "false-positive rate and the model's estimate now." + CAP_NOTE,
    "gridPos": grid(0, y, 24, 10), "targets": targets(FILTER_TABLE, table=True),
    "transformations": [
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {
            "excludeByName": {"Time": True, "job": True, "__name__": True},
            "indexByName": {"instance": 0, "filter": 1},
            "renameByName": rename}}],
    "fieldConfig": {"defaults": {"custom": {"align": "auto", "cellOptions": {"type": "auto"}},
                                 "thresholds": thresholds([(None, "green")])},
                    "overrides": [
                        {"matcher": {"id": "byName", "options": "fill"},
                         "properties": [{"id": "unit", "value": "percentunit"},
                                        {"id": "max", "value": 1}, {"id": "min", "value": 0},
                                        {"id": "thresholds", "value": thresholds(FILL_STEPS)},
                                        {"id": "custom.cellOptions",
                                         "value": {"type": "gauge", "mode": "basic"}}]},
                        {"matcher": {"id": "byName", "options": "memory"},
                         "properties": [{"id": "unit", "value": "bytes"}]},
                        {"matcher": {"id": "byRegexp", "options": ".*rate"},
                         "properties": [{"id": "unit", "value": "sci"}]}]},
    "options": {"showHeader": True, "cellHeight": "sm",
                "sortBy": [{"displayName": "fill", "desc": True}],
                "footer": {"show": False, "reducer": ["sum"], "fields": ""}}})
y += 10
timeseries("Checks by filter", "Keys checked per second (blossomd_filter_checks_total)."
           + CAP_NOTE,
           [(f"sum by (filter) (rate(blossomd_filter_checks_total{{{SF}}}[{RI}]))",
             "{{filter}}")],
           grid(0, y, 8, 8), unit="ops")
timeseries("Adds by filter", "Keys added per second (blossomd_filter_sets_total), and "
           "those that were new (blossomd_filter_set_hits_total)." + CAP_NOTE,
           [(f"sum by (filter) (rate(blossomd_filter_sets_total{{{SF}}}[{RI}]))",
             "{{filter}}"),
            (f"sum by (filter) (rate(blossomd_filter_set_hits_total{{{SF}}}[{RI}]))",
             "{{filter}} new")],
           grid(8, y, 8, 8), unit="ops")
timeseries("Check hit ratio", "Share of checked keys that may be present "
           "(blossomd_filter_check_hits_total / blossomd_filter_checks_total)." + CAP_NOTE,
           [(f"sum by (filter) (rate(blossomd_filter_check_hits_total{{{SF}}}[{RI}])) / "
             f"sum by (filter) (rate(blossomd_filter_checks_total{{{SF}}}[{RI}]))",
             "{{filter}}")],
           grid(16, y, 8, 8), unit="percentunit", extra={"max": 1})
y += 8
timeseries("Largest filters", "Memory of each filter's layers (blossomd_filter_bytes), the "
           "10 largest." + CAP_NOTE,
           [(f"topk(10, blossomd_filter_bytes{{{SF}}})", "{{filter}} ({{instance}})")],
           grid(0, y, 12, 8), unit="bytes")
timeseries("Layers by filter", "Layers of each filter (blossomd_filter_layers): a scalable "
           "filter adds one each time it fills." + CAP_NOTE,
           [(f"blossomd_filter_layers{{{SF}}}", "{{filter}} ({{instance}})")],
           grid(12, y, 12, 8))
y += 8

row("Memory", y)
y += 1
timeseries("Memory vs max_memory", "Bytes held by all filters (blossomd_memory_bytes) "
           "against max_memory (blossomd_memory_limit_bytes, dashed; absent when 0, no "
           "limit). A create or growth past max_memory is refused.",
           [(f"blossomd_memory_bytes{{{S}}}", "{{instance}} used"),
            (f"blossomd_memory_limit_bytes{{{S}}} > 0", "{{instance}} max_memory")],
           grid(0, y, 16, 8), unit="bytes",
           overrides=[{"matcher": {"id": "byRegexp", "options": ".* max_memory"},
                       "properties": [{"id": "custom.lineStyle",
                                       "value": {"fill": "dash", "dash": [10, 10]}},
                                      {"id": "custom.fillOpacity", "value": 0},
                                      {"id": "color", "value": {"mode": "fixed",
                                                                "fixedColor": "red"}}]}])
timeseries("Filters over time", "Filters in the registry (blossomd_filters) and those "
           "without per-filter series (blossomd_filters_unlabelled).",
           [(f"blossomd_filters{{{S}}}", "{{instance}} filters"),
            (f"blossomd_filters_unlabelled{{{S}}}", "{{instance}} unlabelled")],
           grid(16, y, 8, 8))
y += 8

row("Write-ahead log", y)
y += 1
timeseries("Log fsync latency", "Quantiles of the log's fdatasync latency from the "
           "blossomd_wal_fsync_seconds histogram (buckets 0.1 ms to 256 ms), and the mean. "
           "With wal_fsync = always each change waits for one.",
           [(f"histogram_quantile(0.5, sum by (instance, le) "
             f"(rate(blossomd_wal_fsync_seconds_bucket{{{S}}}[{RI}])))", "{{instance}} p50"),
            (f"histogram_quantile(0.99, sum by (instance, le) "
             f"(rate(blossomd_wal_fsync_seconds_bucket{{{S}}}[{RI}])))", "{{instance}} p99"),
            (f"histogram_quantile(0.999, sum by (instance, le) "
             f"(rate(blossomd_wal_fsync_seconds_bucket{{{S}}}[{RI}])))",
             "{{instance}} p99.9"),
            (f"sum by (instance) (rate(blossomd_wal_fsync_seconds_sum{{{S}}}[{RI}])) / "
             f"sum by (instance) (rate(blossomd_wal_fsync_seconds_count{{{S}}}[{RI}]))",
             "{{instance}} mean")],
           grid(0, y, 12, 8), unit="s")
timeseries("Log fsyncs and records", "fdatasync calls per second "
           "(blossomd_wal_fsync_seconds_count) and records appended per second "
           "(blossomd_wal_records_total): one fsync covers every change of a loop "
           "iteration (group commit).",
           [(f"sum by (instance) (rate(blossomd_wal_fsync_seconds_count{{{S}}}[{RI}]))",
             "{{instance}} fsyncs"),
            (f"sum by (instance) (rate(blossomd_wal_records_total{{{S}}}[{RI}]))",
             "{{instance}} records")],
           grid(12, y, 12, 8), unit="ops")
y += 8
timeseries("Log size", "Bytes of the log's records (blossomd_wal_bytes) and its segment "
           "files (blossomd_wal_segments, right axis). Segments every snapshot covers are "
           "deleted; past wal_max_bytes snapshots are taken early.",
           [(f"blossomd_wal_bytes{{{S}}}", "{{instance}} bytes"),
            (f"blossomd_wal_segments{{{S}}}", "{{instance}} segments")],
           grid(0, y, 8, 8), unit="bytes",
           overrides=[{"matcher": {"id": "byRegexp", "options": ".* segments"},
                       "properties": [{"id": "unit", "value": "short"},
                                      {"id": "custom.axisPlacement", "value": "right"}]}])
timeseries("Log write throughput", "Bytes written to the log per second "
           "(blossomd_wal_written_bytes_total).",
           [(f"sum by (instance) (rate(blossomd_wal_written_bytes_total{{{S}}}[{RI}]))",
             "{{instance}}")],
           grid(8, y, 8, 8), unit="Bps")
timeseries("Log failures", "Failed log writes, fdatasyncs and switches "
           "(blossomd_wal_failures_total), recoveries (blossomd_wal_recoveries_total), and "
           "blossomd_wal_failing: 1 while the log cannot write, when changes are refused "
           "(it retries every 250 ms).",
           [(f"sum by (instance) (increase(blossomd_wal_failures_total{{{S}}}[{RI}]))",
             "{{instance}} failures"),
            (f"sum by (instance) (increase(blossomd_wal_recoveries_total{{{S}}}[{RI}]))",
             "{{instance}} recoveries"),
            (f"blossomd_wal_failing{{{S}}}", "{{instance}} failing")],
           grid(16, y, 8, 8), steps=BAD_IF_ANY,
           overrides=[{"matcher": {"id": "byRegexp", "options": ".* (failures|failing)"},
                       "properties": [{"id": "color", "value": {"mode": "fixed",
                                                                "fixedColor": "red"}}]}])
y += 8
timeseries("Replies waiting for the log", "Connections and HTTP requests whose replies wait "
           "for the log's fdatasync (blossomd_wal_waiting_replies).",
           [(f"blossomd_wal_waiting_replies{{{S}}}", "{{instance}}")],
           grid(0, y, 12, 6))
stat("Replay at start", "Log records applied at start (blossomd_wal_replay_records).",
     [(f"blossomd_wal_replay_records{{{S}}}", "{{instance}} records")],
     grid(12, y, 6, 6), color_mode="none")
stat("Replay time", "Time the replay of the log took at start (blossomd_wal_replay_seconds).",
     [(f"blossomd_wal_replay_seconds{{{S}}}", "{{instance}}")], grid(18, y, 6, 6), unit="s",
     color_mode="none")
y += 6

row("Checkpoints (snapshots)", y)
y += 1
stat("Snapshot failures", "Snapshot writes that failed in the dashboard's time range "
     "(blossomd_snapshot_failures_total).",
     [(f"sum(increase(blossomd_snapshot_failures_total{{{S}}}[$__range]))", "failures")],
     grid(0, y, 6, 4), steps=BAD_IF_ANY, decimals=0)
stat("Failing filters", "Persistent filters whose latest snapshot write failed "
     "(blossomd_snapshot_failing_filters); the daemon is not ready while any is.",
     [(f"sum(blossomd_snapshot_failing_filters{{{S}}})", "failing")], grid(6, y, 6, 4),
     steps=BAD_IF_ANY)
stat("Last failed snapshot", "Time since the last failed snapshot write "
     "(blossomd_snapshot_last_failure_timestamp_seconds; empty when none since start).",
     [(f"time() - (blossomd_snapshot_last_failure_timestamp_seconds{{{S}}} > 0)",
       "{{instance}}")], grid(12, y, 6, 4), unit="s",
     steps=[(None, "red"), (3600, "yellow"), (86400, "green")])
stat("Start-up", "Filters loaded from snapshots at start (blossomd_snapshot_loaded_filters) "
     "and corrupt snapshot files renamed aside (blossomd_snapshot_set_aside_files).",
     [(f"sum(blossomd_snapshot_loaded_filters{{{S}}})", "loaded"),
      (f"sum(blossomd_snapshot_set_aside_files{{{S}}})", "set aside")],
     grid(18, y, 6, 4), color_mode="none")
y += 4
timeseries("Snapshot writes", "Snapshot files written per second "
           "(blossomd_snapshot_writes_total), bytes written per second (right axis, "
           "blossomd_snapshot_written_bytes_total) and failures "
           "(blossomd_snapshot_failures_total).",
           [(f"sum by (instance) (rate(blossomd_snapshot_writes_total{{{S}}}[{RI}]))",
             "{{instance}} files"),
            (f"sum by (instance) (rate(blossomd_snapshot_failures_total{{{S}}}[{RI}]))",
             "{{instance}} failures"),
            (f"sum by (instance) "
             f"(rate(blossomd_snapshot_written_bytes_total{{{S}}}[{RI}]))",
             "{{instance}} bytes")],
           grid(0, y, 12, 8), unit="ops",
           overrides=[{"matcher": {"id": "byRegexp", "options": ".* bytes"},
                       "properties": [{"id": "unit", "value": "Bps"},
                                      {"id": "custom.axisPlacement", "value": "right"}]},
                      {"matcher": {"id": "byRegexp", "options": ".* failures"},
                       "properties": [{"id": "color", "value": {"mode": "fixed",
                                                                "fixedColor": "red"}}]}])
timeseries("Snapshot state", "Persistent filters with changes not on disk yet "
           "(blossomd_snapshot_dirty_filters), whose latest write failed "
           "(blossomd_snapshot_failing_filters), and 1 while a background snapshot runs "
           "(blossomd_snapshot_in_progress).",
           [(f"blossomd_snapshot_dirty_filters{{{S}}}", "{{instance}} dirty"),
            (f"blossomd_snapshot_failing_filters{{{S}}}", "{{instance}} failing"),
            (f"blossomd_snapshot_in_progress{{{S}}}", "{{instance}} in progress")],
           grid(12, y, 12, 8),
           overrides=[{"matcher": {"id": "byRegexp", "options": ".* failing"},
                       "properties": [{"id": "color", "value": {"mode": "fixed",
                                                                "fixedColor": "red"}}]}])
y += 8


def query_var(name, label, query, multi=True):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "definition": query, "query": {"query": query, "refId": f"{name}-query"},
            "refresh": 2, "regex": "", "sort": 1, "multi": multi, "includeAll": True,
            "allValue": ".*", "current": {}, "options": [], "hide": 0,
            "skipUrlSync": False}


dashboard = {
    "__requires": [
        {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.4.0"},
        {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
        {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
        {"type": "panel", "id": "stat", "name": "Stat", "version": ""},
        {"type": "panel", "id": "gauge", "name": "Gauge", "version": ""},
        {"type": "panel", "id": "bargauge", "name": "Bar gauge", "version": ""},
        {"type": "panel", "id": "table", "name": "Table", "version": ""},
    ],
    "annotations": {"list": [
        {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
         "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
         "name": "Annotations & Alerts", "type": "dashboard"},
        {"datasource": DS, "enable": True, "hide": False, "iconColor": "orange",
         "name": "Restarts", "expr": f"changes(blossomd_start_time_seconds{{{S}}}[2m]) > 0",
         "step": "1m", "titleFormat": "blossomd restarted", "textFormat": "{{instance}}",
         "useValueForTime": False},
    ]},
    "description": "blossomd (Bloom-filter daemon): throughput, filters, memory, write-ahead "
    "log and checkpoints, from its Prometheus metrics at GET /metrics.",
    "editable": True,
    "fiscalYearStartMonth": 0,
    "graphTooltip": 1,
    "id": None,
    "links": [],
    "liveNow": False,
    "panels": panels,
    "refresh": "30s",
    "schemaVersion": 39,
    "tags": ["blossomd", "bloom-filter"],
    "templating": {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource",
         "query": "prometheus", "regex": "", "current": {}, "options": [], "hide": 0,
         "refresh": 1, "includeAll": False, "multi": False, "skipUrlSync": False},
        query_var("job", "Job", "label_values(blossomd_build_info, job)"),
        query_var("instance", "Instance",
                  'label_values(blossomd_build_info{job=~"$job"}, instance)'),
        query_var("filter", "Filter",
                  'label_values(blossomd_filter_items{job=~"$job", instance=~"$instance"}, '
                  'filter)'),
    ]},
    "time": {"from": "now-3h", "to": "now"},
    "timepicker": {},
    "timezone": "",
    "title": "blossomd",
    "uid": "blossomd",
    "version": 1,
    "weekStart": "",
}

json.dump(dashboard, sys.stdout, indent=2, ensure_ascii=False)
sys.stdout.write("\n")
