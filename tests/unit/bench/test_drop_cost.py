"""The in-process drop-cost measurement replays real watch lines through the informer's filter."""

from __future__ import annotations

from bench import drop_cost
from webserver_operator.kube import jsoncodec
from webserver_operator.runtime.sharding.ranges import shard_index


def test_the_sample_events_are_distinct_deployments_of_one_namespace() -> None:
    events = [jsoncodec.decode(line) for line in drop_cost.event_lines(3)]
    names = {e["object"]["metadata"]["name"] for e in events}
    assert len(names) == 3
    assert {e["object"]["metadata"]["namespace"] for e in events} == {drop_cost.NAMESPACE}


def test_each_case_keeps_what_its_scope_holds() -> None:
    results = drop_cost.measure(events=50, rounds=1)
    assert results["no filter"]["cached"] == 50
    assert results["kept"]["cached"] == 50
    assert results["dropped"]["cached"] == 0
    assert all(row["us_per_event"] > 0 for row in results.values())


def test_the_dropped_case_keeps_another_shard() -> None:
    kept, dropped = drop_cost.scope_for("kept"), drop_cost.scope_for("dropped")
    assert kept is not None and dropped is not None
    assert kept.contains(drop_cost.NAMESPACE) and not dropped.contains(drop_cost.NAMESPACE)
    assert shard_index(drop_cost.NAMESPACE, drop_cost.SHARDS) in range(drop_cost.SHARDS)
