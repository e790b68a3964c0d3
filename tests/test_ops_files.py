"""The operations files under docker/: the Grafana dashboard, the Prometheus rules and the
Kubernetes manifests (issue 19, items 2 and 3).

- Every PromQL expression in the dashboard (panel targets and template variables) and in the rules
  is tokenized here (a small PromQL lexer: strings, label matchers, ranges, durations, keywords,
  functions, aggregations with `by`/`without`, vector matching), and every metric it names is one
  that a real `coordinator serve` (group ownership, against the session's Apache Kafka, after a few
  heartbeats) exports on /metrics, with the suffix its type gives it (`_total` of a counter,
  `_bucket`/`_sum`/`_count` of a histogram); each label a selector matches or an aggregation keeps
  is one that metric carries. `up` is Prometheus's own.
- The same serve scraped fresh, once its partitions serve and before any request (issue 29, item 4):
  every series named has a sample, so no panel shows "No data" and no rate() misses a first
  increment; a group's series (metrics.PER_GROUP) cannot exist before a group does, so they must be
  declared and each panel naming them falls back to 0 (`or on() ... vector(0)`).
- The rules: `promtool check rules` when promtool is there (`make promtool` unpacks it from Debian's
  prometheus package into ~/.cache), and always their structure (alert, expr, for, severity,
  summary, description, runbook) and that each expression parses.
- The manifests: every core Kubernetes object against the API's JSON schemas (kubernetes-validate,
  offline, strict: no unknown fields); the Prometheus Operator's objects and the kustomization
  structurally; and what ties them together: selectors and pod labels, probe paths that the server
  routes, environment variables that `coordinator serve` reads, the Secret's files where
  --tokens/--acls point, the grace period as compose's, the PrometheusRule equal to the rules file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

# Imported, not importorskip: a missing module of ours is a failure, never a skip.
from coordinator.service import auth
from tests.support import installed
from tests.topics import create_topic

pytestmark = pytest.mark.ops

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
DASHBOARD = DOCKER / "grafana" / "coordinator-dashboard.json"
RULES = DOCKER / "prometheus" / "coordinator-rules.yaml"
KUBERNETES = DOCKER / "kubernetes"

# Series Prometheus makes itself, not the coordinator.
PROMETHEUS_OWN = {"up"}
# Labels Prometheus attaches to every scraped series.
TARGET_LABELS = {"instance", "job"}


# --- a PromQL lexer --------------------------------------------------------------------------------

AGGREGATIONS = {
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
}
FUNCTIONS = {
    "abs",
    "absent",
    "absent_over_time",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "count_over_time",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "delta",
    "deriv",
    "exp",
    "floor",
    "histogram_avg",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "holt_winters",
    "hour",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "mad_over_time",
    "max_over_time",
    "min_over_time",
    "minute",
    "month",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sort",
    "sort_by_label",
    "sort_by_label_desc",
    "sort_desc",
    "sqrt",
    "stddev_over_time",
    "stdvar_over_time",
    "sum_over_time",
    "time",
    "timestamp",
    "vector",
    "year",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "cos",
    "cosh",
    "deg",
    "pi",
    "rad",
    "sin",
    "sinh",
    "tan",
    "tanh",
}
BINARY_KEYWORDS = {"and", "or", "unless", "atan2"}
MODIFIERS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
LITERALS = {"inf", "nan"}
# Grafana's template functions in variable queries (label_values(metric, label) and its kin).
GRAFANA_FUNCTIONS = {"label_values", "label_names", "metrics", "query_result"}

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{?\w+\}?)
  | (?P<number>0x[0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)?)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=@])
  | (?P<punct>[(){}\[\],:])
""",
    re.VERBOSE,
)


@dataclass
class Token:
    kind: str
    text: str


def tokenize(expr: str) -> list[Token]:
    tokens, at = [], 0
    while at < len(expr):
        match = _TOKEN.match(expr, at)
        if match is None:
            raise ValueError(f"cannot read {expr[at : at + 20]!r} in {expr!r}")
        at = match.end()
        if match.lastgroup != "space":
            tokens.append(Token(match.lastgroup, match.group()))
    return tokens


