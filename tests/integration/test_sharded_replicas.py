"""Three operator replicas with six shards on a real API server, with the ShardedListAndWatch gate and without it.

What only real processes on a real server prove: the replicas split the shard Leases two each (as ``kubectl get
leases`` shows them), every WebServer in twelve namespaces (two per shard, random names so that FNV-1a spreads them)
converges, each replica's caches hold its own shards' objects and nothing else (read from its
``webserver_operator_shard_cached_objects`` series and compared with what ``kubectl get`` lists), the server filters
where it has the gate and each replica filters for itself where it has not, each replica receives each watch event
once however many shards it holds (one watch per resource for all of them), and a replica killed with SIGKILL has its
shards taken over by the others once its Leases expire, after which a WebServer in one of its namespaces converges.

Short Lease timings (4 s / 3 s / 0.5 s) keep the failover within seconds; the measured takeover time is printed
(``-s``). Both paths run in every `make test` (``gate_cluster``, tests/integration/conftest.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.operator import OperatorProcess
from harness.scrape import metric_value
from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver
from tests.support.sharding import fresh_namespaces
from tests.support.webservers import wait_ready
from webserver_operator.desired import CHILD_LABEL_SELECTOR
from webserver_operator.runtime.sharding.config import SHARD_COUNT_LABEL
from webserver_operator.runtime.sharding.ranges import shard_index

SHARDS = 6
REPLICAS = 3
LEASE_DURATION = 4.0
LEASE_FLAGS = (f"--lease-duration={LEASE_DURATION:g}", "--renew-deadline=3", "--retry-period=0.5")
SHARD_OF = "webserver-operator.dev/shard-of"


class Fleet:
    """The replicas of one installation (``--leader-election-id`` of its own) and what they say of themselves."""

    def __init__(self, cluster: Cluster, lease_namespace: str, group: str, logs: Path) -> None:
        self.cluster = cluster
        self.lease_namespace = lease_namespace
        self.group = group
        self.logs = logs
        self.replicas: list[OperatorProcess] = []

    def start(self, shards: int = SHARDS) -> OperatorProcess:
        replica = OperatorProcess(
            kubeconfig=self.cluster.kubeconfig,
            args=[
                "--leader-elect",
                f"--shards={shards}",
                f"--leader-election-id={self.group}",
                f"--leader-election-namespace={self.lease_namespace}",
                "--workers=2",
                *LEASE_FLAGS,
            ],
            log_path=self.logs / f"replica-{len(self.replicas)}.log",
        ).wait_started(timeout=60)
        self.replicas.append(replica)
        return replica

    @staticmethod
    def identity(replica: OperatorProcess) -> str:
        """The identity the replica holds its Leases as (its start-up log line says)."""
        return next(str(line["identity"]) for line in replica.snapshot() if "identity" in line and "shards" in line)

    def leases(self) -> list[dict[str, Any]]:
        """``kubectl get leases -l webserver-operator.dev/shard-of=<group>``."""
        listed = self.cluster.get_json("leases", "-l", f"{SHARD_OF}={self.group}", namespace=self.lease_namespace)
        items: list[dict[str, Any]] = listed["items"]
        return items

    def holders(self) -> dict[int, str]:
        """Shard -> holder identity, as the shard Leases show it."""
        return {
            int(item["metadata"]["name"].rsplit("-", 1)[1]): str(item["spec"].get("holderIdentity") or "")
            for item in self.leases()
        }

    def held_by(self, replica: OperatorProcess) -> set[int]:
        identity = self.identity(replica)
        return {shard for shard, holder in self.holders().items() if holder == identity}

    def listed_its_shards(self, replica: OperatorProcess) -> bool:
        """The replica has started every shard its Leases give it, and its caches have listed them (/readyz).

        The ``shard_held`` series goes to 1 in the same step that widens the informers' scope (which unsets their
        ``listed`` state), so reading it before /readyz leaves no window where a shard is held but not yet asked for.
        """
        text = replica.metrics_text()
        return held_series(text) == self.held_by(replica) and replica.probe("/readyz")[0] == 200


def held_series(text: str) -> set[int]:
    """The shards whose ``webserver_operator_shard_held`` series is 1 in a replica's /metrics."""
    return {s for s in range(SHARDS) if metric_value(text, "webserver_operator_shard_held", {"shard": str(s)})}


