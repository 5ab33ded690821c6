"""What one sharded replica says of itself on /metrics, reduced to the figures the sharded benchmark reports.

Why apart and pure: the benchmark compares replicas by what they received (watch events, the client-side filter's
drops), did (reconciles) and hold (shards, cached objects); parsing the exposition text and taking the difference
between two scrapes is the same for every replica and phase, and is unit-tested on text. ``bench.fleet`` scrapes,
``bench.sharded`` takes ``delta`` over each phase.

Only the series named in ``WANTED`` are parsed: a replica's /metrics also carries three series per WebServer it has
reconciled (``webserver_operator_webserver_ready_status``), 30,000 lines at 10,000 WebServers, which the benchmark
does not read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

EVENTS = "webserver_operator_watch_events_total"
DROPPED = "webserver_operator_shard_filter_dropped_total"
RECONCILES = "controller_runtime_reconcile_total"
HELD = "webserver_operator_shard_held"
CACHED = "webserver_operator_shard_cached_objects"
CLIENT_SIDE = "webserver_operator_shard_filter_client_side"
WANTED = (EVENTS, DROPPED, RECONCILES, HELD, CACHED, CLIENT_SIDE)


@dataclass
class ReplicaMetrics:
    """One scrape: events received by resource (watch events of every type but BOOKMARK), and the rest as sums."""

    events: Counter[str] = field(default_factory=Counter)
    dropped: int = 0
    reconciles: int = 0
    held: list[int] = field(default_factory=list)
    cached_objects: int = 0
    client_side: bool = False

    @property
    def events_total(self) -> int:
        return sum(self.events.values())


def parse(text: str) -> ReplicaMetrics:
    """The figures of one replica's /metrics text (samples it does not export count as 0)."""
    kept = "\n".join(line for line in text.splitlines() if line.startswith(WANTED)) + "\n"
    out = ReplicaMetrics()
    for family in text_string_to_metric_families(kept):
        for sample in family.samples:
            labels, value = sample.labels, sample.value
            if sample.name == EVENTS and labels.get("type") != "BOOKMARK":
                out.events[labels.get("resource", "")] += int(value)
            elif sample.name == DROPPED:
                out.dropped += int(value)
            elif sample.name == RECONCILES:
                out.reconciles += int(value)
            elif sample.name == HELD and value:
                out.held.append(int(labels["shard"]))
            elif sample.name == CACHED:
                out.cached_objects += int(value)
            elif sample.name == CLIENT_SIDE and value:
                out.client_side = True
    out.held.sort()
    return out


def delta(before: ReplicaMetrics, after: ReplicaMetrics) -> dict[str, int]:
    """What a phase added: watch events received, events dropped by the client-side filter, reconciles."""
    return {
        "events": after.events_total - before.events_total,
        "dropped": after.dropped - before.dropped,
        "reconciles": after.reconciles - before.reconciles,
    }