@dataclass
class Query:
    """What an expression names: metrics (with the labels their selectors match), functions, and for
    each aggregation with `by (...)`, the labels it keeps and the metrics it aggregates."""

    metrics: dict[str, set[str]] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)
    kept: list[tuple[set[str], set[str]]] = field(default_factory=list)


def _close(tokens: list[Token], i: int) -> int:
    """The index of the bracket that closes the one at `i`."""
    assert tokens[i].kind == "punct" and tokens[i].text in "([{", tokens[i]
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = []
    for j in range(i, len(tokens)):
        if tokens[j].text in pairs and tokens[j].kind == "punct":
            stack.append(pairs[tokens[j].text])
        elif tokens[j].kind == "punct" and tokens[j].text in pairs.values():
            if not stack or stack.pop() != tokens[j].text:
                raise ValueError(f"unbalanced {tokens[j].text!r}")
            if not stack:
                return j
    raise ValueError(f"unclosed {tokens[i].text!r}")


def _labels(tokens: list[Token], i: int) -> tuple[list[str], int]:
    """The label names of the list `( a, b )` at `i`, and the index after it."""
    assert i < len(tokens) and tokens[i].text == "(", "a label list is in parentheses"
    end = _close(tokens, i)
    names = [t.text for t in tokens[i + 1 : end] if t.kind == "ident"]
    assert all(t.kind == "ident" or t.text == "," for t in tokens[i + 1 : end]), "a label list holds names only"
    return names, end + 1


def _matchers(tokens: list[Token], i: int) -> tuple[dict[str, str], int]:
    """`{label op "value", ...}` at `i`: label -> value (of = matchers), and the index after it."""
    end = _close(tokens, i)
    inner, matched = tokens[i + 1 : end], {}
    for k in range(0, len(inner), 4):
        label, op, value = inner[k : k + 3]
        assert label.kind == "ident" and op.text in ("=", "!=", "=~", "!~") and value.kind == "string", inner
        assert k + 3 == len(inner) or inner[k + 3].text == ",", inner
        matched[label.text] = value.text[1:-1] if op.text == "=" else ""
    return matched, end + 1


def parse(expr: str) -> Query:
    """The metrics, labels and functions `expr` names; ValueError/AssertionError where it does not parse."""
    tokens, query = tokenize(expr), Query()
    spans: list[tuple[int, int, int]] = []  # selector: (token index, metric) kept apart for the aggregations
    selectors: list[tuple[int, str]] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        opens = following is not None and following.text == "("
        if t.kind == "punct" and t.text == "[":  # a range or a subquery: durations and variables
            i = _close(tokens, i) + 1
        elif t.kind == "punct" and t.text == "{":  # a selector without a name: {__name__="..."}
            matched, i = _matchers(tokens, i)
            assert matched.get("__name__"), f"a selector with no metric name in {expr!r}"
            name = matched.pop("__name__")
            query.metrics.setdefault(name, set()).update(matched)
            selectors.append((i - 1, name))
        elif t.kind != "ident":
            i += 1
        elif t.text in ("by", "without", "on", "ignoring", "group_left", "group_right"):
            i = _labels(tokens, i + 1)[1] if opens else i + 1
            assert opens or t.text in ("group_left", "group_right"), f"{t.text} needs a label list in {expr!r}"
        elif t.text in AGGREGATIONS:
            clause, start = None, i + 1
            if following is not None and following.text in ("by", "without"):
                clause = following.text
                labels, start = _labels(tokens, i + 2)
            assert tokens[start].text == "(", f"{t.text} needs its argument in {expr!r}"
            end = _close(tokens, start)
            if clause is None and end + 1 < len(tokens) and tokens[end + 1].text in ("by", "without"):
                clause = tokens[end + 1].text
                labels, _ = _labels(tokens, end + 2)
            if clause == "by":
                spans.append((start, end, len(query.kept)))
                query.kept.append((set(labels), set()))
            query.functions.add(t.text)
            i = start
        elif t.text in GRAFANA_FUNCTIONS and opens:
            raise AssertionError(f"{t.text} is Grafana's, not PromQL ({expr!r}): see template_queries")
        elif opens:
            assert t.text in FUNCTIONS, f"unknown function {t.text} in {expr!r}"
            query.functions.add(t.text)
            i += 1
        elif t.text in BINARY_KEYWORDS | MODIFIERS | LITERALS:
            i += 1
        else:  # a metric name
            labels: dict[str, str] = {}
            end = i + 1
            if following is not None and following.text == "{":
                labels, end = _matchers(tokens, i + 1)
            query.metrics.setdefault(t.text, set()).update(labels)
            selectors.append((i, t.text))
            i = end
    for start, end, k in spans:
        query.kept[k][1].update(name for at, name in selectors if start < at < end)
    _check_balanced(tokens, expr)
    return query


