"""Prometheus metrics of the operator, named like controller-runtime's so existing dashboards work unchanged.

Why one module-level registry (``REGISTRY``) and not prometheus_client's global default: the default registry is
shared with every library in the process and refuses a second registration of the same name, which makes tests that
import the operator twice (or libraries that register their own metrics) fail in surprising ways. One explicit
registry per process, rendered by ``render()``, keeps the exposition exactly what we declare here plus the standard
process/platform/GC collectors (controller-runtime exposes process metrics too).

Naming traps avoided:

- prometheus_client strips a trailing ``_total`` from a Counter's name and appends it again on exposition, so the
  counters below are declared with the exact exposed name (``..._total``) and expose exactly that.
- prometheus_client also exposes a ``<name>_created`` sample per counter/histogram series, which controller-runtime
  does not have; they double the series count for nothing, so ``disable_created_metrics()`` is called at import
  (process-wide: this module is imported by the operator process, which owns its metrics).
- Label sets follow controller-runtime/client-go: ``rest_client_requests_total{code,method,host}`` with code
  ``"<error>"`` for requests that got no HTTP status, ``rest_client_request_duration_seconds{verb,host}``. Paths,
  object names and payloads never become label values (unbounded cardinality and possible secrets).

Histogram buckets are controller-runtime's: its reconcile buckets (5 ms .. 60 s, also used by its client-go adapter
for request latency) and ``ExponentialBuckets(10e-9, 10, 12)`` (10 ns .. 1000 s) for the work queue durations.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

__all__ = [
    "ACTIVE_WORKERS",
    "CONTENT_TYPE",
    "DRIFT_REPAIRS",
    "EVENTS_DROPPED",
    "LEADER_ELECTION_MASTER_STATUS",
    "MANAGED_WEBSERVERS",
    "MAX_CONCURRENT_RECONCILES",
    "RECONCILE_ERRORS",
    "RECONCILE_TIME",
    "RECONCILE_TOTAL",
    "REGISTRY",
    "REST_CLIENT_REQUESTS",
    "REST_CLIENT_REQUEST_DURATION",
    "SHARDS",
    "SHARD_CACHED_OBJECTS",
    "SHARD_FILTER_CLIENT_SIDE",
    "SHARD_FILTER_DROPPED",
    "SHARD_HELD",
    "SHARD_QUEUE_DEPTH",
    "TERMINAL_RECONCILE_ERRORS",
    "WATCH_EVENTS",
    "WATCH_RELISTS",
    "WATCH_RESTARTS",
    "WEBSERVER_READY",
    "WORKQUEUE_ADDS",
    "WORKQUEUE_DEPTH",
    "WORKQUEUE_LONGEST_RUNNING_PROCESSOR",
    "WORKQUEUE_QUEUE_DURATION",
    "WORKQUEUE_RETRIES",
    "WORKQUEUE_UNFINISHED_WORK",
    "WORKQUEUE_WORK_DURATION",
    "render",
]

disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client

#: The one registry of the process; ``render()`` exposes it, the manager serves it on /metrics.
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

#: Content type of ``render()``'s output (Prometheus text format 0.0.4).
CONTENT_TYPE = CONTENT_TYPE_LATEST

#: controller-runtime's reconcile_time_seconds buckets (also its rest_client_request_duration_seconds buckets).
_RECONCILE_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0,
    60.0,
)  # fmt: skip

#: controller-runtime's workqueue buckets: prometheus.ExponentialBuckets(10e-9, 10, 12).
_WORKQUEUE_BUCKETS: tuple[float, ...] = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 1000.0)

# --- controller-runtime: controller --------------------------------------------------------------------------------

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],  # result: success | error | requeue | requeue_after
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=_RECONCILE_BUCKETS,
    registry=REGISTRY,
)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
    registry=REGISTRY,
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    registry=REGISTRY,
)

# --- controller-runtime / client-go: work queue (labels controller and name, as controller-runtime) -----------

WORKQUEUE_DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", ["controller", "name"], registry=REGISTRY)
WORKQUEUE_ADDS = Counter(
    "workqueue_adds_total", "Total number of adds handled by workqueue", ["controller", "name"], registry=REGISTRY
)
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["controller", "name"],
    buckets=_WORKQUEUE_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    ["controller", "name"],
    buckets=_WORKQUEUE_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_RETRIES = Counter(
    "workqueue_retries_total", "Total number of retries handled by workqueue", ["controller", "name"], registry=REGISTRY
)
WORKQUEUE_UNFINISHED_WORK = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. "
    "Large values indicate stuck workers.",
    ["controller", "name"],
    registry=REGISTRY,
)
WORKQUEUE_LONGEST_RUNNING_PROCESSOR = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["controller", "name"],
    registry=REGISTRY,
)

# --- client-go: REST client ----------------------------------------------------------------------------------------

REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=REGISTRY,
)
REST_CLIENT_REQUEST_DURATION = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb and host.",
    ["verb", "host"],
    buckets=_RECONCILE_BUCKETS,
    registry=REGISTRY,
)

# --- client-go: leader election ------------------------------------------------------------------------------------

LEADER_ELECTION_MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. "
    "'name' is the string used to identify the lease.",
    ["name"],
    registry=REGISTRY,
)

# --- ours ----------------------------------------------------------------------------------------------------------

WEBSERVER_READY = Gauge(
    "webserver_operator_webserver_ready_status",
    "The Ready condition of each WebServer (1 for its current status, 0 for the others), as the API server stores it",
    ["namespace", "name", "condition"],
    registry=REGISTRY,
)
MANAGED_WEBSERVERS = Gauge(
    "webserver_operator_managed_webservers", "Number of WebServer objects in the operator's cache", registry=REGISTRY
)
TEMPLATE_REVISION_WEBSERVERS = Gauge(
    "webserver_operator_template_revision_webservers",
    "WebServers whose Deployment is at each pod template revision (docs/upgrades.md): how far a new rendering has "
    "reached",
    ["revision"],
    registry=REGISTRY,
)
DRIFT_REPAIRS = Counter(
    "webserver_operator_drift_repairs_total",
    "Writes that repaired a child object (Deployment, Service) someone else changed, or adopted an orphan, by child "
    "kind (updates after a WebServer spec change are not counted)",
    ["kind"],
    registry=REGISTRY,
)
WATCH_RESTARTS = Counter(
    "webserver_operator_watch_restarts_total",
    "Watch streams reopened, by resource and reason (timeout, closed, error, stalled, expired, rescoped)",
    ["resource", "reason"],
    registry=REGISTRY,
)
WATCH_RELISTS = Counter(
    "webserver_operator_watch_relists_total",
    "Full relists of a resource (initial list and after 410 Gone / Expired)",
    ["resource"],
    registry=REGISTRY,
)
EVENTS_DROPPED = Counter(
    "webserver_operator_events_dropped_total",
    "Kubernetes Events about WebServers not written, by reason: queue_full (the API server is not keeping up) or "
    "rate_limited (more than 25 Events for one WebServer in a short time)",
    ["reason"],
    registry=REGISTRY,
)
for _reason in ("queue_full", "rate_limited"):
    EVENTS_DROPPED.labels(reason=_reason)
WATCH_EVENTS = Counter(
    "webserver_operator_watch_events_total",
    "Watch events received, by resource and event type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)",
    ["resource", "type"],
    registry=REGISTRY,
)

SHARD_FILTER_CLIENT_SIDE = Gauge(
    "webserver_operator_shard_filter_client_side",
    "1 when the API server ignored the shard selector of a sharded informer (no ShardedListAndWatch gate, or an older "
    "server), so this replica receives every shard's objects and drops the others itself; 0 when the server filters",
    ["resource"],
    registry=REGISTRY,
)
SHARD_FILTER_DROPPED = Counter(
    "webserver_operator_shard_filter_dropped_total",
    "Listed objects and watch events outside this replica's shards, dropped by the client-side shard filter before "
    "the cache (0 while the API server filters)",
    ["resource"],
    registry=REGISTRY,
)

# --- sharding (--shards > 1) -----------------------------------------------------------------------------------------

SHARDS = Gauge(
    "webserver_operator_shards",
    "Shards the WebServers are split into (--shards); 1 when the operator is not sharded",
    registry=REGISTRY,
)
SHARD_HELD = Gauge(
    "webserver_operator_shard_held",
    "1 while this replica holds the shard's Lease and reconciles its WebServers, else 0; every replica exports one "
    "series per shard, so a shard whose series are all 0 has no holder",
    ["shard"],
    registry=REGISTRY,
)
SHARD_QUEUE_DEPTH = Gauge(
    "webserver_operator_shard_queue_depth",
    "WebServers of the shard waiting in this replica's work queue (only shards this replica holds)",
    ["shard"],
    registry=REGISTRY,
)
SHARD_CACHED_OBJECTS = Gauge(
    "webserver_operator_shard_cached_objects",
    "Objects in this replica's informer caches for the shard, by resource (only shards this replica holds)",
    ["shard", "resource"],
    registry=REGISTRY,
)


def render() -> bytes:
    """Return the whole registry in the Prometheus text format (serve it with ``CONTENT_TYPE``)."""
    return generate_latest(REGISTRY)
