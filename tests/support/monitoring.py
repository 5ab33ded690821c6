"""Metric names on both sides of the chart's monitoring: what the operator exports and what a query reads.

The exported names come from the operator's own registry (webserver_operator.metrics.REGISTRY), the one /metrics
serves, not from a hand-kept list: a renamed or removed metric changes this set by itself. Queries are parsed with a
PromQL parser (promql-parser), so a name is found wherever it sits in an expression. Together they let the tests fail
when an alert or a dashboard panel reads a metric nobody exports (it would silently never fire, or stay empty).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import promql_parser

from webserver_operator.metrics import REGISTRY

# Series that Prometheus itself adds for every scrape target: they are never in an exporter's registry.
PROMETHEUS_SERIES = frozenset({"up"})

# What the samples of one family are called in the text format, by family type (prometheus_client's family names
# drop the `_total` of counters; `_created` samples are disabled by webserver_operator.metrics).
_SAMPLE_SUFFIXES: Mapping[str, tuple[str, ...]] = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("", "_count", "_sum"),
    "info": ("_info",),
    "stateset": ("",),
    "unknown": ("",),
}

# Grafana's own variables, replaced by a value before a panel's query is parsed as PromQL.
_GRAFANA_DURATIONS = re.compile(r"\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval|__interval|__range)\}")
_GRAFANA_VARIABLE = re.compile(r"\$\{[A-Za-z0-9_:]+\}|\$[A-Za-z_][A-Za-z0-9_]*")
_LABEL_VALUES = re.compile(r"^label_values\(\s*(?P<selector>.+?)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)$")


def exported_series_names() -> frozenset[str]:
    """Every series name the operator's /metrics can expose (declared metrics, labelled or not, and collectors)."""
    names: set[str] = set()
    for family in REGISTRY.collect():
        names.update(family.name + suffix for suffix in _SAMPLE_SUFFIXES[family.type])
    return frozenset(names)


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads; a selector without a fixed name is an error (it cannot be checked)."""
    found: set[str] = set()

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            names = [
                m.value for m in node.matchers.matchers if m.name == "__name__" and m.op == promql_parser.MatchOp.Equal
            ]
            if node.name:
                names.append(node.name)
            if not names:
                raise AssertionError(f"selector {node} in {expr!r} has no fixed metric name")
            found.update(names)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def grafana_query_as_promql(query: str) -> str:
    """A dashboard query as plain PromQL: durations become 5m, other variables a value, label_values() its selector."""
    query = _GRAFANA_DURATIONS.sub("5m", query.strip())
    query = _GRAFANA_VARIABLE.sub("x", query)
    match = _LABEL_VALUES.match(query)
    return match["selector"] if match else query


def unknown_metrics(exprs: Iterable[str], exported: frozenset[str]) -> dict[str, set[str]]:
    """{expression: names it reads that are neither exported nor added by Prometheus}, empty when all are known."""
    known = exported | PROMETHEUS_SERIES
    return {expr: missing for expr in exprs if (missing := metric_names(expr) - known)}