def _check_balanced(tokens: list[Token], expr: str) -> None:
    depth = []
    for t in tokens:
        if t.kind != "punct":
            continue
        if t.text in "([{":
            depth.append({"(": ")", "[": "]", "{": "}"}[t.text])
        elif t.text in ")]}":
            assert depth and depth.pop() == t.text, f"unbalanced {t.text!r} in {expr!r}"
    assert not depth, f"unclosed {depth} in {expr!r}"


def template_queries(query: str) -> list[str]:
    """The PromQL inside a Grafana variable query: label_values(SELECTOR, label) -> SELECTOR."""
    match = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", query, re.DOTALL)
    if match:
        return [match.group(1)]
    match = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.DOTALL)
    if match:
        return [match.group(1)]
    assert not re.match(r"\s*\w+\(", query) or query.split("(")[0].strip() not in GRAFANA_FUNCTIONS, query
    return [query]


def test_the_lexer_finds_metrics_and_nothing_else() -> None:
    q = parse(
        "histogram_quantile(0.99, sum by (api, le) (rate(coordinator_request_seconds_bucket"
        '{instance=~"$instance"}[$__rate_interval])))'
    )
    assert q.metrics == {"coordinator_request_seconds_bucket": {"instance"}}
    assert q.functions == {"histogram_quantile", "sum", "rate"}
    assert q.kept == [({"api", "le"}, {"coordinator_request_seconds_bucket"})]
    q = parse(
        'sum(rate(a_total[5m] offset 1h)) by (x) / on (x) group_left (y) b{z="1"} > bool 2 '
        'or vector(0) unless {__name__="c", d!="e"}'
    )
    assert q.metrics == {"a_total": set(), "b": {"z"}, "c": {"d"}}
    assert q.kept == [({"x"}, {"a_total"})]
    assert parse("count(x == 1) or vector(0)").metrics == {"x": set()}
    assert parse('up{job="worker-coordinator"} == 0').metrics == {"up": {"job"}}
    assert parse('m{s="by"} # a comment naming n\n> 1e3').metrics == {"m": {"s"}}
    for broken in ("sum(rate(x[5m])", "x{a=1}", "rte(x[5m])", "sum by x (y)", "x)", "label_values(x, y)"):
        with pytest.raises((ValueError, AssertionError)):
            parse(broken)
    assert template_queries('label_values(coordinator_group_epoch{instance=~"$instance"}, group)') == [
        'coordinator_group_epoch{instance=~"$instance"}'
    ]


# --- the expressions in the files -----------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def rules() -> dict[str, Any]:
    return yaml.safe_load(RULES.read_text())


def _panels(panels: list[dict]) -> list[dict]:
    return [p for panel in panels for p in (panel, *_panels(panel.get("panels", [])))]


