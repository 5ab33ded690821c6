"""The admin's pace: at most the rate per minute, at most that many rolling, none while one is stuck."""

from __future__ import annotations

from typing import Any

from webserver_operator.reconcile.revisions import Pacer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def deployment(*, available: bool = False, stuck: bool = False) -> dict[str, Any]:
    ready = 2 if available else 1
    conditions = [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}] if stuck else []
    return {
        "metadata": {"generation": 2},
        "spec": {"replicas": 2},
        "status": {
            "observedGeneration": 2,
            "replicas": 2,
            "updatedReplicas": 2,
            "availableReplicas": ready,
            "conditions": conditions,
        },
    }


A, B, C = ("ns", "a"), ("ns", "b"), ("ns", "c")


def test_off_by_default() -> None:
    pacer = Pacer(0, Clock())
    assert not pacer.active and not pacer.take(A) and pacer.retry_in() is None


def test_never_more_than_the_rate_rolling_nor_per_minute() -> None:
    clock = Clock()
    pacer = Pacer(2, clock)
    assert pacer.take(A) and pacer.take(B)
    assert not pacer.take(C), "two are rolling"
    pacer.observe(A, deployment(available=True))
    assert not pacer.take(C), "two moves within the minute already"
    clock.now += 60
    assert pacer.take(C)
    assert pacer.retry_in() == 30


def test_a_stuck_rollout_stops_the_pacer_until_it_recovers() -> None:
    clock = Clock()
    pacer = Pacer(10, clock)
    assert pacer.take(A)
    pacer.observe(A, deployment(stuck=True))
    clock.now += 600
    assert not pacer.take(B)
    assert pacer.stuck() == [A]
    pacer.observe(A, deployment(available=True))  # someone fixed it
    assert pacer.take(B)
