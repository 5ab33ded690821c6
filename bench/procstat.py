"""CPU seconds and resident memory of a process, read from /proc, and the control plane's own processes.

Why /proc and not the operators' metrics: the three operators export different metrics (or none); the kernel's
accounting is the same for all of them. CPU is utime + stime of the process (all its threads), also recorded apart:
user time is the process's own work (Python, JSON, TLS), system time its system calls (epoll, socket reads and writes),
so the split shows how much of a profile's "epoll" share was CPU spent in the kernel rather than idle waiting. RSS is
VmRSS, and a sampler keeps the peak within a scenario. The control plane's processes (kube-apiserver, etcd, ...) are
found by their command lines, which all contain the cluster's folder, so the report can say who spent the CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CONTROL_PLANE = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok")


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of ``pid`` so far ((0, 0) when it has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0, 0.0
    fields = stat.rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it has exited)."""
    user, system = cpu_times(pid)
    return user + system


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` in MB (10^6 bytes)."""
    return _status_kb(pid, "VmRSS") * 1024 / 1e6


def control_plane_pids(cluster_dir: Path) -> dict[str, int]:
    """PIDs of the control-plane components started for ``cluster_dir`` (by executable name)."""
    found: dict[str, int] = {}
    marker = str(cluster_dir)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not any(marker.encode() in arg for arg in argv):
            continue
        exe = Path(argv[0].decode(errors="replace")).name
        if exe in CONTROL_PLANE:
            found[exe] = int(entry.name)
    return found


@dataclass
class Usage:
    cpu_s: float
    user_s: float
    system_s: float
    rss_end_mb: float
    rss_peak_mb: float
    control_plane_cpu_s: dict[str, float]


class Meter:
    """CPU and RSS of one process (plus the control plane's CPU) over a window; ``async with`` samples RSS."""

    def __init__(self, pid: int, control_plane: dict[str, int], *, interval: float = 0.25) -> None:
        self.pid = pid
        self.control_plane = control_plane
        self.interval = interval
        self.usage: Usage | None = None
        self._peak = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self._peak = max(self._peak, rss_mb(self.pid))
            await asyncio.sleep(self.interval)

    async def __aenter__(self) -> Meter:
        self._times0 = cpu_times(self.pid)
        self._cp0 = {name: cpu_seconds(pid) for name, pid in self.control_plane.items()}
        self._peak = rss_mb(self.pid)
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        end = rss_mb(self.pid)
        user, system = (now - before for now, before in zip(cpu_times(self.pid), self._times0, strict=True))
        self.usage = Usage(
            cpu_s=round(user + system, 3),
            user_s=round(user, 3),
            system_s=round(system, 3),
            rss_end_mb=round(end, 1),
            rss_peak_mb=round(max(self._peak, end), 1),
            control_plane_cpu_s={
                name: round(cpu_seconds(pid) - self._cp0[name], 3) for name, pid in self.control_plane.items()
            },
        )
