"""Exposed metric names, types and labels, as Prometheus (and controller-runtime dashboards) will see them."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from webserver_operator import metrics

# exposed family name -> (type, label names); counters keep their `_total` in the exposed sample names.
EXPECTED: dict[str, tuple[str, set[str]]] = {
    "controller_runtime_reconcile_total": ("counter", {"controller", "result"}),
    "controller_runtime_reconcile_errors_total": ("counter", {"controller"}),
    "controller_runtime_reconcile_time_seconds": ("histogram", {"controller"}),
    "controller_runtime_max_concurrent_reconciles": ("gauge", {"controller"}),
    "controller_runtime_active_workers": ("gauge", {"controller"}),
    "controller_runtime_terminal_reconcile_errors_total": ("counter", {"controller"}),
    "workqueue_depth": ("gauge", {"controller", "name"}),
    "workqueue_adds_total": ("counter", {"controller", "name"}),
    "workqueue_queue_duration_seconds": ("histogram", {"controller", "name"}),
    "workqueue_work_duration_seconds": ("histogram", {"controller", "name"}),
    "workqueue_retries_total": ("counter", {"controller", "name"}),
    "workqueue_unfinished_work_seconds": ("gauge", {"controller", "name"}),
    "workqueue_longest_running_processor_seconds": ("gauge", {"controller", "name"}),
    "rest_client_requests_total": ("counter", {"code", "method", "host"}),
    "rest_client_request_duration_seconds": ("histogram", {"verb", "host"}),
    "leader_election_master_status": ("gauge", {"name"}),
    "webserver_operator_managed_webservers": ("gauge", set()),
    "webserver_operator_template_revision_webservers": ("gauge", {"revision"}),
    "webserver_operator_webserver_ready_status": ("gauge", {"namespace", "name", "condition"}),
    "webserver_operator_drift_repairs_total": ("counter", {"kind"}),
    "webserver_operator_watch_restarts_total": ("counter", {"resource", "reason"}),
    "webserver_operator_watch_relists_total": ("counter", {"resource"}),
    "webserver_operator_watch_events_total": ("counter", {"resource", "type"}),
    "webserver_operator_shard_filter_client_side": ("gauge", {"resource"}),
    "webserver_operator_shard_filter_dropped_total": ("counter", {"resource"}),
}


def touch_everything() -> None:
    metrics.RECONCILE_TOTAL.labels(controller="webserver", result="success").inc()
    metrics.RECONCILE_ERRORS.labels(controller="webserver").inc(0)
    metrics.RECONCILE_TIME.labels(controller="webserver").observe(0.02)
    metrics.MAX_CONCURRENT_RECONCILES.labels(controller="webserver").set(4)
    metrics.ACTIVE_WORKERS.labels(controller="webserver").set(0)
    metrics.TERMINAL_RECONCILE_ERRORS.labels(controller="webserver").inc(0)
    metrics.WEBSERVER_READY.labels(namespace="ns", name="web", condition="True").set(1)
    metrics.WORKQUEUE_DEPTH.labels(controller="webserver", name="webserver").set(0)
    metrics.WORKQUEUE_ADDS.labels(controller="webserver", name="webserver").inc(0)
    metrics.WORKQUEUE_QUEUE_DURATION.labels(controller="webserver", name="webserver").observe(1e-6)
    metrics.WORKQUEUE_WORK_DURATION.labels(controller="webserver", name="webserver").observe(0.01)
    metrics.WORKQUEUE_RETRIES.labels(controller="webserver", name="webserver").inc(0)
    metrics.WORKQUEUE_UNFINISHED_WORK.labels(controller="webserver", name="webserver").set(0)
    metrics.WORKQUEUE_LONGEST_RUNNING_PROCESSOR.labels(controller="webserver", name="webserver").set(0)
    metrics.REST_CLIENT_REQUESTS.labels(code="200", method="GET", host="h:6443").inc(0)
    metrics.REST_CLIENT_REQUEST_DURATION.labels(verb="GET", host="h:6443").observe(0.003)
    metrics.LEADER_ELECTION_MASTER_STATUS.labels(name="webserver-operator").set(1)
    metrics.MANAGED_WEBSERVERS.set(0)
    metrics.TEMPLATE_REVISION_WEBSERVERS.labels(revision="1").set(0)
    metrics.DRIFT_REPAIRS.labels(kind="Deployment").inc(0)
    metrics.WATCH_RESTARTS.labels(resource="deployments", reason="timeout").inc(0)
    metrics.WATCH_RELISTS.labels(resource="deployments").inc(0)
    metrics.WATCH_EVENTS.labels(resource="deployments", type="ADDED").inc(0)
    metrics.SHARD_FILTER_CLIENT_SIDE.labels(resource="deployments").set(0)
    metrics.SHARD_FILTER_DROPPED.labels(resource="deployments").inc(0)


def test_exposed_names_types_and_labels() -> None:
    touch_everything()
    text = metrics.render().decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    for name, (kind, labels) in EXPECTED.items():
        # The parser strips `_total` from counter family names; the samples keep it.
        family = families[name.removesuffix("_total") if kind == "counter" else name]
        assert family.type == kind, name
        sample_names = {sample.name for sample in family.samples}
        if kind == "counter":
            assert sample_names == {name}, name
        elif kind == "histogram":
            assert sample_names == {f"{name}_bucket", f"{name}_count", f"{name}_sum"}, name
        else:
            assert sample_names == {name}, name
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == labels, name
        assert f"# TYPE {name} {kind}" in text


def test_no_created_series_and_no_default_registry_leak() -> None:
    touch_everything()
    text = metrics.render().decode()
    assert "_created" not in text
    assert re.search(r"^process_", text, re.MULTILINE)  # process metrics, as controller-runtime exposes


def test_controller_runtime_buckets() -> None:
    touch_everything()
    text = metrics.render().decode()
    reconcile = re.findall(
        r'controller_runtime_reconcile_time_seconds_bucket\{controller="webserver",le="([^"]+)"', text
    )
    assert reconcile[:3] == ["0.005", "0.01", "0.025"]
    assert reconcile[-2:] == ["60.0", "+Inf"]
    assert len(reconcile) == 41
    queue = re.findall(
        r'workqueue_queue_duration_seconds_bucket\{controller="webserver",le="([^"]+)",name="webserver"', text
    )
    assert [float(b) for b in queue[:-1]] == [10.0**e for e in range(-8, 4)]
    assert queue[-1] == "+Inf"


def test_content_type() -> None:
    assert metrics.CONTENT_TYPE.startswith("text/plain")