def expressions() -> dict[str, str]:
    """Where -> PromQL, for every query in the dashboard and the rules."""
    found = {}
    board = dashboard()
    for panel in _panels(board["panels"]):
        for target in panel.get("targets", []):
            found[f"dashboard panel {panel['title']!r} {target['refId']}"] = target["expr"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            for k, expr in enumerate(template_queries(query)):
                found[f"dashboard variable {variable['name']} {k}"] = expr
    for group in rules()["groups"]:
        for rule in group["rules"]:
            found[f"rule {rule.get('alert') or rule.get('record')}"] = rule["expr"]
    return found


def test_every_expression_parses_and_names_a_metric() -> None:
    found = expressions()
    assert len(found) >= 30
    for where, expr in found.items():
        assert parse(expr).metrics, where


def test_the_dashboard_is_grafanas_and_covers_what_operators_watch() -> None:
    board = dashboard()
    assert 36 <= board["schemaVersion"] <= 41 and board["uid"] and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource" and variables["DS_PROMETHEUS"]["query"] == "prometheus"
    assert {"instance", "group"} <= set(variables)
    ids, panels = set(), [p for p in _panels(board["panels"]) if p["type"] != "row"]
    for panel in panels:
        assert panel["id"] not in ids, panel["title"]
        ids.add(panel["id"])
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]) and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${DS_PROMETHEUS}"
            assert "$instance" in target["expr"], (panel["title"], "every panel follows the instance variable")
    named = {m for p in panels for t in p["targets"] for m in parse(t["expr"]).metrics}
    wanted = {
        "coordinator_request_seconds_count",
        "coordinator_request_seconds_bucket",
        "coordinator_errors_total",
        "coordinator_protocol_signals_total",
        "coordinator_commit_seconds_bucket",
        "coordinator_batch_records_bucket",
        "coordinator_partition_load_seconds",
        "coordinator_partition_loads_total",
        "coordinator_rebalances_total",
        "coordinator_rebalance_duration_seconds_bucket",
        "coordinator_rebalance_in_progress_seconds",
        "coordinator_members",
        "coordinator_groups",
        "coordinator_group_epoch",
        "coordinator_partition_status",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "coordinator_build_info",
    }
    assert wanted <= named, wanted - named
    group_panels = [
        t["expr"]
        for p in panels
        for t in p["targets"]
        if "group"
        in parse(t["expr"]).metrics.get("coordinator_group_epoch", set())
        | parse(t["expr"]).metrics.get("coordinator_rebalance_in_progress_seconds", set())
    ]
    assert group_panels and all("$group" in e for e in group_panels)


# --- against a running coordinator ----------------------------------------------------------------


@dataclass
class Family:
    type: str
    labels: set[str]  # over its samples; empty when it has none yet
    series: set[str] = field(default_factory=set)  # the names of its samples (`x_total`, `x_bucket`, ...)


def _families(text: str) -> dict[str, Family]:
    families = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = Family(
            family.type, {label for s in family.samples for label in s.labels}, {s.name for s in family.samples}
        )
    return families


