"""RecentCreates: which creates count as "again soon", and that it forgets what is older than the window."""

from __future__ import annotations

from webserver_operator.reconcile.recreates import RECREATE_WINDOW, RecentCreates

DEPLOYMENT = ("team-a", "web", "Deployment")
SERVICE = ("team-a", "web", "Service")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_second_create_for_the_same_uid_within_the_window_is_again_soon() -> None:
    clock = Clock()
    creates = RecentCreates(clock)
    assert not creates.again_soon(DEPLOYMENT, "uid-1")
    creates.created(DEPLOYMENT, "uid-1")
    clock.now += RECREATE_WINDOW - 1
    assert creates.again_soon(DEPLOYMENT, "uid-1")
    assert not creates.again_soon(DEPLOYMENT, "uid-2"), "a new WebServer's first create reads nothing"
    assert not creates.again_soon(SERVICE, "uid-1")
    clock.now += 2
    assert not creates.again_soon(DEPLOYMENT, "uid-1")


def test_entries_older_than_the_window_are_dropped_as_new_ones_arrive() -> None:
    clock = Clock()
    creates = RecentCreates(clock)
    for i in range(100):
        creates.created(("team-a", f"web-{i}", "Deployment"), f"uid-{i}")
    clock.now += RECREATE_WINDOW + 1
    creates.created(DEPLOYMENT, "uid-x")
    assert len(creates) == 1


def test_a_deleted_webserver_is_forgotten() -> None:
    creates = RecentCreates(Clock())
    creates.created(DEPLOYMENT, "uid-1")
    creates.created(SERVICE, "uid-1")
    creates.created(("team-b", "web", "Service"), "uid-2")
    creates.forget(("team-a", "web"))
    assert (creates.again_soon(DEPLOYMENT, "uid-1"), creates.again_soon(SERVICE, "uid-1"), len(creates)) == (
        False,
        False,
        1,
    )