def cached(text: str, resource: str) -> dict[int, int]:
    """The replica's ``webserver_operator_shard_cached_objects`` series for ``resource``: shard -> objects."""
    found: dict[int, int] = {}
    for line in text.splitlines():
        if line.startswith("webserver_operator_shard_cached_objects{") and f'resource="{resource}"' in line:
            labels, value = line.rsplit(" ", 1)
            shard = int(labels.split('shard="', 1)[1].split('"', 1)[0])
            found[shard] = int(float(value))
    return found


def listed_per_shard(cluster: Cluster, kind: str, *selector: str) -> dict[int, int]:
    """What ``kubectl get <kind> -A`` lists, counted per shard of its namespace."""
    counts = dict.fromkeys(range(SHARDS), 0)
    for item in cluster.get_json(kind, "-A", *selector)["items"]:
        counts[shard_index(item["metadata"]["namespace"], SHARDS)] += 1
    return counts


@pytest.fixture
def fleet(gate_cluster: tuple[str, Cluster], tmp_path: Path) -> Iterator[Fleet]:
    _, cluster = gate_cluster
    with cluster.temporary_namespace("t-shard-leases") as lease_namespace:
        fleet = Fleet(cluster, lease_namespace, f"shards-{uuid.uuid4().hex[:6]}", tmp_path)
        try:
            yield fleet
        finally:
            for replica in fleet.replicas:
                if replica.proc.poll() is None:
                    code = replica.stop()
                    assert code == 0, f"a replica exited with {code} on SIGTERM:\n{replica.tail()}"
            if fleet.replicas:
                assert set(fleet.holders().values()) <= {""}, "every shard was handed back on the way out"


@pytest.fixture
def spread(gate_cluster: tuple[str, Cluster]) -> Iterator[dict[int, list[str]]]:
    """Twelve fresh namespaces, two per shard."""
    _, cluster = gate_cluster
    with fresh_namespaces(cluster, shards=SHARDS, per_shard=2) as per_shard:
        yield per_shard


def create(cluster: Cluster, namespace: str, name: str = "web") -> None:
    web: dict[str, Any] = webserver(name, replicas=1)
    web["metadata"]["namespace"] = namespace
    cluster.apply(web)


def test_three_replicas_split_six_shards_cache_only_their_own_and_take_over_a_killed_ones(
    gate_cluster: tuple[str, Cluster], fleet: Fleet, spread: dict[int, list[str]]
) -> None:
    path, cluster = gate_cluster
    for _ in range(REPLICAS):
        fleet.start()
    wait_until(
        lambda: sorted(len(fleet.held_by(r)) for r in fleet.replicas) == [2, 2, 2],
        timeout=60,
        message=lambda: f"the shards never settled two per replica: {fleet.holders()}",
    )
    # Create only once every replica lists its held shards: a creation during the relist for a newly held shard
    # arrives in the list, not on the watch, and the count of watch ADDED events below would miss it.
    wait_until(
        lambda: all(fleet.listed_its_shards(r) for r in fleet.replicas),
        timeout=30,
        message=lambda: (
            "a replica did not list the shards it holds: "
            + "; ".join(
                f"{fleet.identity(r)} holds {sorted(fleet.held_by(r))}: {r.probe('/readyz')[1]}" for r in fleet.replicas
            )
        ),
    )
    for names in spread.values():
        for namespace in names:
            create(cluster, namespace)
    for names in spread.values():
        for namespace in names:
            wait_ready(cluster, namespace, "web", timeout=120)

    def caches_match() -> bool:
        webservers = listed_per_shard(cluster, "webservers")
        deployments = listed_per_shard(cluster, "deployments", "-l", CHILD_LABEL_SELECTOR)
        for replica in fleet.replicas:
            mine = fleet.held_by(replica)
            text = replica.metrics_text()
            if cached(text, "webservers") != {s: webservers[s] for s in mine}:
                return False
            if cached(text, "deployments") != {s: deployments[s] for s in mine}:
                return False
        return True

    wait_until(
        caches_match,
        timeout=30,
        message=lambda: (
            "a replica's caches are not exactly its shards' objects: "
            + "; ".join(
                f"{fleet.identity(r)} holds {sorted(fleet.held_by(r))}, caches {cached(r.metrics_text(), 'webservers')}"
                for r in fleet.replicas
            )
        ),
    )
    for replica in fleet.replicas:
        text = replica.metrics_text()
        mine = fleet.held_by(replica)
        assert held_series(text) == mine, "shard_held agrees with the Leases"
        client_side = metric_value(text, "webserver_operator_shard_filter_client_side", {"resource": "deployments"})
        dropped = metric_value(text, "webserver_operator_shard_filter_dropped_total", {"resource": "deployments"})
        if path == "server":
            assert client_side == 0 and dropped == 0, "the API server filters: nothing of another shard arrives"
        else:
            assert client_side == 1, "without the gate the informers filter on the client side, and say so"
            assert dropped > 0, "and it dropped the other shards' Deployments itself"
        # One watch per resource for both shards: each creation reaches the replica once (with the gate off, every
        # replica hears all of them; with it, those of its shards), never once per held shard.
        created = sum(len(spread[s]) for s in (range(SHARDS) if path == "client" else mine))
        added = metric_value(text, "webserver_operator_watch_events_total", {"resource": "webservers", "type": "ADDED"})
        assert added == created, f"{added:g} WebServer creations received on the watch for {created} made"

    victim = fleet.replicas[0]
    orphaned = fleet.held_by(victim)
    victim.kill()
    killed_at = time.monotonic()
    survivors = fleet.replicas[1:]
    wait_until(
        lambda: all(fleet.holders()[s] in {fleet.identity(r) for r in survivors} for s in orphaned),
        timeout=LEASE_DURATION * 4 + 10,
        message=lambda: f"shards {sorted(orphaned)} of the killed replica were not taken over: {fleet.holders()}",
    )
    takeover = time.monotonic() - killed_at
    print(f"\n[{path}] shards {sorted(orphaned)} taken over {takeover:.1f}s after SIGKILL (lease {LEASE_DURATION:g}s)")
    assert sorted(len(fleet.held_by(r)) for r in survivors) == [3, 3]
    namespace = spread[min(orphaned)][0]
    create(cluster, namespace, "after-takeover")
    wait_ready(cluster, namespace, "after-takeover", timeout=120)