def _exported(families: dict[str, Family], name: str) -> Family | None:
    """The family `name` is a series of, given the suffixes its type gives its samples."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
        "gauge": ("",),
        "untyped": ("",),
        "info": ("_info",),
        "stateset": ("",),
        "unknown": ("",),
    }
    for family_name, family in families.items():
        if any(name == family_name + suffix for suffix in suffixes[family.type]):
            return family
    return None


@dataclass
class Scrapes:
    fresh_text: str  # once every partition serves, before any request
    worked: dict[str, Family]  # after a group's rebalance and a fenced heartbeat

    @property
    def fresh(self) -> dict[str, Family]:
        return _families(self.fresh_text)


@pytest.fixture(scope="module")
def scrapes(kafka_broker, tmp_path_factory) -> Scrapes:  # noqa: ANN001
    """/metrics of a `coordinator serve --ownership group` (as the Kubernetes manifests run it), fresh
    and after it has served a group through a rebalance and a fenced heartbeat."""
    from coordinator.tools.process import ServeProcess

    topic = f"test-ops-files-{os.getpid()}-{time.monotonic_ns()}"
    create_topic(kafka_broker.bootstrap_servers, topic, 2)
    server = ServeProcess(
        kafka_broker.bootstrap_servers,
        topic,
        tmp_path_factory.mktemp("ops"),
        "--ownership",
        "group",
        "--allow-anonymous",
        "--ownership-session-timeout-ms",
        "6000",
        "--initial-assignment-delay-ms",
        "0",
        "--server-assignment-interval-ms",
        "0",
    )
    server.start(wait=False)
    try:
        server.wait_healthy(90, partitions=2)
        with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
            fresh = response.read().decode()
        group = "connect-ops"
        assert (
            server.request("PUT", f"/v1/groups/{group}/connectors", {"Connectors": [{"Name": "A", "Tasks": 2}]})[1][
                "ErrorCode"
            ]
            == 0
        )
        owned = {"Connectors": [], "Tasks": []}
        status, body = server.request(
            "POST",
            "/v1/connect-group/heartbeat",
            {
                "GroupId": group,
                "MemberId": "w1",
                "MemberEpoch": 0,
                "RebalanceTimeoutMs": 5000,
                "ServerAssignor": "incremental_cooperative",
            },
        )
        assert (status, body["ErrorCode"]) == (200, 0), body
        for _ in range(100):  # until the member is at the group's epoch with its work: the rebalance converged
            epoch, owned = body["MemberEpoch"], (body["Assignment"] or {}).get("ConnectorsAndTasks", owned)
            body = server.request(
                "POST",
                "/v1/connect-group/heartbeat",
                {"GroupId": group, "MemberId": "w1", "MemberEpoch": epoch, "ConnectorsAndTasks": owned},
            )[1]
            assert body["ErrorCode"] == 0, body
            described = server.request("GET", f"/v1/groups/{group}")[1]
            if described["State"] == "STABLE" and owned["Tasks"]:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the group did not converge: {described}")
        fenced = server.request(
            "POST",
            "/v1/connect-group/heartbeat",
            {"GroupId": group, "MemberId": "w1", "MemberEpoch": body["MemberEpoch"] + 7},
        )[1]
        assert fenced["ErrorCode"] != 0  # an error, counted by name
        with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
            text = response.read().decode()
    finally:
        assert server.stop() == 0, server.log()
    return Scrapes(fresh, _families(text))


@pytest.fixture(scope="module")
def scraped(scrapes: Scrapes) -> dict[str, Family]:
    return scrapes.worked


@pytest.mark.integration
def test_the_scrape_is_what_the_lexer_expects(scraped: dict[str, Family]) -> None:
    """The scrape itself: families carry the labels they are known by, so an empty set below means
    no samples, not a parsing slip."""
    assert _exported(scraped, "coordinator_request_seconds_bucket").labels >= {"api", "le"}
    assert _exported(scraped, "coordinator_errors_total").labels == {"api", "error"}
    assert _exported(scraped, "coordinator_build_info").labels == {"version"}
    assert _exported(scraped, "coordinator_request_seconds") is None  # a histogram has no bare series
    assert _exported(scraped, "coordinator_errors") is None  # a counter's series end in _total


@pytest.mark.integration
@pytest.mark.parametrize("where", sorted(expressions()))
def test_every_metric_named_is_exported_by_a_running_coordinator(where: str, scraped: dict[str, Family]) -> None:
    query = parse(expressions()[where])
    for name, labels in query.metrics.items():
        if name in PROMETHEUS_OWN:
            continue
        family = _exported(scraped, name)
        assert family is not None, f"{where}: {name} is not exported by coordinator serve"
        if family.labels:  # samples seen: the labels a selector matches are theirs
            extra = labels - family.labels - TARGET_LABELS
            assert not extra, f"{where}: {name} has no label {sorted(extra)} (it has {sorted(family.labels)})"
    for kept, metrics in query.kept:
        for name in metrics - PROMETHEUS_OWN:
            family = _exported(scraped, name)
            if family is not None and family.labels:
                missing = kept - family.labels - TARGET_LABELS
                assert not missing, f"{where}: aggregates {name} by {sorted(missing)}, which it does not carry"


# A fallback that makes a query answer 0 where its series has no sample: `count(...) or vector(0)`,
# or `or on() label_replace(vector(0), ...)` beside a per-group series (on(): only when there is none).
_FALLBACK = re.compile(r"\bor\s+(?:on\s*\(\s*\)\s*)?(?:label_replace\(\s*)?vector\(\s*0\s*\)")


@pytest.mark.integration
@pytest.mark.parametrize("where", sorted(expressions()))
def test_every_series_named_is_on_a_fresh_coordinator(where: str, scrapes: Scrapes) -> None:
    """Before any request, every series the expression names has a sample (at 0 where nothing has
    happened yet); a group's series are only declared, and a panel naming them falls back to 0."""
    from coordinator.service.metrics import PER_GROUP

    expr = expressions()[where]
    for name, labels in parse(expr).metrics.items():
        if name in PROMETHEUS_OWN:
            continue
        family = _exported(scrapes.fresh, name)
        assert family is not None, f"{where}: {name} is not declared by a fresh coordinator serve"
        if name in family.series:
            extra = labels - family.labels - TARGET_LABELS
            assert not extra, f"{where}: {name} has no label {sorted(extra)} (it has {sorted(family.labels)})"
        if name in PER_GROUP:
            assert not family.series, f"{where}: {name} has samples with no group served: a placeholder group?"
            if where.startswith("dashboard panel"):
                assert _FALLBACK.search(expr), f"{where}: names the per-group {name} without falling back to 0"
            continue  # an alert on it does not fire, a variable lists no group: both right while none exists
        assert name in family.series, f"{where}: {name} has no sample on a fresh coordinator serve (No data)"


