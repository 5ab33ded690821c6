"""What /healthz and /readyz check: checks are plain callables returning ``(ok, detail)``, grouped by probe.

What the probes mean (what kubelet and people should act on):
- /healthz (liveness) fails when restarting the process would help: the main loop is blocked, or a watch task has
  died or stopped making progress for far longer than its own stall watchdog allows. It does NOT fail because the API
  server is unreachable: an outage must not restart-loop every replica, and the watchdog restarts silent watches.
- /readyz (readiness) passes once the informer caches have synced and /metrics listens (it starts beside the
  controller, ``Starting``). A standby replica (not the leader) syncs its caches too, so it is ready and takes over
  warm.

Checks run on the endpoint server's thread (``manager.endpoints``), so they must only read simple attributes (floats,
bools) that the main loop writes. The manager fills ``Probes`` (loop heartbeat, watch liveness, cache readiness).

Filled by ``manager.operator``; read by ``manager.endpoints`` on each probe.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Check", "Heartbeat", "Probes", "Starting", "Watching", "cache_synced", "run_checks", "watches_running"]

Check = Callable[[], tuple[bool, str]]


class Heartbeat:
    """Ticked by a task on the main loop; read from the health thread."""

    def __init__(self, *, interval: float = 0.5, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self.last = clock()

    async def run(self) -> None:
        while True:
            self.last = self._clock()
            await asyncio.sleep(self.interval)

    def check(self, *, max_lag: float) -> tuple[bool, str]:
        lag = self._clock() - self.last
        if lag > max_lag:
            return False, f"event loop blocked for {lag:.1f}s (limit {max_lag:.1f}s)"
        return True, "event loop responsive"


@dataclass
class Probes:
    liveness: dict[str, Check] = field(default_factory=dict)
    readiness: dict[str, Check] = field(default_factory=dict)


def run_checks(checks: dict[str, Check]) -> tuple[bool, str]:
    lines = []
    healthy = True
    for name, check in checks.items():
        try:
            ok, detail = check()
        except Exception as err:
            ok, detail = False, f"check raised {err!r}"
        healthy &= ok
        lines.append(f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}: {detail}")
    lines.append("healthz check passed" if healthy else "healthz check failed")
    return healthy, "\n".join(lines) + "\n"


class Starting:
    """Readiness of a server started beside the controller: fails until it listens, and says why it never will.

    Written by the main loop (``listening``, ``failed``), read by the probe thread (``check``).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._up = False
        self._error: str | None = None

    def listening(self) -> None:
        self._up = True

    def failed(self, error: str) -> None:
        self._error = error

    def check(self) -> tuple[bool, str]:
        if self._error is not None:
            return False, f"{self.name} failed to start: {self._error}"
        if self._up:
            return True, f"{self.name} listening"
        return False, f"{self.name} starting"


class Watching(Protocol):
    """What the checks read of a ``runtime.informers.group.InformerGroup``."""

    @property
    def died(self) -> bool: ...

    @property
    def has_synced(self) -> bool: ...

    @property
    def informers(self) -> Sequence[_Informer]: ...


class _Informer(Protocol):
    def seconds_since_activity(self) -> float: ...


def watches_running(group: Watching) -> Check:
    """Liveness of a group's watches: fails only when a watch task has died (a restart would bring it back).

    Watches cancelled by a shutdown have not died: the probes keep answering while the process stops.

    Silence from the API server is never a liveness failure: during an outage, or while the CRD or a list permission
    is missing, every replica would be restarted in a loop for nothing. The informer's own watchdog restarts silent
    watches; how long a watch has been silent is reported here as detail, and a blocked event loop is caught by the
    heartbeat check.
    """

    def check() -> tuple[bool, str]:
        if group.died:
            return False, "a watch task has died (ended on an error: see the log); a restart brings it back"
        silent = max((informer.seconds_since_activity() for informer in group.informers), default=0.0)
        return True, f"watching (last sign of the API server {silent:.0f}s ago)"

    return check


def cache_synced(group: Watching, name: str) -> Check:
    """Readiness: the group's first list is in its cache."""

    def check() -> tuple[bool, str]:
        if group.has_synced:
            return True, f"{name} cache synced"
        return False, f"{name} cache not synced yet (is the CRD installed and the operator allowed to list {name}?)"

    return check
