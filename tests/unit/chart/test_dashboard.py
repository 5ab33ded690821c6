"""The Grafana dashboard shipped with the chart (files/dashboards/webserver-operator.json), read as a file.

Every query must parse as PromQL and read only metrics the operator's registry exports; every panel must use the
dashboard's data source variable, so it works in any Grafana that has a Prometheus data source. The ConfigMap around
it is checked on the rendered chart in test_chart_monitoring.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import promql_parser
import pytest

from harness.paths import CHART
from tests.support.monitoring import (
    exported_series_names,
    grafana_query_as_promql,
    metric_names,
    unknown_metrics,
)

DASHBOARD = CHART / "files" / "dashboards" / "webserver-operator.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def _queries(dashboard: dict[str, Any]) -> list[str]:
    queries = [t["expr"] for p in _panels(dashboard) for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["query"]["query"])
    return [grafana_query_as_promql(q) for q in queries]


def test_dashboard_identity_and_variables() -> None:
    dashboard = _dashboard()
    assert dashboard["uid"] == "webserver-operator"
    assert dashboard["title"] == "webserver-operator"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["job"]["datasource"] == DATASOURCE


def test_every_panel_queries_the_selected_data_source_and_job() -> None:
    panels = [p for p in _panels(_dashboard()) if p["type"] != "row"]
    assert len(panels) >= 15
    ids = [p["id"] for p in _panels(_dashboard())]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert 'job=~"$job"' in target["expr"], (panel["title"], target["expr"])


def test_every_query_reads_only_exported_metrics() -> None:
    queries = _queries(_dashboard())
    assert unknown_metrics(queries, exported_series_names()) == {}


def test_the_dashboard_covers_the_controller_runtime_metrics() -> None:
    read = set().union(*(metric_names(q) for q in _queries(_dashboard())))
    for name in (
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_terminal_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds_bucket",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "workqueue_work_duration_seconds_bucket",
        "leader_election_master_status",
        "webserver_operator_webserver_ready_status",
        "rest_client_requests_total",
    ):
        assert name in read, name


def _row_panels(dashboard: dict[str, Any], title: str) -> list[dict[str, Any]]:
    """The panels under the row ``title``: Grafana places them by ``gridPos.y``, between the row and the next row."""
    rows = sorted((p["gridPos"]["y"], p["title"]) for p in dashboard["panels"] if p["type"] == "row")
    starts = [y for y, name in rows if name == title]
    assert len(starts) == 1, f"expected one row {title!r}, found rows {[name for _, name in rows]}"
    (start,) = starts
    end = min((y for y, _ in rows if y > start), default=float("inf"))
    return [p for p in dashboard["panels"] if p["type"] != "row" and start < p["gridPos"]["y"] < end]


def _groupings(expr: str) -> set[tuple[str, frozenset[str]]]:
    """(metric, grouping labels) of every ``agg by (...) (metric{...})`` in a query."""
    found: set[tuple[str, frozenset[str]]] = set()

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.AggregateExpr) and isinstance(node.expr, promql_parser.VectorSelector):
            labels = frozenset(node.modifier.labels) if node.modifier is not None else frozenset()
            found.add((str(node.expr.name), labels))
        return True

    promql_parser.walk(promql_parser.parse(grafana_query_as_promql(expr)), visit)
    return found


def test_the_sharding_row_shows_holders_queue_depth_and_cache_per_shard() -> None:
    panels = _row_panels(_dashboard(), "Sharding")
    shown = {grouping for panel in panels for target in panel["targets"] for grouping in _groupings(target["expr"])}
    # Ownership: which pod holds which shard; the work waiting and the objects cached: per shard.
    assert ("webserver_operator_shard_held", frozenset({"shard", "pod"})) in shown, shown
    assert ("webserver_operator_shard_queue_depth", frozenset({"shard"})) in shown, shown
    assert ("webserver_operator_shard_cached_objects", frozenset({"shard", "resource"})) in shown, shown
    (holders,) = [p for p in panels if p["title"] == "Shard holders"]
    assert holders["targets"][0]["expr"].endswith("== 1"), "the holders table lists the held shards, not the others"


@pytest.mark.parametrize(
    ("query", "missing"),
    [
        ("rate(controller_runtime_reconcile_totals[5m])", {"controller_runtime_reconcile_totals"}),
        ('sum(workqueue_depth{job="x"}) / on() group_left max(not_exported_at_all)', {"not_exported_at_all"}),
        ("histogram_quantile(0.9, rate(workqueue_queue_duration_seconds[5m]))", {"workqueue_queue_duration_seconds"}),
        ("up == 0", set()),
        ('{__name__="webserver_operator_drift_repair_total"}', {"webserver_operator_drift_repair_total"}),
    ],
)
def test_the_check_catches_a_metric_nobody_exports(query: str, missing: set[str]) -> None:
    expected = {query: missing} if missing else {}
    assert unknown_metrics([query], exported_series_names()) == expected


def test_exported_names_come_from_the_registry() -> None:
    exported = exported_series_names()
    # Labelled metrics count before they have a series, histograms by their sample names, collectors included.
    assert "controller_runtime_terminal_reconcile_errors_total" in exported
    assert "webserver_operator_webserver_ready_status" in exported
    assert {"workqueue_queue_duration_seconds_bucket", "workqueue_queue_duration_seconds_count"} <= exported
    assert "workqueue_queue_duration_seconds" not in exported
    assert "process_resident_memory_bytes" in exported
    assert "up" not in exported


def test_grafana_variables_become_promql() -> None:
    assert grafana_query_as_promql('rate(a_total{job=~"$job"}[$__rate_interval])') == 'rate(a_total{job=~"x"}[5m])'
    assert grafana_query_as_promql("label_values(controller_runtime_reconcile_total, job)") == (
        "controller_runtime_reconcile_total"
    )