def test_the_fresh_scrape_holds_each_served_partition_and_api_and_no_group(scrapes: Scrapes) -> None:
    """The fresh scrape itself, so that the test above cannot pass on a scrape of the wrong moment."""
    from coordinator.service.metrics import PER_GROUP, documented_codes

    samples = {
        f"{s.name}{{{','.join(f'{k}={v}' for k, v in sorted(s.labels.items()))}}}": s.value
        for family in text_string_to_metric_families(scrapes.fresh_text)
        for s in family.samples
    }
    for partition in ("0", "1"):
        assert samples[f"coordinator_partition_status{{partition={partition},status=serving}}"] == 1
        assert samples[f"coordinator_groups{{partition={partition}}}"] == 0
        assert samples[f"coordinator_commit_seconds_count{{partition={partition}}}"] == 0
        assert samples[f"coordinator_rebalances_total{{partition={partition}}}"] == 0
    for api in documented_codes():
        assert samples[f"coordinator_request_seconds_count{{api={api}}}"] == 0  # no request yet
    assert samples["coordinator_errors_total{api=/v1/connect-group/heartbeat,error=FENCED_MEMBER_EPOCH}"] == 0
    assert not [name for name in samples if name.split("{")[0] in PER_GROUP]
    assert _FALLBACK.search("count(x) or vector(0)") and not _FALLBACK.search("x or y")


# --- the rules -------------------------------------------------------------------------------------


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    promtool = installed.promtool()
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in rules()['groups'])} rules found" in result.stdout
    # It does refuse a broken rule: the check means something.
    broken = rules()
    broken["groups"][0]["rules"][0]["expr"] = "sum(rate(coordinator_errors_total[5m])"
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(broken))
    refused = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "broken.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0


DURATION = re.compile(r"^(\d+(ms|[smhdwy]))+$")


def test_the_rules_are_well_formed() -> None:
    document = rules()
    assert set(document) == {"groups"}
    alerts = {}
    for group in document["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit"} and group["name"] and group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, rule
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"]) and rule["alert"] not in alerts
            alerts[rule["alert"]] = rule
            assert "for" not in rule or DURATION.match(rule["for"]), rule["for"]
            assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
            assert {"summary", "description", "runbook"} <= set(rule["annotations"]), rule["alert"]
            for text in rule["annotations"].values():  # Go templates: balanced, and only the variables there are
                assert text.count("{{") == text.count("}}"), text
                assert set(re.findall(r"\$(\w+)", text)) <= {"labels", "value", "externalLabels"}, text
            query = parse(rule["expr"])
            assert query.metrics, rule["alert"]
            for label in re.findall(r"\$labels\.(\w+)", " ".join(rule["annotations"].values())):
                kept = set().union(*(labels for labels, _ in query.kept)) if query.kept else None
                assert kept is None or label in kept | TARGET_LABELS, (rule["alert"], label, "dropped by the sum")
    expected = {
        "CoordinatorPartitionNotServing": "coordinator_partition_status",
        "CoordinatorRebalanceTooLong": "coordinator_rebalance_in_progress_seconds",
        "CoordinatorErrorRate": "coordinator_errors_total",
        "CoordinatorSlowPartitionLoad": "coordinator_partition_load_seconds",
        "CoordinatorInstanceDown": "up",
    }
    for alert, metric in expected.items():
        assert metric in parse(alerts[alert]["expr"]).metrics, alert
    assert alerts["CoordinatorPartitionNotServing"]["for"] == "2m"
    assert 'status!="serving"' in alerts["CoordinatorPartitionNotServing"]["expr"].replace(" ", "")
    assert "coordinator_request_seconds_count" in parse(alerts["CoordinatorErrorRate"]["expr"]).metrics
    assert 'job="worker-coordinator"' in alerts["CoordinatorInstanceDown"]["expr"]


