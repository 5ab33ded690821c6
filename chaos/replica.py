"""Operator replicas as real processes, supervised the way kubelet would: restarted when they exit, probed each second.

Why processes and not tasks: kill -9, SIGTERM drains, exit codes and tracebacks on stderr are what is judged, and a
replica must be able to die at any instant. Each replica is a *slot* (``op-a``, ``op-b``): its process is restarted
one second after it exits (exit 1 after a lost Lease is the operator's design, a crash is not; ``hold_down`` keeps it
down longer once, for a replica that must stay dead past its Leases), and every incarnation
runs as the slot's ServiceAccount with ``POD_NAME`` set to the slot name, so its Lease identity is
``<slot>_<random>`` and its requests carry the slot's user in the audit log.

Two ways to reach the API server, both through the slot's toxiproxy port:
- ``in_cluster``: as in a pod. ``KUBERNETES_SERVICE_HOST``/``PORT`` are set and the slot's token, CA and namespace are
  mounted at /var/run/secrets/kubernetes.io/serviceaccount inside a private mount namespace (``unshare --mount``,
  root only), because the operator reads the in-cluster token from that fixed path and offers no setting to read it
  elsewhere. A token rotation is then a file replaced under the operator's feet, as kubelet does it.
- ``kubeconfig``: a kubeconfig holding the slot's token (no rotation).

Liveness: a thread polls ``/healthz`` every second while the process is alive and keeps every non-200 answer (and
every probe that got no answer within 2 s) with its time and text, except for probes sent while the harness had the
process frozen (SIGSTOP, the leader-freeze fault): that silence is the harness's doing. Tracebacks: stderr is kept
per incarnation and every traceback (a JSON log line with one in its ``error`` field, or Python's raw ``Traceback``
output) is recorded with its time and last line.

Used by ``scenario`` and ``faults``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from chaos.identity import ServiceAccountDir
from harness.operator import run_command
from harness.process import Process

RESTART_DELAY = 1.0
_MOUNT_SCRIPT = (
    "mount -t tmpfs tmpfs /var/run && mkdir -p /var/run/secrets/kubernetes.io/serviceaccount && "
    'mount --bind "$0" /var/run/secrets/kubernetes.io/serviceaccount && exec "$@"'
)


@dataclass(frozen=True)
class Incident:
    time: float
    slot: str
    kind: str  # started, exited, signalled, liveness, traceback
    detail: str


@dataclass
class ReplicaConfig:
    slot: str
    serviceaccount: str
    proxy_port: int
    args: list[str]
    sa_dir: ServiceAccountDir | None = None  # in-cluster mode when set
    kubeconfig: Path | None = None
    operator_source: Path | None = None  # run the webserver_operator package found here instead of the installed one


@dataclass
class _Incarnation:
    started: float
    log_path: Path
    process: Process | None = None
    health_port: int = 0
    in_raw_traceback: bool = False
    expected_exit: bool = False
    frozen: bool = False  # SIGSTOPped by the harness
    thawed: float = 0.0  # when the harness last sent SIGCONT

    @property
    def proc(self) -> subprocess.Popen[str]:
        assert self.process is not None
        return self.process.proc


@dataclass
class Replica:
    """One supervised slot. ``start()`` once; ``stop()`` ends it for good."""

    config: ReplicaConfig
    workdir: Path
    incidents: list[Incident] = field(default_factory=list)
    probes: int = 0
    _current: _Incarnation | None = None
    _count: int = 0
    _stopping: bool = False
    _hold_down: float = 0.0  # seconds the next restart waits instead of RESTART_DELAY (``hold_down``)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    @property
    def slot(self) -> str:
        return self.config.slot

    def _record(self, kind: str, detail: str, when: float | None = None) -> None:
        with self._lock:
            self.incidents.append(Incident(when or time.time(), self.slot, kind, detail))

    def _command(self) -> tuple[list[str], dict[str, str]]:
        cfg = self.config
        base = run_command(metrics_bind="0", args=["--log-format=json", *cfg.args])
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG" and not k.startswith("WEBSERVER_OPERATOR_")}
        env.update({"POD_NAME": cfg.slot, "PYTHONUNBUFFERED": "1"})
        if cfg.operator_source is not None:
            env["PYTHONPATH"] = str(cfg.operator_source)
        if cfg.sa_dir is not None:
            env.update({"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(cfg.proxy_port)})
            argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _MOUNT_SCRIPT]
            return [*argv, str(cfg.sa_dir.path), *base], env
        assert cfg.kubeconfig is not None, "a replica needs sa_dir (in-cluster) or a kubeconfig"
        return [*base, f"--kubeconfig={cfg.kubeconfig}"], env

    def start(self) -> None:
        self._spawn()
        for target in (self._supervise, self._probe_loop):
            thread = threading.Thread(target=target, name=f"{self.slot}-{target.__name__}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _spawn(self) -> None:
        argv, env = self._command()
        self._count += 1
        inc = _Incarnation(started=time.time(), log_path=self.workdir / f"{self.slot}-{self._count}.log")
        inc.process = Process(argv, env=env, log_path=inc.log_path, on_line=lambda line: self._read(inc, line))
        with self._lock:
            self._current = inc
        self._record("started", f"pid {inc.proc.pid}, log {inc.log_path.name}")

    def _read(self, inc: _Incarnation, line: str) -> None:
        """One stderr line: the probe port from the first JSON line, and any traceback, JSON or raw."""
        now = time.time()
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if isinstance(entry, dict):
            inc.in_raw_traceback = False
            if "health_port" in entry and not inc.health_port:
                inc.health_port = int(entry["health_port"])
            error = str(entry.get("error") or "")
            if "Traceback (most recent call last)" in error:
                last = error.strip().splitlines()[-1]
                kind = last.split(":", 1)[0].rsplit(".", 1)[-1]
                self._record("traceback", f"{kind} | {entry.get('msg', '')}"[:300], now)
            return
        if line.startswith("Traceback (most recent call last)"):
            inc.in_raw_traceback = True
        elif inc.in_raw_traceback and line.strip() and not line.startswith((" ", "\t")):
            inc.in_raw_traceback = False
            kind = line.strip().split(":", 1)[0].rsplit(".", 1)[-1]
            self._record("traceback", f"{kind} | (raw stderr) {line.strip()}"[:300], now)

    def _stopped(self) -> bool:
        return self._stopping

    def _supervise(self) -> None:
        while not self._stopped():
            time.sleep(0.1)
            with self._lock:
                inc = self._current
            if inc is None or inc.proc.poll() is None:
                continue
            code = inc.proc.returncode
            if self._stopped():
                return
            self._record("exited", f"exit code {code}" + (" (sent by the harness)" if inc.expected_exit else ""))
            with self._lock:
                delay, self._hold_down = max(RESTART_DELAY, self._hold_down), 0.0
            time.sleep(delay)
            if not self._stopped():
                self._spawn()

    def _probe_loop(self) -> None:
        while not self._stopping:
            time.sleep(1.0)
            with self._lock:
                inc = self._current
            if inc is None or not inc.health_port or inc.proc.poll() is not None:
                continue
            url = f"http://127.0.0.1:{inc.health_port}/healthz"
            sent = time.time()
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    code, text = resp.status, ""
            except urllib.error.HTTPError as err:
                code, text = err.code, err.read().decode(errors="replace")
            except OSError as err:
                time.sleep(3.0)
                if inc.proc.poll() is not None or inc.expected_exit:
                    continue  # the process was exiting (its probe server stops first): not a liveness answer
                code, text = 0, f"no answer within 2s: {err}"
            if inc.frozen or sent <= inc.thawed:
                continue  # a probe sent to a process the harness froze: the silence is the harness's doing
            self.probes += 1
            if code != 200:
                failed = [ln for ln in text.splitlines() if ln.startswith("[-]")]
                self._record("liveness", f"HTTP {code}: {'; '.join(failed) or text.strip()}"[:300])

    # -- actions ------------------------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        with self._lock:
            inc = self._current
        if inc is None or inc.proc.poll() is not None:
            return None
        return inc.proc.pid

    def alive(self) -> bool:
        return self.pid is not None

    def send(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to the running process (the supervisor restarts it if it exits); False if none runs."""
        with self._lock:
            inc = self._current
        if inc is None or inc.proc.poll() is not None:
            return False
        inc.expected_exit = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(inc.proc.pid, sig)
        self._record("signalled", sig.name)
        return True

    def hold_down(self, seconds: float) -> None:
        """Keep the slot down for ``seconds`` after its process next exits (a replica that stays dead), then restart."""
        with self._lock:
            self._hold_down = seconds

    def starts(self) -> list[float]:
        """When each of the slot's processes was started, in order."""
        return [i.time for i in self.of_kind("started")]

    def freeze(self) -> int | None:
        """SIGSTOP the running process (its pid; None if none runs). Probes are not judged until ``thaw()``."""
        with self._lock:
            inc = self._current
        if inc is None or inc.proc.poll() is not None:
            return None
        inc.frozen = True
        os.kill(inc.proc.pid, signal.SIGSTOP)
        self._record("signalled", "SIGSTOP")
        return inc.proc.pid

    def thaw(self) -> None:
        """SIGCONT the process if the harness froze it (harmless otherwise); probes sent before now stay unjudged."""
        with self._lock:
            inc = self._current
        if inc is None or not inc.frozen:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(inc.proc.pid, signal.SIGCONT)
        inc.thawed = time.time()
        inc.frozen = False
        self._record("signalled", "SIGCONT")

    def wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                inc = self._current
            if inc is not None and inc.health_port and inc.proc.poll() is None:
                try:
                    url = f"http://127.0.0.1:{inc.health_port}/readyz"
                    with urllib.request.urlopen(url, timeout=2) as resp:
                        if resp.status == 200:
                            return True
                except OSError:
                    pass
            time.sleep(0.2)
        return False

    def stop(self, timeout: float = 40.0) -> int | None:
        """SIGTERM the running process and stop supervising; its exit code (None if none was running)."""
        self._stopping = True
        with self._lock:
            inc = self._current
        code: int | None = None
        if inc is not None and inc.process is not None and inc.proc.poll() is None:
            inc.expected_exit = True
            code = inc.process.stop(signal.SIGTERM, timeout)
            if inc.process.killed:
                self._record("exited", f"did not stop within {timeout:.0f}s of SIGTERM; killed")
            self._record("exited", f"exit code {code} after SIGTERM from the harness (final stop)")
        for thread in self._threads:
            thread.join(timeout=5)
        return code

    def of_kind(self, kind: str, start: float = 0.0, end: float = float("inf")) -> list[Incident]:
        with self._lock:
            return [i for i in self.incidents if i.kind == kind and start <= i.time <= end]
