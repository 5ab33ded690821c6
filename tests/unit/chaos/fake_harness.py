"""Just enough of ``chaos.harness.Harness`` to run a proxy or process fault without a cluster.

Why: the faults are where issue 21 broke (a heal that blocked the event loop and never finished), and they can run
against the fake toxiproxy with fake replicas: a replica records the signals it gets and "exits" (a new pid) some
time after a SIGTERM, and the Lease holder switches to the standby after ``takeover`` seconds. ``as_harness`` hands
it to a fault under the type the fault expects.

Used by the chaos unit tests.
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from chaos.harness import SLOTS, Harness, RunConfig, other_slot
from chaos.replica import Incident
from chaos.toxiproxy import Toxiproxy
from chaos.verdicts import Window


@dataclass
class FakeReplica:
    slot: str
    pid: int | None = 100
    drain: float = 0.3  # seconds from SIGTERM to exit
    frozen: bool = False
    signals: list[str] = field(default_factory=list)
    workdir: Path = Path()

    def send(self, sig: signal.Signals) -> bool:
        self.signals.append(sig.name)
        if sig == signal.SIGTERM and self.pid is not None:
            asyncio.get_running_loop().call_later(self.drain, self._restarted)
        return True

    def _restarted(self) -> None:
        self.pid = (self.pid or 0) + 1

    def freeze(self) -> int | None:
        self.signals.append("SIGSTOP")
        self.frozen = True
        return self.pid

    def thaw(self) -> None:
        if self.frozen:
            self.signals.append("SIGCONT")
            self.frozen = False


@dataclass
class FakeHarness:
    toxi: Toxiproxy
    leader: str = "op-b"
    takeover: float = 0.2  # seconds after the first leader_now() call at which the standby holds the Lease
    cfg: RunConfig = field(
        default_factory=lambda: RunConfig(
            name="unit", webservers=1, namespaces=1, rate=1.0, faults=[], watch_all=False, in_cluster=False
        )
    )
    replicas: dict[str, FakeReplica] = field(default_factory=lambda: {s: FakeReplica(s) for s in SLOTS})
    slack_at: list[tuple[float, float, float]] = field(default_factory=list)
    prefix: str = "chaos-unit"
    exits: list[Incident] = field(default_factory=list)
    lease: str = "chaos-unit-leader"
    started: dict[str, list[float]] = field(default_factory=dict)  # user -> its processes' start times
    _asked: float | None = None

    async def leader_before_fault(self, window: Window) -> str:
        window.extra["leader before the fault"] = self.leader
        return self.leader

    async def leader_now(self) -> str | None:
        now = time.monotonic()
        self._asked = self._asked or now
        return other_slot(self.leader) if now - self._asked >= self.takeover else self.leader

    def serviceaccount(self, slot: str) -> str:
        return f"{self.prefix}-{slot}"

    def incidents(self) -> list[Incident]:
        return list(self.exits)

    def starts(self) -> dict[str, list[float]]:
        return dict(self.started)

    def as_harness(self) -> Harness:
        return cast(Harness, self)
