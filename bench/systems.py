"""The systems under test: how each operator is started, and how its requests are recognised in the audit log.

Every operator runs as one process on this machine with the benchmark cluster's admin kubeconfig and 4 workers:
- ``ours``: ``python -m webserver_operator run`` as users run it (JSON logs at INFO, the default), from .venv;
- ``go``: bench/peers/go, controller-runtime as kubebuilder scaffolds it, built by bench/peers/go/build.sh;
- ``kopf``: bench/peers/kopf/operator.py under ``kopf run --standalone --all-namespaces``.
``raw`` is not an operator: bench/peers/go's ``raw`` command creates the same children directly.
Each process's output goes to a log file next to the results, so a failed run can be read afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.cluster import ROOT

WORKERS = 4
OPERATORS = ("ours", "go", "kopf")
SYSTEMS = ("raw", *OPERATORS)


def go_peer_binary() -> Path:
    """Build (or reuse from the cache) the controller-runtime peer and return its path."""
    out = subprocess.run(
        [str(ROOT / "bench" / "peers" / "go" / "build.sh")], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class OperatorSpec:
    name: str
    argv: tuple[str, ...]
    user_agents: tuple[str, ...]


def operator_spec(name: str, kubeconfig: Path) -> OperatorSpec:
    python = sys.executable
    if name == "ours":
        return OperatorSpec(
            name,
            (
                python,
                "-m",
                "webserver_operator",
                "run",
                f"--kubeconfig={kubeconfig}",
                f"--workers={WORKERS}",
                "--health-probe-bind-address=127.0.0.1:0",
                "--metrics-bind-address=127.0.0.1:0",
            ),
            ("webserver-operator/",),
        )
    if name == "go":
        return OperatorSpec(
            name,
            (str(go_peer_binary()), "operator", f"--workers={WORKERS}", f"--kubeconfig={kubeconfig}"),
            ("webserver-peer-go",),
        )
    if name == "kopf":
        return OperatorSpec(
            name,
            (
                python,
                "-m",
                "kopf",
                "run",
                "--standalone",
                "--all-namespaces",
                str(ROOT / "bench" / "peers" / "kopf" / "operator.py"),
            ),
            ("kopf/", "webserver-peer-kopf"),
        )
    raise ValueError(f"unknown operator {name!r}: use one of {', '.join(OPERATORS)}")


class OperatorProcess:
    """A started operator; ``started_at`` is the wall-clock time just before exec."""

    def __init__(
        self, spec: OperatorSpec, *, kubeconfig: Path, log_path: Path, env: dict[str, str] | None = None
    ) -> None:
        self.spec = spec
        self.log_path = log_path
        full_env = dict(os.environ if env is None else env)
        full_env["KUBECONFIG"] = str(kubeconfig)
        full_env["PYTHONUNBUFFERED"] = "1"
        self._log = log_path.open("a", encoding="utf-8")
        self.started_at = time.time()
        self.proc = subprocess.Popen(
            spec.argv, stdout=self._log, stderr=subprocess.STDOUT, env=full_env, cwd=ROOT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
        return self.proc.returncode


def raw_command(kubeconfig: Path, *args: str) -> list[str]:
    return [str(go_peer_binary()), "raw", *args, f"--kubeconfig={kubeconfig}"]
