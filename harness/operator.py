"""Run the operator as a real process: the same `webserver-operator run` users start.

Why a subprocess and not an in-process task: signals, exit codes, the probe thread, logging setup and settings
parsing are part of what is tested, and a test must be able to kill -9 it. The process binds its probe and metrics
ports to 127.0.0.1:0; the ports (and the metrics scheme) are read from its first JSON log line.

``run_command`` is the command line every runner starts from (the tests' ``OperatorProcess`` here, the benchmark's
``ours`` and the chaos replicas), so a flag the operator renames breaks all of them at once, not one in silence.

Metrics are plain HTTP on 127.0.0.1 unless the args say otherwise (``--no-metrics-secure`` comes first, so an
``--metrics-secure`` in ``args``, e.g. the chart's, wins): then ``metrics_token`` is sent as a bearer token over
HTTPS, as Prometheus does (harness/scrape.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.process import Process
from harness.scrape import metric_value, scrape


def run_command(
    *, kubeconfig: Path | None = None, args: Sequence[str] = (), metrics_bind: str = "127.0.0.1:0"
) -> list[str]:
    """The operator's ``run`` command line for this Python.

    Its probe port (and metrics, unless ``metrics_bind="0"``) on a free loopback port, then ``--kubeconfig`` when
    given, then ``args`` (so a flag in ``args`` wins).
    """
    cmd = [
        sys.executable,
        "-m",
        "webserver_operator",
        "run",
        "--health-probe-bind-address=127.0.0.1:0",
        f"--metrics-bind-address={metrics_bind}",
    ]
    if kubeconfig is not None:
        cmd.append(f"--kubeconfig={kubeconfig}")
    return [*cmd, *args]


class OperatorProcess:
    """A running `webserver-operator run`; collects its JSON log lines."""

    def __init__(
        self,
        *,
        kubeconfig: Path | None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        cwd: Path | None = None,
        metrics_token: str | None = None,
        before_secure_metrics: bool = False,
    ) -> None:
        """Start the operator; ``wait_started()`` waits for its ports and readiness.

        ``before_secure_metrics``: the operator predates ``--metrics-secure`` (the upgrade test's baseline) and serves
        plain HTTP without being told; it would refuse the flag.
        """
        flags = (
            *(() if before_secure_metrics else ("--no-metrics-secure",)),
            "--log-format=json",
            "--log-level=DEBUG",
        )
        self.cmd = run_command(kubeconfig=kubeconfig, args=[*flags, *args])
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._lock = threading.Lock()
        full_env = dict(env if env is not None else os.environ)
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        self.process = Process(self.cmd, env=full_env, cwd=cwd, log_path=log_path, on_line=self._collect)
        self.proc = self.process.proc
        self.health_port = 0
        self.metrics_port = 0
        self.metrics_scheme = "http"
        self.metrics_token = metrics_token

    def _collect(self, line: str) -> None:
        with self._lock:
            self.raw.append(line.rstrip("\n"))
            with contextlib.suppress(json.JSONDecodeError):
                self.lines.append(json.loads(line))

    def wait_started(self, timeout: float = 30, *, ready: bool = True) -> OperatorProcess:
        """Wait for the probe and metrics ports, then (unless ``ready=False``) for /readyz (caches synced).

        The metrics port is logged on a line of its own once /metrics listens (``metrics_port`` null: disabled).
        """
        deadline = time.monotonic() + timeout
        metrics_known = False
        while not self.health_port or not metrics_known:
            self._check_alive()
            for entry in self.snapshot():
                if "health_port" in entry:
                    self.health_port = int(entry["health_port"])
                if "metrics_port" in entry:
                    metrics_known = True
                    self.metrics_port = int(entry.get("metrics_port") or 0)
                    self.metrics_scheme = str(entry.get("metrics_scheme") or "http")
            if time.monotonic() > deadline:
                raise AssertionError(f"operator did not report its ports within {timeout}s:\n{self.tail()}")
            time.sleep(0.05)
        while ready and self.probe("/readyz")[0] != 200:
            self._check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"operator not ready within {timeout}s: {self.probe('/readyz')}\n{self.tail()}")
            time.sleep(0.1)
        return self

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"operator exited with {self.proc.returncode}:\n{self.tail()}")

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.lines)

    def tail(self, n: int = 40) -> str:
        with self._lock:
            return "\n".join(self.raw[-n:])

    def probe(self, path: str, *, timeout: float = 5) -> tuple[int, str]:
        return scrape(f"http://127.0.0.1:{self.health_port}{path}", timeout=timeout)

    @property
    def metrics_url(self) -> str:
        return f"{self.metrics_scheme}://127.0.0.1:{self.metrics_port}/metrics"

    def metrics_text(self) -> str:
        status, text = scrape(self.metrics_url, token=self.metrics_token, timeout=5)
        assert status == 200, f"GET {self.metrics_url} answered {status}: {text}"
        return text

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        """Sum of the samples named ``name`` whose labels include ``labels`` (0 when absent)."""
        return metric_value(self.metrics_text(), name, labels)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        code = self.process.stop(sig, timeout)
        if self.process.killed:
            raise AssertionError(f"operator did not stop within {timeout}s after {sig!r}:\n{self.tail()}")
        return code

    def kill(self) -> None:
        self.stop(signal.SIGKILL)
