"""A flood from any pod: 2000 bare TCP connects, 2000 idle TLS connections and 2000 made-up tokens on /metrics.

Issue 32 major 1 and 2: each accepted TLS connection cost about 256 KiB (asyncio's read buffer) and none that sent
nothing was ever closed, so a few hundred connections from any pod pushed the operator past the chart's 256Mi
memory limit; every made-up token cost a TokenReview. Here the metrics server and the probe server run in a process
of their own, as in the operator (tests/support/metrics_process.py), the reviews are answered by the stand-in API
server (tests/support/review_api.py), and another process floods (tests/support/connflood.py). Meanwhile /healthz is
probed and Prometheus' real token scrapes /metrics.

What must hold:

- the server process' peak resident set (``VmHWM``) grows by at most ``RSS_BOUND_MIB`` over its resident set
  before the flood. Why this bound: at most ``metrics_max_connections`` (512) connections are kept, each at most
  46 KiB once idle (3.7 KiB before its first byte; before the fix 232 KiB and 300 KiB), 23 MiB in all; handshakes
  in progress, the reviews and the allocator's share of the thousands of connections opened and closed add to
  that (measured peak: +34 MiB on a loaded machine). 64 MiB leaves that margin and keeps an operator at its 56 MB
  baseline well under the chart's 256Mi limit; before the fix this flood took the process past 1.6 GiB;
- /healthz answers 200 throughout, and every scrape with the reader's token answers 200 (its identity was cached
  before the flood; a new connection evicts an idle one of the flood's);
- the server closed all but at most 512 of the flood's connections, and the made-up tokens cost at most the review
  limiter's burst and rate (30, then 20 a second), not one review each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.paths import ROOT
from harness.scrape import scrape
from tests.support.review_api import ReviewApi
from webserver_operator.core.settings import ServerSettings
from webserver_operator.manager.metrics.reviewlimit import REVIEW_BURST, REVIEW_QPS

READER = "system:serviceaccount:monitoring:prometheus"
FLOOD = 2000
RSS_BOUND_MIB = 64
MAX_CONNECTIONS = ServerSettings().metrics_max_connections


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, int], ReviewApi]]:
    with ReviewApi(tokens={"reader": READER}, readers={READER}) as review_api:
        kubeconfig = review_api.kubeconfig(tmp_path / "kubeconfig")
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.support.metrics_process", str(kubeconfig)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            yield server, json.loads(server.stdout.readline()), review_api
        finally:
            assert server.stdin is not None and server.stdout is not None
            server.stdin.close()
            server.wait(30)
            server.stdout.close()


@pytest.mark.timeout(240)
def test_a_flood_from_any_pod_neither_exhausts_the_operator_nor_locks_prometheus_out(
    served: tuple[subprocess.Popen[str], dict[str, int], ReviewApi],
) -> None:
    server, ports, review_api = served
    metrics_url = f"https://127.0.0.1:{ports['metrics']}/metrics"
    health_url = f"http://127.0.0.1:{ports['health']}/healthz"
    assert scrape(metrics_url, token="reader")[0] == 200  # Prometheus' first scrape: its identity is cached
    time.sleep(0.5)
    before_kib = status_kib(server.pid, "VmRSS")

    started = time.monotonic()
    flood = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.connflood",
            "127.0.0.1",
            str(ports["metrics"]),
            *("--bare", str(FLOOD), "--tls", str(FLOOD), "--tokens", str(FLOOD), "--hold", "1"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    probes: list[int | str] = []
    scrapes: list[int | str] = []
    next_scrape = time.monotonic() + 2
    while flood.poll() is None:
        try:
            probes.append(scrape(health_url, timeout=1)[0])
        except OSError as err:  # a timeout: what the kubelet would count as a failed probe
            probes.append(repr(err))
        if time.monotonic() >= next_scrape:
            try:
                scrapes.append(scrape(metrics_url, token="reader", timeout=10)[0])
            except OSError as err:
                scrapes.append(repr(err))
            next_scrape = time.monotonic() + 1
        time.sleep(0.2)
    out, _ = flood.communicate(timeout=60)
    elapsed = time.monotonic() - started
    report: dict[str, Any] = json.loads(out)
    peak_kib = status_kib(server.pid, "VmHWM")
    grown_mib = (peak_kib - before_kib) / 1024
    print(
        f"\nflood of {FLOOD} bare, {FLOOD} idle TLS, {FLOOD} made-up tokens in {elapsed:.1f}s: server RSS "
        f"{before_kib / 1024:.1f} MiB before, peak {peak_kib / 1024:.1f} MiB (+{grown_mib:.1f}); {report}; "
        f"reviews {dict(review_api.reviews)}; /healthz {len(probes)} probes; reader scrapes {scrapes}"
    )
    assert flood.returncode == 0
    assert report["bare_opened"] == FLOOD and report["tls_opened"] == FLOOD  # the flood did happen
    assert grown_mib <= RSS_BOUND_MIB
    assert probes and all(code == 200 for code in probes), probes
    assert scrapes and all(code == 200 for code in scrapes), scrapes
    closed = report["bare_closed_by_server"] + report["tls_closed_by_server"]
    assert closed >= 2 * FLOOD - MAX_CONNECTIONS
    assert sum(report["token_statuses"].values()) == FLOOD
    assert review_api.reviews["token"] <= 1 + REVIEW_BURST + REVIEW_QPS * elapsed
