#!/usr/bin/env python3
"""Sanity checks of the intentd Grafana dashboard (Python 3 standard library).

Usage:
  check_dashboard.py DASHBOARD.json
      Prints one line per check, "ok  NAME" or "FAIL NAME: detail", and exits 1
      when a check failed.
  check_dashboard.py --promql-rules DASHBOARD.json OUT.yml
      Writes every PromQL expression of the dashboard (Grafana variables
      replaced) as a recording rule to OUT.yml, so that
      `promtool check rules OUT.yml` parses them.

Run by tests/monitoring/check_monitoring.sh.
"""
import json
import re
import sys

# The metric families an expression may use. Histograms also give their
# _bucket, _sum and _count series. check_monitoring.sh checks that every
# intentd_* name used exists in the agent's source.
KNOWN_FAMILIES = {
    "intentd_build_info",
    "intentd_start_time_seconds",
    "intentd_requests_total",
    "intentd_connections",
    "intentd_connections_total",
    "intentd_intents_created_total",
    "intentd_intents_reused_total",
    "intentd_diverged_total",
    "intentd_decisions_total",
    "intentd_begins_total",
    "intentd_actions_completed_total",
    "intentd_actions_failed_total",
    "intentd_actions_released_total",
    "intentd_lease_lost_total",
    "intentd_errors_total",
    "intentd_policy_refusals_total",
    "intentd_approvals_pending",
    "intentd_approval_oldest_pending_seconds",
    "intentd_leases_in_flight",
    "intentd_messages_first_total",
    "intentd_messages_duplicate_total",
    "intentd_uncertain_actions",
    "intentd_uncertain_count_limit_reached",
    "intentd_uncertain_oldest_expired_seconds",
    "intentd_store_size_bytes",
    "intentd_tenant_decisions_total",
    "intentd_tenant_uncertain_actions",
    "intentd_storage_free_bytes",
    "intentd_storage_reserve_bytes",
    "intentd_group_commit_writes_total",
    "intentd_store_batched_requests_total",
    "intentd_store_writable",
    "intentd_store_reopens_total",
    "intentd_store_voided_writes_total",
    "intentd_store_wal_loss_accepted",
    "up",
}
KNOWN_HISTOGRAMS = {
    "intentd_request_duration_seconds",
    "intentd_group_commit_duration_seconds",
    "intentd_store_batch_duration_seconds",
}
KNOWN_METRICS = set(KNOWN_FAMILIES)
for _h in KNOWN_HISTOGRAMS:
    KNOWN_METRICS.update({_h + "_bucket", _h + "_sum", _h + "_count"})

REQUIRED_KEYS = ("title", "uid", "panels", "schemaVersion", "templating")
MIN_SCHEMA_VERSION = 36
DATASOURCE_UID = "${DS_PROMETHEUS}"
GRID_WIDTH = 24

# Words of PromQL that are not metric names when not followed by "(".
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "atan2", "inf", "nan",
}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
TOKEN = re.compile(r"\d[\w.]*|[A-Za-z_:][A-Za-z0-9_:]*|\S")


