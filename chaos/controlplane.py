"""The local control plane's processes (hack/cluster.sh, kwokctl's binary runtime): find, signal, restart them.

Why by PID files and recorded command lines: kwokctl's binary runtime starts each component as a detached process
and writes ``pids/<component>.pid`` in the cluster's folder; it has no per-component stop/start. So a restart kills
the process and starts it again with the command line, working directory and log file it had (read from
``/proc/<pid>``), as a supervisor would. Every PID is checked to be a process of *this* cluster (its command line
names the cluster folder) before it is signalled, so no other cluster on the machine is touched.

``ensure_running`` restarts any component that died: kube-controller-manager and kube-scheduler exit when they lose
their own leader election during an etcd outage, and without them no Deployment gets pods. Each such restart is
recorded so the report can say so.

Used by ``faults`` and ``scenario``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")


class ControlPlaneError(RuntimeError):
    """A component could not be found, stopped or started; the message says which and where its log is."""


@dataclass
class _Recorded:
    argv: list[str]
    cwd: str
    env: dict[str, str]


@dataclass
class ControlPlane:
    """The component processes of the cluster whose folder is ``cluster_dir`` (KWOK_WORKDIR/clusters/<name>)."""

    cluster_dir: Path
    etcdctl: Path
    restarts: list[tuple[float, str, str]] = field(default_factory=list)  # (time, component, why)
    _recorded: dict[str, _Recorded] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in COMPONENTS:
            pid = self.pid(name)
            if pid is None:
                raise ControlPlaneError(
                    f"{name} of the cluster in {self.cluster_dir} is not running: start it with hack/cluster.sh up"
                )
            self._recorded[name] = _record(pid)

    @property
    def audit_log(self) -> Path:
        return self.cluster_dir / "logs" / "audit.log"

    def _pid_file(self, name: str) -> Path:
        return self.cluster_dir / "pids" / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """The live PID of ``name``, or None; only a process whose command line names this cluster's folder."""
        try:
            pid = int(self._pid_file(name).read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0]
        except OSError:
            return None
        if state == "Z" or str(self.cluster_dir) not in cmdline:
            return None
        return pid

    def send(self, name: str, sig: signal.Signals) -> int:
        pid = self.pid(name)
        if pid is None:
            raise ControlPlaneError(f"{name} is not running (pid file {self._pid_file(name)})")
        os.kill(pid, sig)
        return pid

    def stop(self, name: str, sig: signal.Signals = signal.SIGTERM, *, timeout: float = 30.0) -> None:
        """Send ``sig`` and wait for the process to exit (SIGKILL after ``timeout``)."""
        pid = self.pid(name)
        if pid is None:
            return
        os.kill(pid, sig)
        if not _wait_gone(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            if not _wait_gone(pid, 10):
                raise ControlPlaneError(f"{name} (pid {pid}) did not exit after SIGKILL")

    def start(self, name: str, *, why: str) -> int:
        """Start ``name`` again with its recorded command line, appending to its log file.

        Detached as kwokctl starts it (its own session, parent init), so it outlives the harness and is never a
        zombie child of it: ``sh`` starts it in the background through ``setsid`` and prints its PID.
        """
        if self.pid(name) is not None:
            raise ControlPlaneError(f"{name} is already running")
        rec = self._recorded[name]
        log_path = self.cluster_dir / "logs" / f"{name}.log"
        script = 'log="$1"; shift; setsid "$@" >>"$log" 2>&1 </dev/null & echo $!'
        out = subprocess.run(
            ["sh", "-c", script, "sh", str(log_path), *rec.argv],
            cwd=rec.cwd,
            env=rec.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        pid = int(out.stdout.strip())
        self._pid_file(name).write_text(f"{pid}\n")
        self.restarts.append((time.time(), name, why))
        return pid

    def restart(self, name: str, sig: signal.Signals = signal.SIGTERM, *, why: str, grace: float = 30.0) -> int:
        self.stop(name, sig, timeout=grace)
        return self.start(name, why=why)

    def ensure_running(self) -> list[str]:
        """Start every component that is not running; returns their names."""
        started = []
        for name in COMPONENTS:
            if self.pid(name) is None:
                self.start(name, why="exited on its own (found dead by the harness)")
                started.append(name)
        return started

    def etcd_endpoint(self) -> str:
        """The loopback client URL of etcd, from its recorded ``--listen-client-urls``."""
        for arg in self._recorded["etcd"].argv:
            if arg.startswith("--listen-client-urls="):
                url = arg.split("=", 1)[1].split(",")[0]
                port = url.rsplit(":", 1)[1]
                return f"http://127.0.0.1:{port}"
        raise ControlPlaneError("etcd has no --listen-client-urls in its command line")

    def etcd_revision(self) -> int:
        out = self._etcdctl("endpoint", "status", "--write-out=json")
        status = json.loads(out)
        return int(status[0]["Status"]["header"]["revision"])

    def compact(self) -> int:
        """Compact etcd's history up to its current revision; returns that revision."""
        revision = self.etcd_revision()
        self._etcdctl("compaction", str(revision))
        return revision

    def _etcdctl(self, *args: str) -> str:
        result = subprocess.run(
            [str(self.etcdctl), f"--endpoints={self.etcd_endpoint()}", "--command-timeout=10s", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if result.returncode != 0:
            raise ControlPlaneError(f"etcdctl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout


def _record(pid: int) -> _Recorded:
    argv = [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0") if a]
    cwd = os.readlink(f"/proc/{pid}/cwd")
    env: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for entry in Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0"):
            key, sep, value = entry.partition("=")
            if sep:
                env[key] = value
    return _Recorded(argv=argv, cwd=cwd, env=env or dict(os.environ))


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False
