"""The churn's choice of operations: drift stays below a fight with another writer; no fixed node port is released."""

from __future__ import annotations

import random
from collections import Counter

from chaos.workload import DRIFTED_CHILD, FIGHT_REPAIRS, FIGHT_WINDOW, RELEASES_NODE_PORT, Churn, Slot


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def churn(clock: Clock) -> Churn:
    return Churn(api=None, kubectl=[], slots=[], run_id="t", rate=1.0, rng=random.Random(7), clock=clock)  # type: ignore[arg-type]  # noqa: S311


def test_a_child_is_drifted_at_most_fight_repairs_minus_one_times_per_window() -> None:
    clock = Clock()
    picker = churn(clock)
    slot = Slot("team-a", "ws-1", exists=True)
    picked = Counter(picker.pick(slot)[0] for _ in range(2000))
    per_child = Counter(DRIFTED_CHILD[name] for name in picked.elements() if name in DRIFTED_CHILD)
    assert per_child == {"Deployment": FIGHT_REPAIRS - 1, "Service": FIGHT_REPAIRS - 1}
    assert picked["scale-spec"] > 100, "the other operations go on"
    clock.now += FIGHT_WINDOW
    after = Counter(picker.pick(slot)[0] for _ in range(2000))
    assert sum(after[name] for name in DRIFTED_CHILD) == 2 * (FIGHT_REPAIRS - 1), "a new window allows drift again"


def test_a_missing_webserver_is_created() -> None:
    assert churn(Clock()).pick(Slot("team-a", "ws-1"))[0] == "create"


def test_a_webserver_with_a_fixed_node_port_is_never_deleted_nor_its_service() -> None:
    picker = churn(Clock())
    fixed = Slot("team-a", "ws-005", node_port=30000, exists=True)
    free = Slot("team-a", "ws-006", exists=True)
    on_fixed = Counter(picker.pick(fixed)[0] for _ in range(3000))
    on_free = Counter(picker.pick(free)[0] for _ in range(3000))
    assert not RELEASES_NODE_PORT & set(on_fixed), f"a fixed node port could leak at an API server restart: {on_fixed}"
    assert set(on_free) >= RELEASES_NODE_PORT, "the other WebServers still carry the delete and re-create races"
    assert on_fixed["scale-spec"] > 300 and on_fixed["drift-service-selector"] == FIGHT_REPAIRS - 1
