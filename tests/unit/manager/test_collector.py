"""The collector settings: a larger young generation, and a freeze of what is alive once the caches synced."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from webserver_operator.manager import collector


@pytest.fixture
def restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


@pytest.mark.usefixtures("restored")
def test_tune_raises_only_the_young_threshold() -> None:
    gc.set_threshold(700, 10, 10)
    collector.tune()
    assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, 10, 10)


@pytest.mark.usefixtures("restored")
def test_settle_collects_cycles_then_freezes_what_is_alive() -> None:
    class Node:
        other: object

    cycle_a, cycle_b = Node(), Node()
    cycle_a.other, cycle_b.other = cycle_b, cycle_a
    in_cycle = weakref.ref(cycle_a)
    del cycle_a, cycle_b  # garbage held only by its own cycle
    gc.unfreeze()
    alive = len(gc.get_objects())
    collector.settle()
    assert in_cycle() is None, "the cycle was collected before the freeze"
    assert gc.get_freeze_count() > alive // 2, "what was alive is frozen"
    assert len(gc.get_objects()) < 100, "and no collection walks it any more"
