"""A flood of scrapes of 1000 WebServers' series does not fail /healthz: the probes have a thread of their own.

The registry gets 1000 WebServers' ``webserver_operator_webserver_ready_status`` series (3 each, as
``reconcile.setup.ReadySeries`` writes them: about 300 kB and 40 ms of rendering per scrape). Another process
(tests/support/flood.py, as Prometheus would be) scrapes /metrics over HTTPS with a bearer token from 32 connections
at once, each scraping again as soon as it has its answer; meanwhile /healthz is probed every 50 ms with a 1 s
timeout, the tightest probe timeout the chart sets (startupProbe.timeoutSeconds). Every probe must answer 200 within
it. The numbers are printed (``pytest -s``) and reported in docs/monitoring.md.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.paths import ROOT
from harness.scrape import scrape
from tests.support.review_api import ReviewApi
from webserver_operator import metrics
from webserver_operator.core.settings import ClientSettings, ServerSettings
from webserver_operator.manager.endpoints import ProbeServer
from webserver_operator.manager.metrics.server import MetricsServer
from webserver_operator.manager.probes import Probes

WEBSERVERS = 1000
CONCURRENCY = 32
FLOOD_SECONDS = 4.0
PROBE_TIMEOUT = 1.0
PROBE_PERIOD = 0.05
READER = "system:serviceaccount:monitoring:prometheus"


@pytest.fixture
def thousand_webservers() -> Iterator[None]:
    labels = [
        (f"team-{i % 50}", f"flood-web-{i}", status)
        for i in range(WEBSERVERS)
        for status in ("True", "False", "Unknown")
    ]
    for namespace, name, status in labels:
        metrics.WEBSERVER_READY.labels(namespace=namespace, name=name, condition=status).set(status == "True")
    yield
    for label_values in labels:
        metrics.WEBSERVER_READY.remove(*label_values)


@pytest.fixture
def servers(tmp_path: Path, thousand_webservers: None) -> Iterator[tuple[ProbeServer, MetricsServer]]:
    with ReviewApi(tokens={"reader": READER}, readers={READER}) as review_api:
        probes = Probes(liveness={"event-loop": lambda: (True, "event loop responsive")})
        health = ProbeServer(probes, health_bind=("127.0.0.1", 0))
        health.start()
        server = MetricsServer(
            server=ServerSettings(metrics_bind_address="127.0.0.1:0"),
            client=ClientSettings(kubeconfig=str(review_api.kubeconfig(tmp_path / "kubeconfig"))),
        )
        server.start()
        try:
            yield health, server
        finally:
            server.stop()
            health.stop()


def test_healthz_keeps_answering_while_metrics_are_flooded(servers: tuple[ProbeServer, MetricsServer]) -> None:
    health, server = servers
    url = f"https://127.0.0.1:{server.port}/metrics"
    status, body = scrape(url, token="reader")
    assert status == 200 and body.count("webserver_operator_webserver_ready_status{") >= 3 * WEBSERVERS

    flood = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.flood",
            url,
            "--token",
            "reader",
            "--concurrency",
            str(CONCURRENCY),
            "--seconds",
            str(FLOOD_SECONDS),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    probes: list[tuple[int, float]] = []
    while flood.poll() is None:
        started = time.perf_counter()
        try:
            code = scrape(f"http://127.0.0.1:{health.health_port}/healthz", timeout=PROBE_TIMEOUT)[0]
        except OSError as err:  # a timeout: what the kubelet would count as a failed probe
            code = -1
            print(f"probe failed: {err!r}")
        probes.append((code, time.perf_counter() - started))
        time.sleep(PROBE_PERIOD)
    out, _ = flood.communicate(timeout=60)
    assert flood.returncode == 0
    scrapes = json.loads(out)
    latencies = sorted(seconds for _, seconds in probes)
    print(
        f"\n{WEBSERVERS} WebServers ({scrapes['max_bytes']} bytes per scrape), {CONCURRENCY} concurrent scrapers for "
        f"{FLOOD_SECONDS:g}s: {scrapes['scrapes']} scrapes {scrapes['statuses']}, scrape p50 {scrapes['p50_s']:.3f}s "
        f"p99 {scrapes['p99_s']:.3f}s max {scrapes['max_s']:.3f}s; /healthz {len(probes)} probes, "
        f"p50 {statistics.median(latencies) * 1000:.1f}ms max {latencies[-1] * 1000:.1f}ms"
    )
    assert scrapes["statuses"] == {"200": scrapes["scrapes"]}
    assert scrapes["scrapes"] >= CONCURRENCY  # the flood did happen
    assert len(probes) >= 10
    assert all(code == 200 for code, _ in probes), probes
    assert latencies[-1] < PROBE_TIMEOUT