def test_a_new_shard_count_waits_until_the_replicas_of_the_old_one_have_stopped(
    cluster: Cluster, crd: str, tmp_path: Path
) -> None:
    """2 -> 6 shards as a rolling update runs it: the new replica starts while the old ones work, then they stop.

    Shard 1 of 2 and shards 3 to 5 of 6 cover the same namespaces: the new replica must hold nothing until the last
    old one has stopped, the old ones keep every shard held meanwhile (the newcomer does not cut their share), and
    then the new one takes all six and WebServers converge.
    """
    with (
        fresh_namespaces(cluster, shards=2, per_shard=2) as per_shard,
        cluster.temporary_namespace("t-shard-count") as lease_namespace,
    ):
        namespaces = [ns for names in per_shard.values() for ns in names]
        fleet = Fleet(cluster, lease_namespace, f"count-{uuid.uuid4().hex[:6]}", tmp_path)
        old = [fleet.start(shards=2), fleet.start(shards=2)]
        try:
            wait_until(
                lambda: sorted(len(fleet.held_by(r)) for r in old) == [1, 1],
                timeout=60,
                message=lambda: f"the old replicas never split the two shards: {fleet.holders()}",
            )
            for namespace in namespaces:
                create(cluster, namespace)
            for namespace in namespaces:
                wait_ready(cluster, namespace, "web", timeout=120)

            new = fleet.start(shards=6)
            time.sleep(LEASE_DURATION)  # several rounds of the new replica
            assert fleet.held_by(new) == set(), (
                f"the new replica took a Lease while the old ones run: {fleet.holders()}"
            )
            assert any("not taking any Lease" in str(line.get("msg")) for line in new.snapshot()), new.tail()
            assert old[0].stop() == 0
            wait_until(
                lambda: fleet.held_by(old[1]) == {0, 1},
                timeout=30,
                message=lambda: f"the last old replica did not take the stopped one's shard: {fleet.holders()}",
            )
            time.sleep(LEASE_DURATION / 2)
            assert fleet.held_by(new) == set(), "one old replica is still running"
            assert old[1].stop() == 0
            stopped_at = time.monotonic()
            wait_until(
                lambda: fleet.held_by(new) == set(range(6)),
                timeout=30,
                message=lambda: f"the new replica did not take the shards: {fleet.holders()}",
            )
            print(f"\nthe new shard count took over {time.monotonic() - stopped_at:.1f}s after the last old replica")
            counts = {item["metadata"]["labels"].get(SHARD_COUNT_LABEL) for item in fleet.leases()}
            assert counts == {"6"}, "every shard Lease now says 6 shards"
            for namespace in namespaces:
                create(cluster, namespace, "after-change")
            for namespace in namespaces:
                wait_ready(cluster, namespace, "after-change", timeout=120)
        finally:
            for replica in fleet.replicas:
                if replica.proc.poll() is None:
                    assert replica.stop() == 0, replica.tail()