# --- Kubernetes ------------------------------------------------------------------------------------


def manifests() -> dict[str, list[dict[str, Any]]]:
    """File name -> the objects in it, for every file kustomization.yaml lists."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    return {
        name: [d for d in yaml.safe_load_all((KUBERNETES / name).read_text()) if d]
        for name in kustomization["resources"]
    }


def objects(kind: str) -> list[dict[str, Any]]:
    return [o for docs in manifests().values() for o in docs if o["kind"] == kind]


def test_kustomization_lists_every_manifest() -> None:
    listed = set(manifests())
    present = {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present
    kinds = {o["kind"] for docs in manifests().values() for o in docs}
    assert {
        "ConfigMap",
        "Secret",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ServiceMonitor",
        "PrometheusRule",
    } <= kinds
    assert all("namespace" not in o["metadata"] for o in objects("Deployment") + objects("Service"))


CORE = {
    ("v1", "Namespace"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("policy/v1", "PodDisruptionBudget"),
    ("batch/v1", "Job"),
}
OPERATOR = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}


def test_core_objects_validate_against_the_kubernetes_schemas() -> None:
    checked = 0
    for name, docs in manifests().items():
        for o in docs:
            assert (o["apiVersion"], o["kind"]) in CORE | OPERATOR, (name, o["apiVersion"], o["kind"])
            if (o["apiVersion"], o["kind"]) in CORE:
                kubernetes_validate.validate(o, "1.30.0", strict=True)  # raises ValidationError
                checked += 1
    assert checked >= 6
    # The validator does refuse what the API server would: the check means something.
    (deployment,) = objects("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["paht"] = "/health/live"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.30.0", strict=True)


def _pod() -> tuple[dict[str, Any], dict[str, Any]]:
    (deployment,) = objects("Deployment")
    return deployment, deployment["spec"]["template"]


def test_selectors_match_the_pods() -> None:
    deployment, pod = _pod()
    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (service,) = objects("Service")
    assert service["spec"]["selector"].items() <= labels.items()
    (pdb,) = objects("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1 and deployment["spec"]["replicas"] >= 2
    (monitor,) = objects("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    port_names = {p["name"] for p in service["spec"]["ports"]}
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["http"] and "http" in port_names
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    # The job label the rules' InstanceDown matches: the Service's label named by jobLabel.
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "worker-coordinator"
    for constraint in pod["spec"].get("topologySpreadConstraints", []):
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()


def _routes() -> set[tuple[str, str]]:
    from coordinator.service.server import CoordinatorServer

    app = CoordinatorServer({"bootstrap.servers": "unused:9092"}, "t", 1, [], "http://x").app()
    return {(r.method, r.resource.canonical) for r in app.router.routes()}


def test_probes_name_routes_and_ports_the_server_has() -> None:
    _, pod = _pod()
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    routes = _routes()
    probes = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["readinessProbe"]["path"] == "/health/ready"
    assert probes["livenessProbe"]["path"] == "/health/live"
    for kind, probe in probes.items():
        assert ("GET", probe["path"]) in routes, kind
        assert probe["port"] in ports, kind
    config = _config()
    assert config["COORDINATOR_LISTEN"].rsplit(":", 1)[1] == str(ports["http"])
    (service,) = objects("Service")
    assert all(p["targetPort"] in ports or p["targetPort"] in ports.values() for p in service["spec"]["ports"])
    assert ("GET", objects("ServiceMonitor")[0]["spec"]["endpoints"][0]["path"]) in routes


def _config() -> dict[str, str]:
    (config_map,) = objects("ConfigMap")
    return config_map["data"]


def test_the_environment_is_what_coordinator_serve_reads(monkeypatch) -> None:  # noqa: ANN001
    from tests.support.compose import OUR_ENV, serve_parser

    _, pod = _pod()
    (container,) = pod["spec"]["containers"]
    config = _config()
    env = {e["name"]: e for e in container["env"]}
    names = set(config) | set(env)
    help_text = serve_parser().format_help()
    unknown = sorted(n for n in names if OUR_ENV.match(n) and n not in help_text)
    assert not unknown, f"coordinator serve --help does not name {unknown}"
    assert not sorted(n for n in names if not OUR_ENV.match(n) and n != "POD_IP"), names
    assert container["envFrom"] == [{"configMapRef": {"name": objects("ConfigMap")[0]["metadata"]["name"]}}]
    # The advertised URL from the pod's IP (downward API), defined before it is used.
    order = [e["name"] for e in container["env"]]
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert order.index("POD_IP") < order.index("COORDINATOR_ADVERTISED_URL")
    assert env["COORDINATOR_ADVERTISED_URL"]["value"] == "http://$(POD_IP):8400"
    assert config["COORDINATOR_OWNERSHIP"] == "group"
    # The real parser takes the settings as the pod gives them (the advertised URL resolved).
    for name, value in {**config, "COORDINATOR_ADVERTISED_URL": "http://10.0.0.7:8400"}.items():
        monkeypatch.setenv(name, value)
    args = serve_parser().parse_args(container["args"][1:])
    assert args.ownership == "group" and args.advertised_url == "http://10.0.0.7:8400"
    assert args.tokens == "/etc/coordinator/tokens" and args.acls == "/etc/coordinator/acls"


def test_the_secret_holds_the_files_serve_is_pointed_at() -> None:
    _, pod = _pod()
    (container,) = pod["spec"]["containers"]
    (secret,) = objects("Secret")
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    files = {}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "secret" in volume:
            assert mount["readOnly"] and volume["secret"]["secretName"] == secret["metadata"]["name"]
            for item in volume["secret"]["items"]:
                files[f"{mount['mountPath']}/{item['path']}"] = item["key"]
    config = _config()
    tokens_key, acls_key = files[config["COORDINATOR_TOKENS_FILE"]], files[config["COORDINATOR_ACLS_FILE"]]
    tokens = auth.parse_tokens(secret["stringData"][tokens_key], "tokens")
    acls = auth.parse_acls(secret["stringData"][acls_key], "acls")
    assert tokens and acls
    assert all("REPLACE-ME" in token for token in tokens), "example tokens must say that they are examples"
    assert {acl.principal for acl in acls} <= set(tokens.values()) | {"*"}
    assert "REPLACE" in (KUBERNETES / "secret.yaml").read_text().split("apiVersion")[0]


def test_the_pod_runs_as_the_images_user_and_hands_over_gracefully() -> None:
    deployment, pod = _pod()
    spec = pod["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == spec["securityContext"]["runAsGroup"] == 10001
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "--uid 10001" in dockerfile and "--gid 10001" in dockerfile
    (container,) = spec["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    # As long as compose gives a stopping coordinator (SIGTERM, then SIGKILL).
    grace = yaml.safe_load((DOCKER / "compose.yaml").read_text())["x-coordinator"]["stop_grace_period"]
    assert spec["terminationGracePeriodSeconds"] == int(grace.removesuffix("s"))
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120, "covers serve's --connect-timeout"


def test_the_prometheus_rule_is_the_rules_file() -> None:
    (rule,) = objects("PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["metadata"]["name"]
    assert rule["spec"]["groups"] == rules()["groups"]
