"""The bookkeeping declared next to the reconciler: the per-WebServer readiness gauge (as cert-manager's) and the
memory of the last status writes."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support import factories
from tests.support.fake_api import FakeApi
from webserver_operator import metrics
from webserver_operator.api.models import WEBSERVERS
from webserver_operator.core.resources import DEPLOYMENTS, SERVICES
from webserver_operator.core.settings import ControllerSettings, WatchSettings
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


async def test_a_shard_handed_over_leaves_no_per_key_state_behind() -> None:
    """A WebServer of a shard another replica takes over is forgotten here as a deleted one would be.

    Wired as a sharded replica wires it (``setup_webserver_controller`` on a ``ShardedInformerCache``): the WebServer
    meets a foreign Deployment of its name (a problem: the streak, the namesake memory), gets its Service created
    (own writes, a recent create) and its status written. Handing its shard over leaves no memory of it in the
    reconciler, and ``keys_with_problems`` no longer names it, so a freed nodePort wakes only WebServers held here.
    """
    shards = 2
    namespace = next(ns for ns in (f"team-{i}" for i in range(100)) if shard_index(ns, shards) == 1)
    key = (namespace, "handed")
    api = FakeApi()
    api.put(
        DEPLOYMENTS.path(namespace=namespace),
        {"kind": "Deployment", "metadata": {"name": "handed", "namespace": namespace, "labels": {"app": "theirs"}}},
    )
    api.put(WEBSERVERS.path(namespace=namespace), factories.webserver("handed", namespace=namespace))
    cache = ShardedInformerCache(api, WatchSettings(namespaces=[namespace]), shards=shards)
    controller = setup_webserver_controller(cache, api=api, settings=ControllerSettings())
    reconciler = controller.reconciler
    assert isinstance(reconciler, WebServerReconciler)
    try:
        cache.start(0)
        cache.start(1)
        await asyncio.wait_for(asyncio.gather(cache.synced(0), cache.synced(1)), 5)
        await reconciler.reconcile(key)
        assert api.get(SERVICES.path(namespace=namespace, name="handed")) is not None, "the Service was created"
        assert reconciler.keys_with_problems() == [key], "the foreign Deployment is a problem"
        assert reconciler.remembered_keys() == {key}

        await cache.stop(1)

        assert cache.group(WEBSERVERS).get(key) is None, "the shard's objects left the cache"
        assert reconciler.keys_with_problems() == []
        assert reconciler.remembered_keys() == set(), "no per-key memory is left for a WebServer held elsewhere"
    finally:
        await cache.close()