def metric_names(expr):
    """The metric names an expression selects (functions, keywords, labels,
    label values, ranges and Grafana variables left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^{}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\[\]]*\]", " ", text)  # ranges, subqueries
    text = GROUPING.sub(" ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)  # Grafana variables
    names = []
    tokens = [(m.group(0), m.end()) for m in TOKEN.finditer(text)]
    for tok, end in tokens:
        if not re.match(r"[A-Za-z_:]", tok):
            continue
        if re.match(r"\s*\(", text[end:]):
            continue  # a function or an aggregation
        if tok.lower() in PROMQL_WORDS:
            continue
        names.append(tok)
    return names


def template_metric_names(query):
    """Metric names in a Grafana templating query."""
    if isinstance(query, dict):
        query = query.get("query", "")
    query = query or ""
    m = re.fullmatch(r"\s*label_values\(\s*(.*?)\s*,\s*\w+\s*\)\s*", query)
    if m:
        return metric_names(m.group(1))
    m = re.fullmatch(r"\s*(?:query_result|metrics)\((.*)\)\s*", query)
    if m:
        return metric_names(m.group(1))
    return metric_names(query)


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []) or [])


def datasource_uid(ds):
    if isinstance(ds, dict):
        return ds.get("uid")
    return ds


class Checks:
    def __init__(self):
        self.failed = 0

    def report(self, name, problems):
        if problems:
            self.failed += 1
            print(f"FAIL {name}:")
            for p in problems:
                print(f"     {p}")
        else:
            print(f"ok   {name}")


def check(path):
    c = Checks()
    try:
        with open(path, encoding="utf-8") as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        c.report(f"{path} is valid JSON", [str(e)])
        return 1
    c.report(f"{path} is valid JSON", [] if isinstance(dash, dict) else ["not an object"])
    if not isinstance(dash, dict):
        return 1

    c.report("top-level keys " + ", ".join(REQUIRED_KEYS),
             [f"missing {k}" for k in REQUIRED_KEYS if k not in dash])
    schema = dash.get("schemaVersion")
    c.report(f"schemaVersion >= {MIN_SCHEMA_VERSION}",
             [] if isinstance(schema, int) and schema >= MIN_SCHEMA_VERSION
             else [f"schemaVersion is {schema!r}"])

    inputs = [i for i in dash.get("__inputs", []) if i.get("name") == "DS_PROMETHEUS"]
    c.report("__inputs declares the Prometheus datasource DS_PROMETHEUS",
             [] if inputs and inputs[0].get("type") == "datasource"
             and inputs[0].get("pluginId") == "prometheus" else [f"__inputs: {dash.get('__inputs')!r}"])

    variables = (dash.get("templating") or {}).get("list", [])
    c.report("templating has the variable instance",
             [] if any(v.get("name") == "instance" for v in variables)
             else [f"variables: {[v.get('name') for v in variables]}"])

    panels = list(all_panels(dash.get("panels", []) or []))
    c.report("the dashboard has panels", [] if panels else ["no panels"])

    ids = [p.get("id") for p in panels]
    dup = sorted({i for i in ids if ids.count(i) > 1}, key=str)
    c.report("panel ids are unique integers",
             [f"duplicate id {i}" for i in dup] +
             [f"panel {p.get('title')!r}: id {p.get('id')!r}" for p in panels
              if not isinstance(p.get("id"), int)])

    problems = []
    cells = {}
    for p in panels:
        g = p.get("gridPos")
        title = p.get("title")
        if not isinstance(g, dict) or not all(isinstance(g.get(k), int) for k in "xywh"):
            problems.append(f"panel {title!r}: gridPos {g!r}")
            continue
        if g["x"] < 0 or g["y"] < 0 or g["w"] <= 0 or g["h"] <= 0 or g["x"] + g["w"] > GRID_WIDTH:
            problems.append(f"panel {title!r}: gridPos {g!r} outside the {GRID_WIDTH}-column grid")
            continue
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells and p.get("type") != "row":
                    problems.append(f"panel {title!r} overlaps {cells[(x, y)]!r} at x={x} y={y}")
                    break
                cells[(x, y)] = title
            else:
                continue
            break
    c.report("every panel has a gridPos within the grid, none overlapping", problems)

    problems = []
    for p in panels:
        if p.get("type") == "row":
            continue
        targets = p.get("targets") or []
        if not targets:
            problems.append(f"panel {p.get('title')!r} has no targets")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or not all(refs):
            problems.append(f"panel {p.get('title')!r}: refIds {refs}")
        for t in targets:
            if not (t.get("expr") or "").strip():
                problems.append(f"panel {p.get('title')!r} target {t.get('refId')}: no expr")
    c.report("every panel has targets with an expr and a unique refId", problems)

    problems = []
    for p in panels:
        for where, ds in [(f"panel {p.get('title')!r}", p.get("datasource"))] + [
                (f"panel {p.get('title')!r} target {t.get('refId')}", t.get("datasource"))
                for t in p.get("targets") or []]:
            if p.get("type") == "row" and ds is None:
                continue
            if datasource_uid(ds) != DATASOURCE_UID:
                problems.append(f"{where}: datasource {ds!r}")
    for v in variables:
        if v.get("type") == "query" and datasource_uid(v.get("datasource")) != DATASOURCE_UID:
            problems.append(f"variable {v.get('name')}: datasource {v.get('datasource')!r}")
    c.report(f"every datasource is {DATASOURCE_UID}", problems)

    problems = []
    for p in panels:
        for t in p.get("targets") or []:
            expr = t.get("expr") or ""
            names = metric_names(expr)
            if not names:
                problems.append(f"panel {p.get('title')!r} target {t.get('refId')}: no metric in {expr!r}")
            for n in names:
                if n not in KNOWN_METRICS:
                    problems.append(f"panel {p.get('title')!r} target {t.get('refId')}: "
                                    f"unknown metric {n!r} in {expr!r}")
    for v in variables:
        if v.get("type") == "query":
            for n in template_metric_names(v.get("query")):
                if n not in KNOWN_METRICS:
                    problems.append(f"variable {v.get('name')}: unknown metric {n!r}")
    c.report("expressions use known metric names only", problems)
    return 1 if c.failed else 0


def promql_rules(path, out):
    """Writes the dashboard's expressions as recording rules for promtool."""
    try:
        with open(path, encoding="utf-8") as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        print(f"cannot read {path}: {e}", file=sys.stderr)
        return 1
    lines = ["groups:", "  - name: dashboard_expressions", "    rules:"]
    for p in all_panels(dash.get("panels", []) or []):
        for t in p.get("targets") or []:
            expr = t.get("expr") or ""
            expr = re.sub(r"\$__rate_interval|\$__interval|\$__range", "5m", expr)
            expr = re.sub(r"\$\{?\w+\}?", ".*", expr)
            lines.append(f"      - record: dashboard:panel_{p.get('id')}_{t.get('refId')}")
            lines.append(f"        expr: {json.dumps(expr)}")  # a JSON string is a YAML string
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--promql-rules":
        return promql_rules(argv[2], argv[3])
    if len(argv) == 2 and not argv[1].startswith("-"):
        return check(argv[1])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
