"""Milestones and sequences record the receive time of the event that satisfied them, without a server."""

import asyncio
from typing import Any

from bench import checks
from bench.tracker import Sequence, Tracker, wait_all


def obj(name: str, uid: str, replicas: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid}, "spec": {"replicas": replicas}}


async def test_milestone_records_the_event_that_satisfied_each_name() -> None:
    tracker = Tracker(api=None, namespace="bench")  # type: ignore[arg-type]  # no watches are started
    tracker._apply("dep", "ADDED", obj("a", "1"), 10.0)
    milestone = tracker.milestone(checks.children_exist, ["a", "b"])
    tracker._apply("svc", "ADDED", obj("a", "2"), 11.0)
    tracker._apply("dep", "ADDED", obj("b", "3"), 12.0)
    assert milestone.reached == {"a": 11.0}
    tracker._apply("svc", "ADDED", obj("b", "4"), 13.0)
    assert milestone.reached == {"a": 11.0, "b": 13.0}
    assert await wait_all([milestone], seconds=1)


async def test_sequence_times_each_stage_even_when_events_arrive_together() -> None:
    tracker = Tracker(api=None, namespace="bench")  # type: ignore[arg-type]
    tracker._apply("dep", "ADDED", obj("a", "1"), 1.0)
    sequence = Sequence(checks.gone_or_replaced("dep", "1"), checks.replaced("dep", "1"))
    milestone = tracker.milestone(sequence, ["a"])
    tracker._apply("dep", "DELETED", obj("a", "1"), 2.0)
    tracker._apply("dep", "ADDED", obj("a", "9"), 2.5)
    assert sequence.times == [2.0, 2.5]
    assert milestone.done.is_set()


async def test_wait_all_reports_a_timeout_and_keeps_what_was_reached() -> None:
    tracker = Tracker(api=None, namespace="bench")  # type: ignore[arg-type]
    milestone = tracker.milestone(checks.children_exist, ["a"])
    assert not await wait_all([milestone], seconds=0.05)
    assert milestone.pending == {"a"}
    await asyncio.sleep(0)
