"""The systems under test: how each operator is started, and how its requests are recognised in the audit log.

Every operator runs as one process on this machine with the benchmark cluster's admin kubeconfig and 4 workers:
- ``ours``: ``python -m webserver_operator run`` as users run it (JSON logs at INFO, the default), from .venv; on
  the operator's default event loop (uvloop when installed) unless ``event_loop`` names one (``bench run
  --event-loop``, for an A/B of the loops against the peers in one run); /metrics is plain HTTP on a loopback port
  (``--no-metrics-secure``, ``OperatorSpec.metrics_url``) so that each scenario can count its reconciles;
- ``go``: bench/peers/go, controller-runtime as kubebuilder scaffolds it, built by bench/peers/go/build.sh;
- ``kopf``: bench/peers/kopf/operator.py under ``kopf run --standalone --all-namespaces``.
``raw`` is not an operator: bench/peers/go's ``raw`` command creates the same children directly.
Each process's output goes to a log file next to the results, so a failed run can be read afterwards.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.operator import run_command
from harness.paths import ROOT
from harness.process import Process

WORKERS = 4
OPERATORS = ("ours", "go", "kopf")
SYSTEMS = ("raw", *OPERATORS)
#: The operator's ``--event-loop`` choices (webserver_operator.core.settings.EventLoopChoice).
EVENT_LOOPS = ("auto", "uvloop", "asyncio")


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
    #: Plain-HTTP /metrics to read ``controller_runtime_reconcile_total`` from; None: the system exports none.
    metrics_url: str | None = None


def operator_spec(name: str, kubeconfig: Path, *, event_loop: str | None = None) -> OperatorSpec:
    """How to start operator ``name``; ``event_loop`` is passed to this operator as ``--event-loop`` (peers ignore it).

    Without ``event_loop`` this operator chooses its loop as users get it (its default, ``asyncio``).
    """
    python = sys.executable
    if event_loop is not None and event_loop not in EVENT_LOOPS:
        raise ValueError(f"unknown event loop {event_loop!r}: use one of {', '.join(EVENT_LOOPS)}")
    if name == "ours":
        args = [f"--workers={WORKERS}", "--no-metrics-secure", *([f"--event-loop={event_loop}"] if event_loop else [])]
        port = _free_port()
        argv = run_command(kubeconfig=kubeconfig, args=args, metrics_bind=f"127.0.0.1:{port}")
        return OperatorSpec(
            name,
            tuple(argv),
            ("webserver-operator/",),
            metrics_url=f"http://127.0.0.1:{port}/metrics",
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_system(spec: OperatorSpec, *, kubeconfig: Path, log_path: Path, env: dict[str, str] | None = None) -> Process:
    """Start the operator of ``spec`` in its own session, stdout and stderr appended to ``log_path``."""
    full_env = dict(os.environ if env is None else env)
    full_env["KUBECONFIG"] = str(kubeconfig)
    full_env["PYTHONUNBUFFERED"] = "1"
    return Process(spec.argv, env=full_env, cwd=ROOT, log_path=log_path, append=True, merge_stdout=True)


def raw_command(kubeconfig: Path, *args: str) -> list[str]:
    return [str(go_peer_binary()), "raw", *args, f"--kubeconfig={kubeconfig}"]
