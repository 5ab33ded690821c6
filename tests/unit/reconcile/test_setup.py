"""The bookkeeping declared next to the reconciler: the per-WebServer readiness gauge (as cert-manager's) and the
memory of the last status writes."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support import factories
from tests.support.fake_api import FakeApi
from webserver_operator import metrics
from webserver_operator.api.models import WEBSERVERS, WebServer
from webserver_operator.core.resources import DEPLOYMENTS, NAMESPACES, PODDISRUPTIONBUDGETS, SERVICES
from webserver_operator.core.settings import ControllerSettings, WatchSettings
from webserver_operator.desired import TEMPLATE_REVISION, desired_deployment, template_revision_of
from webserver_operator.reconcile.reconciler import WebServerReconciler
from webserver_operator.reconcile.setup import ReadySeries, setup_webserver_controller
from webserver_operator.runtime.informers.cache import InformerCache
from webserver_operator.runtime.sharding.cache import ShardedInformerCache
from webserver_operator.runtime.sharding.ranges import shard_index


def sample(name: str, condition: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(
        "webserver_operator_webserver_ready_status", {"namespace": "ns", "name": name, "condition": condition}
    )


def webserver(name: str, ready: str | None) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": ready}] if ready else []
    return factories.webserver(name, namespace="ns", spec=None, status={"conditions": conditions})


def test_one_series_per_status_value_the_current_one_is_1() -> None:
    series = ReadySeries()
    series.publish("ADDED", webserver("gauge-a", None))
    assert (sample("gauge-a", "Unknown"), sample("gauge-a", "True")) == (1, 0)
    series.publish("MODIFIED", webserver("gauge-a", "False"))
    assert (sample("gauge-a", "True"), sample("gauge-a", "False"), sample("gauge-a", "Unknown")) == (0, 1, 0)
    series.publish("MODIFIED", webserver("gauge-a", "True"))
    assert (sample("gauge-a", "True"), sample("gauge-a", "False")) == (1, 0)


def test_a_deleted_webserver_leaves_no_series() -> None:
    series = ReadySeries()
    series.publish("ADDED", webserver("gauge-b", "True"))
    series.publish("DELETED", webserver("gauge-b", "True"))
    assert all(sample("gauge-b", c) is None for c in ("True", "False", "Unknown"))


def test_a_webserver_deleted_and_created_again_gets_its_series_back() -> None:
    series = ReadySeries()
    series.publish("ADDED", webserver("gauge-c", "True"))
    series.publish("MODIFIED", webserver("gauge-c", "True"))  # unchanged: the series stay as they are
    assert (sample("gauge-c", "True"), sample("gauge-c", "False")) == (1, 0)
    series.publish("DELETED", webserver("gauge-c", "True"))
    series.publish("ADDED", webserver("gauge-c", "True"))
    assert (sample("gauge-c", "True"), sample("gauge-c", "False"), sample("gauge-c", "Unknown")) == (1, 0, 0)


async def test_a_status_write_is_not_kept_once_the_webserver_informer_has_it() -> None:
    """The reconciler keeps its last status write only until the cache has caught up (memory: one object per WebServer).

    Wired as the operator wires it (``setup_webserver_controller`` on an informer cache): the reconcile writes the
    status while the cache still holds the version before it; the watch then delivers the written version, and no copy
    is left, although no reconcile runs for the WebServer again (a converged one, after its Ready write).
    """
    api = FakeApi()
    cache = InformerCache(api, WatchSettings())
    controller = setup_webserver_controller(cache, api=api, settings=ControllerSettings())
    reconciler = controller.reconciler
    assert isinstance(reconciler, WebServerReconciler)
    webservers = cache.group(WEBSERVERS).informers[0]
    stored = api.put(WEBSERVERS.path(namespace="ns"), factories.webserver("kept", namespace="ns"))
    webservers.store.upsert(stored)  # what the informer does with a watch event: the store, then the handlers
    webservers.on_event("ADDED", stored, None)

    await reconciler.reconcile(("ns", "kept"))
    written = api.get(WEBSERVERS.path(namespace="ns", name="kept"))
    assert written is not None and written.get("status"), "the reconcile wrote the status"
    assert reconciler.remembered_status_writes() == 1, "kept while the cache shows the version the write replaced"

    webservers.store.upsert(written)
    webservers.on_event("MODIFIED", written, stored)
    assert reconciler.remembered_status_writes() == 0


def _ready_series_of(namespace: str, name: str) -> list[float | None]:
    return [
        metrics.REGISTRY.get_sample_value(
            "webserver_operator_webserver_ready_status", {"namespace": namespace, "name": name, "condition": c}
        )
        for c in ("True", "False", "Unknown")
    ]


async def test_a_shard_handed_over_leaves_no_per_key_state_behind() -> None:
    """A WebServer of a shard another replica takes over is forgotten here as a deleted one would be.

    Wired as a sharded replica wires it (``setup_webserver_controller`` on a ``ShardedInformerCache``, the pacer on).
    One sync fills every per-WebServer store: the Ready gauge's series (from the first event), a foreign
    PodDisruptionBudget of its name (a problem: the streak, the namesake memory), its Service created (own writes, a
    recent create, an Event), its Deployment repaired (a drift repair) and moved to the current template revision by
    the pacer (the revision gauge, the pacer's rolling set), its pods found unready long after the last progress (a
    probe look) and its status written. ``remembered_keys`` names the WebServer from its first event on, and handing its
    shard over leaves nothing: no memory, no series, and ``keys_with_problems`` no longer names it, so a freed nodePort
    wakes only WebServers held here.
    """
    shards = 2
    namespace = next(ns for ns in (f"team-{i}" for i in range(100)) if shard_index(ns, shards) == 1)
    key = (namespace, "handed")
    api = FakeApi()
    api.put(NAMESPACES.path(), {"kind": "Namespace", "metadata": {"name": namespace}})
    stored = api.put(
        WEBSERVERS.path(namespace=namespace),
        factories.webserver("handed", namespace=namespace, replicas=2, status={"observedGeneration": 1}),
    )
    old = desired_deployment(WebServer.model_validate(stored), revision=1)  # a template revision behind
    old["spec"]["replicas"] = 5  # drifted: someone scaled the Deployment
    progressed_long_ago = {"type": "Progressing", "status": "True", "lastUpdateTime": "2026-01-01T00:00:00Z"}
    unready = factories.deployment(
        observed=9, replicas=2, updated=2, available=0, ready=0, conditions=[progressed_long_ago], omit_zero=False
    )
    old["status"] = unready["status"]  # its pods never got ready: the probe Events are read
    api.put(DEPLOYMENTS.path(namespace=namespace), old)
    api.put(
        PODDISRUPTIONBUDGETS.path(namespace=namespace),
        {"kind": "PodDisruptionBudget", "metadata": {"name": "handed", "namespace": namespace}},
    )
    cache = ShardedInformerCache(api, WatchSettings(namespaces=[namespace]), shards=shards)
    settings = ControllerSettings(template_upgrade_rate=60)
    controller = setup_webserver_controller(cache, api=api, settings=settings)
    reconciler = controller.reconciler
    assert isinstance(reconciler, WebServerReconciler)
    try:
        cache.start(0)
        cache.start(1)
        await asyncio.wait_for(asyncio.gather(cache.synced(0), cache.synced(1)), 5)
        assert _ready_series_of(*key) == [0, 0, 1], "the Ready gauge publishes the listed WebServer"
        assert reconciler.remembered_keys() == {key}, "the Ready gauge's series are per-WebServer state too"

        await reconciler.reconcile(key)
        assert api.get(SERVICES.path(namespace=namespace, name="handed")) is not None, "the Service was created"
        deployment = api.get(DEPLOYMENTS.path(namespace=namespace, name="handed"))
        assert deployment is not None and deployment["spec"]["replicas"] == 2, "the drift was repaired"
        assert template_revision_of(deployment) == TEMPLATE_REVISION, "the pacer moved it"
        probe_reads = [c for c in api.calls if c.method == "GET" and c.path.endswith("/events")]
        assert probe_reads, "the unready pods' probe Events were read"
        written = api.get(WEBSERVERS.path(namespace=namespace, name="handed"))
        assert written is not None and written.get("status"), "the status was written"
        assert reconciler.keys_with_problems() == [key], "the foreign budget is a problem"
        assert reconciler.remembered_keys() == {key}

        await cache.stop(1)

        assert cache.group(WEBSERVERS).get(key) is None, "the shard's objects left the cache"
        assert reconciler.keys_with_problems() == []
        assert reconciler.remembered_keys() == set(), "no per-key memory is left for a WebServer held elsewhere"
        assert _ready_series_of(*key) == [None, None, None], "its Ready series are the new holder's to publish"
    finally:
        await cache.close()
