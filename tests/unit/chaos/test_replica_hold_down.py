"""A slot held down stays dead for the time asked, then the supervisor starts a new process (chaos/replica.py).

The shard-kill fault relies on it: a killed replica restarted after the usual second would claim its own shards back
as they expire, and their takeover by the other replicas could not be observed. A real process (``sleep``) stands in
for the operator; only the command differs from a run.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from chaos.replica import RESTART_DELAY, Replica, ReplicaConfig

pytestmark = pytest.mark.timeout(30)


class SleepingReplica(Replica):
    def _command(self) -> tuple[list[str], dict[str, str]]:
        return ["sleep", "60"], {"PATH": "/usr/bin:/bin"}


def _wait_restart(replica: Replica, old: int | None, within: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < within:
        if replica.pid not in (None, old):
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"no new process within {within}s")


def test_a_slot_held_down_restarts_only_after_the_hold_and_the_next_exit_after_the_usual_delay(tmp_path: Path) -> None:
    replica = SleepingReplica(ReplicaConfig(slot="op-a", serviceaccount="sa", proxy_port=0, args=[]), tmp_path)
    replica.start()
    try:
        first = replica.pid
        replica.hold_down(2.5)
        replica.send(signal.SIGKILL)
        assert _wait_restart(replica, first, 10) >= 2.4
        second = replica.pid
        replica.send(signal.SIGKILL)  # the hold applies once
        assert _wait_restart(replica, second, 10) < RESTART_DELAY + 1.0
        assert len(replica.starts()) == 3 and replica.starts() == sorted(replica.starts())
    finally:
        replica.stop(timeout=5)
