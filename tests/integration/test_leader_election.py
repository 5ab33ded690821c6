"""Leader election against the real API server, with short timings (lease 2 s, renew deadline 1.5 s, retry 0.3 s).

What only a real server proves: optimistic concurrency on the Lease (two candidates, exactly one leader), that the
Lease as ``kubectl`` shows it names the leader, and the failover times a user sees: after a graceful release (about
one retry period), after a leader dies without releasing (about one lease duration), and how fast a leader whose
Lease was taken over stops. The measured times are printed (run with ``-s`` to see them).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.cluster import Cluster
from webserver_operator import metrics
from webserver_operator.core.settings import ClientSettings, LeaseSettings
from webserver_operator.kube.client import KubeClient
from webserver_operator.kube.config import load_configuration
from webserver_operator.kube.errors import WritesStopped
from webserver_operator.runtime.leases.lease import Lease, LeaseLost

LEASE = 2.0
RENEW = 1.5
RETRY = 0.3
NAME = "webserver-operator-leader"


@pytest.fixture
async def kube(cluster: Cluster) -> AsyncIterator[KubeClient]:
    configuration = await load_configuration(kubeconfig=str(cluster.kubeconfig), context=cluster.context)
    client = await KubeClient.create(configuration, settings=ClientSettings(connect_timeout=5, read_timeout=5))
    async with client:
        yield client


def candidate(kube: KubeClient, namespace: str, identity: str) -> Lease:
    return Lease(
        kube,
        name=NAME,
        namespace=namespace,
        identity=identity,
        settings=LeaseSettings(lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY),
    )


async def lease_spec(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """The Lease as a user sees it (``kubectl get lease -o json``), without blocking the event loop."""
    lease = await asyncio.to_thread(cluster.get_json, "lease", NAME, namespace=namespace)
    spec: dict[str, Any] = lease["spec"]
    return spec


async def stop(*tasks: asyncio.Task[Any]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_exactly_one_leader_and_release_hands_over_within_a_retry_period(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    a, b = candidate(kube, namespace, "candidate-a"), candidate(kube, namespace, "candidate-b")
    tasks = {asyncio.create_task(a.acquire()): a, asyncio.create_task(b.acquire()): b}
    done, pending = await asyncio.wait(tasks, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1, "exactly one candidate acquires"
    (won,) = done
    (waiting,) = pending
    won.result()
    leader, standby = tasks[won], tasks[waiting]
    hold = asyncio.create_task(leader.hold())
    try:
        # While the leader renews, the standby stays a standby, for well over a lease duration.
        await asyncio.sleep(2 * LEASE)
        assert not waiting.done(), "the standby must not acquire a Lease that is being renewed"
        assert not hold.done()
        assert [e.identity for e in (a, b) if e.is_held] == [leader.identity]
        spec = await lease_spec(cluster, namespace)
        assert spec["holderIdentity"] == leader.identity
        assert spec["leaseDurationSeconds"] == 2
        assert spec["leaseTransitions"] == 0

        # Graceful shutdown: stop renewing, release; the standby takes over within about one retry period.
        await stop(hold)
        started = time.monotonic()
        await leader.release()
        released = time.monotonic()
        await asyncio.wait_for(waiting, 10)
        failover = time.monotonic() - released
        print(
            f"\nfailover after release: {failover:.3f}s after the release was written "
            f"({time.monotonic() - started:.3f}s including the release itself; retry period {RETRY}s)"
        )
        assert failover < 1.5
        assert [e.identity for e in (a, b) if e.is_held] == [standby.identity]
        spec = await lease_spec(cluster, namespace)
        assert spec["holderIdentity"] == standby.identity
        assert spec["leaseTransitions"] == 1
        assert spec["leaseDurationSeconds"] == 2
    finally:
        await stop(hold, waiting)


async def test_standby_takes_over_a_lease_duration_after_the_leader_dies(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    leader, standby = candidate(kube, namespace, "dies"), candidate(kube, namespace, "survives")
    await asyncio.wait_for(leader.acquire(), 10)
    hold = asyncio.create_task(leader.hold())
    waiting = asyncio.create_task(standby.acquire())
    try:
        await asyncio.sleep(1.5 * LEASE)
        assert not waiting.done()
        # kill -9: renewing stops, nothing is released.
        await stop(hold)
        died = time.monotonic()
        await asyncio.wait_for(waiting, 10)
        takeover = time.monotonic() - died
        print(
            f"\nfailover after a crash: {takeover:.3f}s after the last renew loop stopped "
            f"(lease duration {LEASE}s, retry period {RETRY}s)"
        )
        # The leader's last renew may have been up to one retry period before it died.
        assert takeover >= LEASE - RETRY - 0.1
        assert takeover < LEASE + 2 * RETRY + 0.5
        spec = await lease_spec(cluster, namespace)
        assert spec["holderIdentity"] == "survives"
        assert spec["leaseTransitions"] == 1
    finally:
        await stop(hold, waiting)


async def test_leader_stops_when_its_lease_is_taken_over(cluster: Cluster, namespace: str, kube: KubeClient) -> None:
    leader = candidate(kube, namespace, "deposed")
    await asyncio.wait_for(leader.acquire(), 10)
    hold = asyncio.create_task(leader.hold())
    try:
        await asyncio.sleep(1.0)
        assert metrics.REGISTRY.get_sample_value("leader_election_master_status", {"name": NAME}) == 1
        await asyncio.to_thread(
            cluster.kubectl,
            "patch",
            "lease",
            NAME,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec": {"holderIdentity": "intruder"}}',
        )
        taken = time.monotonic()
        with pytest.raises(LeaseLost, match="intruder"):
            await asyncio.wait_for(hold, RENEW + 2)
        stopped = time.monotonic() - taken
        print(f"\nleader stopped {stopped:.3f}s after its Lease was taken over (renew deadline {RENEW}s)")
        assert stopped < RENEW + 0.5
        assert not leader.is_held
        assert metrics.REGISTRY.get_sample_value("leader_election_master_status", {"name": NAME}) == 0
        await leader.release()
        spec = await lease_spec(cluster, namespace)
        assert spec["holderIdentity"] == "intruder", "the deposed leader neither renews nor releases it"
    finally:
        await stop(hold)


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"written": "by the leader"}}


async def test_a_leader_whose_event_loop_froze_past_the_renew_deadline_writes_nothing(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """Writes are fenced by time: after the event loop was blocked past the renew deadline (CPU throttling, a big
    relist), the first write that runs is refused before it leaves, although the renew loop never ran to clear a
    flag; once a renew succeeds again, writes leave again."""
    leader = candidate(kube, namespace, "frozen")
    writer = kube.without_retries().gated(lambda _path: leader.fence.why_not())
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    await asyncio.wait_for(leader.acquire(), 10)
    hold = asyncio.create_task(leader.hold())
    try:
        await asyncio.sleep(2 * RETRY)
        await writer.request("POST", collection, body=config_map("before-the-freeze"))
        renewed = leader.fence.valid_until
        async with asyncio.timeout(5):
            while leader.fence.valid_until == renewed:  # noqa: ASYNC110 - polling the fence is the point
                await asyncio.sleep(0.005)
        # A renewal just landed and hold() sleeps a retry period (a freeze during a renewal in flight would also end
        # hold(), as in client-go: its renew deadline passes; writes are refused in both cases).
        time.sleep(RENEW + 0.3)  # noqa: ASYNC251 - the point: nothing in the process runs meanwhile
        with pytest.raises(WritesStopped, match="renew deadline"):
            await writer.request("POST", collection, body=config_map("after-the-freeze"))
        listed = await asyncio.to_thread(cluster.get_json, "configmaps", namespace=namespace)
        names = {item["metadata"]["name"] for item in listed["items"]}
        assert "before-the-freeze" in names
        assert "after-the-freeze" not in names, "a write left after the renew deadline"
        await asyncio.sleep(2 * RETRY)  # nobody took the Lease over: the next renewal reopens the gate
        assert not hold.done()
        await writer.request("POST", collection, body=config_map("after-a-renewal"))
    finally:
        await stop(hold)
