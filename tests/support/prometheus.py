"""A real Prometheus server (built by `hack/tools.sh build prometheus`) scraping the operator, and its query API.

Why: promtool and a metric-name lint prove that the chart's dashboard and alerts parse and name exported metrics, not
that they show anything. The dashboard test (tests/e2e/test_dashboard_prometheus.py) runs this server as a host
process next to the operator, scraping its HTTPS /metrics with a bearer token and ``insecure_skip_verify`` exactly
as the chart's ServiceMonitor tells the Prometheus Operator to, with the chart's PrometheusRule groups loaded as a
rule file, and evaluates every panel and alert through the HTTP API (``/api/v1/query``, ``/api/v1/query_range``).

Hands on: ``PrometheusServer`` (start, query, stop) and ``Series`` (one result series of a range query).
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SCRAPE_INTERVAL_S = 1
"""Short, so that rate() windows hold several samples within a test of about a minute."""


@dataclass(frozen=True)
class Series:
    """One series of a range query: its labels and its (unix time, value) points."""

    labels: dict[str, str]
    points: list[tuple[float, float]]

    def finite(self) -> list[tuple[float, float]]:
        """The points with a number (histogram_quantile over an empty window gives NaN)."""
        return [(t, v) for t, v in self.points if math.isfinite(v)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrometheusServer:
    """``prometheus`` scraping one HTTPS target as a ServiceMonitor endpoint does, with the given rule groups."""

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        *,
        job: str,
        target: str,
        token: str,
        insecure_skip_verify: bool,
        rule_groups: list[dict[str, Any]],
    ) -> None:
        if not binary.is_file():
            raise AssertionError(
                f"{binary} is missing: run `hack/tools.sh build prometheus` (or `make tools-prometheus`)"
            )
        workdir.mkdir(parents=True, exist_ok=True)
        token_file = workdir / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        rules = workdir / "rules.yaml"
        rules.write_text(yaml.safe_dump({"groups": rule_groups}, sort_keys=False))
        config = {
            "global": {
                "scrape_interval": f"{SCRAPE_INTERVAL_S}s",
                "scrape_timeout": f"{SCRAPE_INTERVAL_S}s",
                "evaluation_interval": f"{SCRAPE_INTERVAL_S}s",
            },
            "rule_files": [str(rules)],
            "scrape_configs": [
                {
                    "job_name": job,
                    "scheme": "https",
                    "authorization": {"credentials_file": str(token_file)},
                    "tls_config": {"insecure_skip_verify": insecure_skip_verify},
                    "static_configs": [{"targets": [target]}],
                }
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "prometheus.log"
        self._log = self.log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [
                str(binary),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> PrometheusServer:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:  # noqa: S310 - local
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready within {timeout}s:\n{self.tail()}")
            time.sleep(0.2)

    def tail(self, n: int = 30) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])

    def _api(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - the local server
                body = json.load(response)
        except urllib.error.HTTPError as err:  # 400/422: a query Prometheus refuses; say which and why
            body = json.load(err)
        if body.get("status") != "success":
            raise AssertionError(f"GET {path} {params} failed: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query now: the result vector (``[{"metric": {...}, "value": [t, "v"]}, ...]``)."""
        data = self._api("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        data = self._api("/api/v1/query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step:g}")
        return [
            Series(labels=dict(r["metric"]), points=[(float(t), float(v)) for t, v in r["values"]])
            for r in data["result"]
        ]

    def targets(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self._api("/api/v1/targets", state="active")["activeTargets"]
        return active

    def alerts(self) -> list[dict[str, Any]]:
        """Pending and firing alerts, as the rule manager holds them."""
        alerts: list[dict[str, Any]] = self._api("/api/v1/alerts")["alerts"]
        return alerts

    def rule_health(self) -> list[tuple[str, str, str]]:
        """(rule name, health, last error) of every loaded rule: "ok" once evaluated without error."""
        groups = self._api("/api/v1/rules")["groups"]
        return [(r["name"], r["health"], r.get("lastError", "")) for g in groups for r in g["rules"]]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
