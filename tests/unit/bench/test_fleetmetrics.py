"""A replica's /metrics text reduced to events received, drops, reconciles, held shards and cached objects."""

from bench.fleetmetrics import ReplicaMetrics, delta, parse

TEXT = """\
# HELP webserver_operator_watch_events_total Watch events received
# TYPE webserver_operator_watch_events_total counter
webserver_operator_watch_events_total{resource="webservers",type="ADDED"} 10.0
webserver_operator_watch_events_total{resource="webservers",type="MODIFIED"} 5.0
webserver_operator_watch_events_total{resource="deployments",type="ADDED"} 7.0
webserver_operator_watch_events_total{resource="deployments",type="BOOKMARK"} 3.0
webserver_operator_shard_filter_dropped_total{resource="deployments"} 4.0
controller_runtime_reconcile_total{controller="webserver",result="success"} 20.0
controller_runtime_reconcile_total{controller="webserver",result="error"} 1.0
webserver_operator_shard_held{shard="0"} 0.0
webserver_operator_shard_held{shard="1"} 1.0
webserver_operator_shard_held{shard="3"} 1.0
webserver_operator_shard_cached_objects{shard="1",resource="webservers"} 6.0
webserver_operator_shard_cached_objects{shard="3",resource="deployments"} 2.0
webserver_operator_shard_filter_client_side{resource="deployments"} 1.0
webserver_operator_shard_filter_client_side{resource="webservers"} 0.0
webserver_operator_webserver_ready_status{namespace="a",name="w",status="True"} 1.0
"""


def test_a_scrape_counts_what_the_replica_received_did_and_holds() -> None:
    metrics = parse(TEXT)
    assert dict(metrics.events) == {"webservers": 15, "deployments": 7}, "bookmarks are not objects received"
    assert metrics.events_total == 22
    assert metrics.dropped == 4
    assert metrics.reconciles == 21
    assert metrics.held == [1, 3]
    assert metrics.cached_objects == 8
    assert metrics.client_side


def test_a_server_side_replica_without_samples_reads_as_zero() -> None:
    metrics = parse('webserver_operator_shard_filter_client_side{resource="deployments"} 0.0\n')
    assert metrics == ReplicaMetrics()
    assert not metrics.client_side


def test_delta_is_what_a_phase_added() -> None:
    before = parse(TEXT)
    after = parse(TEXT.replace("} 10.0", "} 110.0").replace("} 20.0", "} 70.0"))
    assert delta(before, after) == {"events": 100, "dropped": 0, "reconciles": 50}
