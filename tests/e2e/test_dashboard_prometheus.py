"""The chart's Grafana dashboard and alerts on a real Prometheus scraping the installed operator.

promtool and the metric-name lint (tests/unit/test_chart_monitoring.py, test_dashboard.py) prove the queries parse
and read exported names; this proves each one shows data. A Prometheus server built from the Go modules
(`hack/tools.sh build prometheus`) runs as a host process and scrapes the release's operator as the chart's
ServiceMonitor says: HTTPS, the token of the ServiceAccount the release lets read /metrics, ``insecureSkipVerify``,
job ``<fullname>-metrics`` (the Prometheus Operator names the job after the Service). On the local control plane the
operator is the chart's host process; on kind it is the pod, reached through `kubectl port-forward` to the metrics
Service. The chart's PrometheusRule groups are loaded as a rule file.

The run produces what the panels show: WebServers created, one deleted, one that cannot be scheduled (so "not
Ready" panels have a row), a Deployment scaled and a Service deleted behind the operator's back (drift repairs), and
watches timed out after 10 s (``extraArgs: [--watch-timeout=10]``) so that watch restarts exist.

Then: every panel query, as Grafana sends it, returns at least one series with a number; every alert's signal (its
expression without the threshold) returns data; no alert fires, and only WebServerNotReady is pending, for the one
WebServer that cannot be scheduled. Three key panels have data; with ``RENDER_PANELS=<dir>`` (`make
monitoring-panels` passes docs/images and installs matplotlib, the ``plots`` extra) they are drawn there as PNGs for
docs/monitoring.md.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.paths import CHART
from tests.e2e.conftest import FULLNAME, Release
from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver
from tests.support.panel_png import Line, render_panel
from tests.support.panels import Query, alert_signal, dashboard_queries, grafana_expr
from tests.support.prometheus import SCRAPE_INTERVAL_S, PrometheusServer, Series
from tests.support.webservers import condition, wait_ready

DASHBOARD = CHART / "files" / "dashboards" / "webserver-operator.json"
QUERIES = dashboard_queries(DASHBOARD)
JOB = f"{FULLNAME}-metrics"
"""The job the Prometheus Operator gives the ServiceMonitor's targets: the name of the Service they belong to."""
STEP_S = 2.0
WATCH_TIMEOUT_S = 10
UNSCHEDULABLE = "cannot-schedule"
KEY_PANELS = {
    7: ("reconciles per second", "panel-reconciles.png"),
    9: ("seconds", "panel-reconcile-duration.png"),
    21: ("requests per second", "panel-api-requests.png"),
}
"""Panels drawn to PNG: id -> (y axis unit, file name)."""


@dataclass
class Monitored:
    prometheus: PrometheusServer
    release: Release
    app_namespace: str
    start: float
    rule_groups: list[dict[str, Any]]

    def range(self, expr: str) -> list[Series]:
        return self.prometheus.query_range(expr, self.start, time.time(), STEP_S)


def _as_grafana_sends_it(query: Query) -> str:
    return grafana_expr(query.expr, job=JOB, scrape_interval_s=SCRAPE_INTERVAL_S, step_s=STEP_S)


def _port_forward(cluster: Cluster, release: Release, port: int) -> tuple[subprocess.Popen[str], str]:
    """kind: `kubectl port-forward` to the metrics Service; returns the process and the local host:port."""
    proc = subprocess.Popen(
        [*cluster.kubectl_args(), "port-forward", "-n", release.namespace, f"service/{JOB}", f":{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cluster.env(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"Forwarding from 127\.0\.0\.1:(\d+)", line)
    if not match:
        proc.kill()
        raise AssertionError(f"kubectl port-forward to service/{JOB} did not start: {line}")
    return proc, f"127.0.0.1:{match.group(1)}"


def _target(cluster: Cluster, release: Release) -> tuple[subprocess.Popen[str] | None, str]:
    service = cluster.get_json("service", JOB, namespace=release.namespace)
    (port,) = [p["port"] for p in service["spec"]["ports"] if p["name"] == "metrics"]
    if release.in_cluster:
        return _port_forward(cluster, release, port)
    assert release.host_operator is not None
    return None, f"127.0.0.1:{release.host_operator.metrics_port}"


def _produce_activity(cluster: Cluster, namespace: str, image: str) -> None:
    for name in ("web-a", "web-b", "web-c"):
        cluster.apply(webserver(name, image=image, replicas=1), namespace=namespace)
    cluster.apply(
        webserver(UNSCHEDULABLE, image=image, replicas=1, resources={"requests": {"cpu": "1000"}}),
        namespace=namespace,
    )
    for name in ("web-a", "web-b", "web-c"):
        wait_ready(cluster, namespace, name, timeout=120)
    # Behind the operator's back: a changed Deployment is a drift repair, a deleted Service is created again.
    cluster.kubectl("scale", "deployment/web-a", "-n", namespace, "--replicas=3")
    cluster.kubectl("delete", "service", "web-b", "-n", namespace)
    cluster.kubectl("delete", "webserver", "web-c", "-n", namespace)
    wait_until(
        lambda: cluster.get_json("deployment", "web-a", namespace=namespace)["spec"]["replicas"] == 1,
        timeout=60,
        message="the operator to put web-a's replicas back to 1",
    )
    wait_until(
        lambda: cluster.get_or_none("service", "web-b", namespace=namespace),
        timeout=60,
        message="the operator to recreate web-b's Service",
    )
    wait_until(
        lambda: (
            (condition(cluster.get_json("webserver", UNSCHEDULABLE, namespace=namespace)) or {}).get("status")
            == "False"
        ),
        timeout=60,
        message=f"{UNSCHEDULABLE} to be reported not Ready",
    )


@pytest.fixture(scope="module")
def monitored(cluster: Cluster, release: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitored]:
    release.upgrade("--set", f"extraArgs[0]=--watch-timeout={WATCH_TIMEOUT_S}")
    release.start_operator()
    monitor = release.rendered("ServiceMonitor", "--set", "metrics.serviceMonitor.enabled=true")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    rule = release.rendered("PrometheusRule", "--set", "metrics.prometheusRule.enabled=true")
    forward, target = _target(cluster, release)
    prometheus = PrometheusServer(
        cluster.bin_dir / "prometheus",
        tmp_path_factory.mktemp("prometheus"),
        job=JOB,
        target=target,
        token=release.scraper_token(),
        insecure_skip_verify=bool(endpoint["tlsConfig"]["insecureSkipVerify"]),
        rule_groups=rule["spec"]["groups"],
    ).wait_ready()
    start = time.time()
    try:
        with cluster.temporary_namespace("e2e-dashboard") as app_namespace:
            wait_until(
                lambda: prometheus.query(f'up{{job="{JOB}"}} == 1'),
                timeout=60,
                message=f"Prometheus to scrape the operator ({prometheus.targets()})",
            )
            _produce_activity(cluster, app_namespace, cluster.web_images[0])
            # Everything the run did is in Prometheus once a scrape after it has landed, and the watches have
            # timed out at least once (every WATCH_TIMEOUT_S).
            for series in (
                f'webserver_operator_drift_repairs_total{{job="{JOB}",kind="Deployment"}} > 0',
                f'webserver_operator_watch_restarts_total{{job="{JOB}",reason="timeout"}} > 0',
            ):
                wait_until(
                    functools.partial(prometheus.query, series),
                    timeout=WATCH_TIMEOUT_S * 6,
                    message=f"{series} in Prometheus",
                )
            time.sleep(4 * SCRAPE_INTERVAL_S + STEP_S)  # a full rate window after the last change
            yield Monitored(prometheus, release, app_namespace, start, rule["spec"]["groups"])
    finally:
        prometheus.stop()
        if forward is not None:
            forward.kill()
            forward.wait()
            if forward.stdout is not None:
                forward.stdout.close()


def test_prometheus_scrapes_the_operator_as_the_service_monitor_says(monitored: Monitored) -> None:
    (target,) = monitored.prometheus.targets()
    assert target["health"] == "up", target
    assert target["scrapeUrl"].startswith("https://"), target
    assert target["labels"]["job"] == JOB


@pytest.mark.parametrize("query", [pytest.param(q, id=q.id) for q in QUERIES])
def test_every_dashboard_panel_shows_data(monitored: Monitored, query: Query) -> None:
    expr = _as_grafana_sends_it(query)
    series = monitored.range(expr)
    with_numbers = [s for s in series if s.finite()]
    assert with_numbers, f"{query.id}: {expr} returned {len(series)} series and none with a number"


ACTIVITY = {
    7: "WebServers created, repaired and deleted",
    15: "changes queued for the workers",
    19: "a Deployment scaled behind the operator's back",
    21: "every read and write of the run",
    23: f"watches timing out every {WATCH_TIMEOUT_S} s",
}
"""Rate panels and the activity of the run that must show in them as a rate above zero at some point."""


@pytest.mark.parametrize("panel_id", [pytest.param(panel_id, id=f"panel {panel_id}") for panel_id in ACTIVITY])
def test_the_runs_activity_shows_in_the_rate_panels(monitored: Monitored, panel_id: int) -> None:
    query = next(q for q in QUERIES if q.panel_id == panel_id)
    values = [v for series in monitored.range(_as_grafana_sends_it(query)) for _, v in series.finite()]
    assert max(values, default=0) > 0, f"{query.id} never above 0, although the run had {ACTIVITY[panel_id]}"


def _alerts(groups: list[dict[str, Any]]) -> dict[str, str]:
    return {r["alert"]: r["expr"] for g in groups for r in g["rules"] if "alert" in r}


def test_every_alert_watches_a_signal_that_exists(monitored: Monitored) -> None:
    alerts = _alerts(monitored.rule_groups)
    assert len(alerts) >= 6, alerts
    empty = {name: alert_signal(expr) for name, expr in alerts.items() if not monitored.range(alert_signal(expr))}
    assert not empty, f"alerts whose signal has no data in Prometheus: {empty}"


def test_rules_are_evaluated_without_errors(monitored: Monitored) -> None:
    health = monitored.prometheus.rule_health()
    assert {name for name, _, _ in health} == set(_alerts(monitored.rule_groups))
    assert all(h == "ok" for _, h, _ in health), health


def test_a_healthy_run_fires_no_alert_and_only_the_unschedulable_webserver_is_pending(monitored: Monitored) -> None:
    alerts = monitored.prometheus.alerts()
    assert not [a for a in alerts if a["state"] == "firing"], alerts
    pending = [(a["labels"]["alertname"], a["labels"].get("namespace"), a["labels"].get("name")) for a in alerts]
    assert pending == [("WebServerNotReady", monitored.app_namespace, UNSCHEDULABLE)], alerts
    # The other alerts' expressions select nothing at all (not merely "not yet for long enough").
    for name, expr in _alerts(monitored.rule_groups).items():
        if name != "WebServerNotReady":
            assert monitored.prometheus.query(expr) == [], name


def test_key_panels_have_real_series_and_are_drawn_for_the_docs(monitored: Monitored) -> None:
    """Every key panel has data from the real run. With ``RENDER_PANELS=<dir>`` (`make monitoring-panels`, which
    installs the ``plots`` extra: matplotlib is no dependency of `make test`) each is also drawn there as a PNG."""
    render_to = os.environ.get("RENDER_PANELS")
    for panel_id, (unit, file_name) in KEY_PANELS.items():
        queries = [q for q in QUERIES if q.panel_id == panel_id]
        assert queries, f"no panel {panel_id} in {DASHBOARD}"
        lines = [Line(legend=q.legend, series=monitored.range(_as_grafana_sends_it(q))) for q in queries]
        assert any(s.finite() for line in lines for s in line.series), queries[0].title
        if render_to:
            png = render_panel(queries[0].title, unit, lines, monitored.start, Path(render_to) / file_name)
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
