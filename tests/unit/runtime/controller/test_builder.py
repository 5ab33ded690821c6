"""The controller declaration: For, Owns and Watches turn informer events into the right work-queue keys."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.fake_api import FakeApi
from webserver_operator.api.models import WEBSERVERS
from webserver_operator.core.resources import DEPLOYMENTS, SERVICES
from webserver_operator.core.settings import ControllerSettings, WatchSettings
from webserver_operator.runtime.controller.builder import ControllerBuilder
from webserver_operator.runtime.controller.enqueue import keys_on_delete
from webserver_operator.runtime.controller.loop import Controller
from webserver_operator.runtime.controller.result import Result
from webserver_operator.runtime.informers.cache import InformerCache
from webserver_operator.runtime.informers.informer import CacheShape

SELECTOR = "app.kubernetes.io/managed-by=webserver-operator"


class _Recorder:
    def __init__(self) -> None:
        self.keys: list[tuple[str, str]] = []

    async def reconcile(self, key: tuple[str, str]) -> Result:
        self.keys.append(key)
        return Result()


def _obj(name: str, *, owner: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": "ns", "name": name, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": WEBSERVERS.api_version,
                "kind": WEBSERVERS.kind,
                "name": owner,
                "uid": "u",
                "controller": True,
            }
        ]
    return {"metadata": meta}


def _webservers_owning_deployments(name: str, *, workers: int) -> tuple[InformerCache, ControllerBuilder]:
    cache = InformerCache(FakeApi(), WatchSettings())
    builder = ControllerBuilder(name, cache, ControllerSettings(workers=workers)).for_(WEBSERVERS)
    return cache, builder.owns(DEPLOYMENTS, label_selector=SELECTOR)


async def _reconciled(controller: Controller, reconciler: _Recorder, count: int) -> list[tuple[str, str]]:
    """Let the running controller reconcile ``count`` keys (1 s at most), stop it and return them in order."""
    for _ in range(100):
        if len(reconciler.keys) == count:
            break
        await asyncio.sleep(0.01)
    await controller.stop(1.0)
    return reconciler.keys


async def test_for_owns_and_watches_feed_the_queue() -> None:
    cache, builder = _webservers_owning_deployments("builder-test", workers=2)
    reconciler = _Recorder()
    controller = (
        builder.owns(SERVICES, label_selector=SELECTOR, orphans=lambda obj: obj["metadata"]["labels"].get("instance"))
        .watches(SERVICES, keys_on_delete(lambda: [("ns", "waiting")]), label_selector=SELECTOR)
        .complete(reconciler)
    )
    assert controller.workers == 2
    task = asyncio.create_task(controller.run())
    await asyncio.sleep(0)
    assert controller.primary is cache.group(WEBSERVERS)
    deployments = cache.group(DEPLOYMENTS, label_selector=SELECTOR).informers[0]
    services = cache.group(SERVICES, label_selector=SELECTOR).informers[0]
    cache.group(WEBSERVERS).informers[0].on_event("ADDED", _obj("primary"), None)
    deployments.on_event("MODIFIED", _obj("d", owner="owner"), None)
    services.on_event("ADDED", _obj("s", labels={"instance": "adopt-me"}), None)  # an orphan, by the rule given
    services.on_event("DELETED", _obj("s", owner="owner"), None)
    keys = await _reconciled(controller, reconciler, 4)
    await task
    assert sorted(keys) == [("ns", "adopt-me"), ("ns", "owner"), ("ns", "primary"), ("ns", "waiting")]
    assert sorted(cache.groups) == ["deployments", "services", "webservers"], "one shared informer per resource"


async def test_added_events_wait_behind_changes_to_existing_objects() -> None:
    """A new WebServer (or our own create seen by a child informer) waits; a Deployment's status change does not."""
    cache, builder = _webservers_owning_deployments("builder-priority", workers=1)
    reconciler = _Recorder()
    controller = builder.complete(reconciler)
    task = asyncio.create_task(controller.run())
    await asyncio.sleep(0)
    webservers = cache.group(WEBSERVERS).informers[0]
    deployments = cache.group(DEPLOYMENTS, label_selector=SELECTOR).informers[0]
    for name in ("new-1", "new-2", "new-3"):
        webservers.on_event("ADDED", _obj(name), None)
    deployments.on_event("ADDED", _obj("d", owner="created"), None)
    deployments.on_event("MODIFIED", _obj("d", owner="available"), None)
    webservers.on_event("MODIFIED", _obj("edited"), None)
    keys = await _reconciled(controller, reconciler, 6)
    await task
    # All arrived before the single worker took one: changes first, then ADDED, each in arrival order.
    assert [name for _, name in keys] == ["available", "edited", "new-1", "new-2", "new-3", "created"]


async def test_a_change_owns_calls_urgent_goes_ahead_of_the_other_changes() -> None:
    """During a bulk create the normal lane is full of echoes and rollout progress; availability skips past them."""
    cache = InformerCache(FakeApi(), WatchSettings())
    reconciler = _Recorder()

    def became_available(obj: dict[str, Any], old: dict[str, Any]) -> bool:
        return bool(obj.get("available")) and not old.get("available")

    controller = (
        ControllerBuilder("builder-urgent", cache, ControllerSettings(workers=1))
        .for_(WEBSERVERS)
        .owns(DEPLOYMENTS, label_selector=SELECTOR, urgent=became_available)
        .complete(reconciler)
    )
    task = asyncio.create_task(controller.run())
    await asyncio.sleep(0)
    webservers = cache.group(WEBSERVERS).informers[0]
    deployments = cache.group(DEPLOYMENTS, label_selector=SELECTOR).informers[0]
    webservers.on_event("ADDED", _obj("new"), None)
    webservers.on_event("MODIFIED", _obj("echo"), _obj("echo"))
    deployments.on_event("MODIFIED", _obj("d1", owner="progress"), _obj("d1", owner="progress"))
    available = {**_obj("d2", owner="available"), "available": True}
    deployments.on_event("MODIFIED", available, _obj("d2", owner="available"))
    deployments.on_event("DELETED", available, None)  # only MODIFIED events are asked: a deletion stays normal
    keys = await _reconciled(controller, reconciler, 4)
    await task
    assert [name for _, name in keys] == ["available", "echo", "progress", "new"]


async def test_a_change_owns_defers_waits_its_delay_and_any_other_event_for_the_key_runs_it_at_once() -> None:
    """Rollout progress waits; several steps of one rollout make one reconcile, and none when the key ran meanwhile."""
    cache = InformerCache(FakeApi(), WatchSettings())
    reconciler = _Recorder()

    def became_available(obj: dict[str, Any], old: dict[str, Any]) -> bool:
        return bool(obj.get("available")) and not old.get("available")

    def progress(obj: dict[str, Any], old: dict[str, Any]) -> float | None:
        return 0.2 if obj.get("step") != old.get("step") else None

    controller = (
        ControllerBuilder("builder-defer", cache, ControllerSettings(workers=1))
        .for_(WEBSERVERS)
        .owns(DEPLOYMENTS, label_selector=SELECTOR, urgent=became_available, defer=progress)
        .complete(reconciler)
    )
    task = asyncio.create_task(controller.run())
    await asyncio.sleep(0)
    deployments = cache.group(DEPLOYMENTS, label_selector=SELECTOR).informers[0]

    def step(name: str, number: int, *, available: bool = False) -> dict[str, Any]:
        return {**_obj(name, owner=name), "step": number, "available": available}

    for number in (1, 2, 3):  # three steps of one rollout
        deployments.on_event("MODIFIED", step("slow", number), step("slow", number - 1))
    deployments.on_event("MODIFIED", step("quick", 1), step("quick", 0))
    deployments.on_event("MODIFIED", step("quick", 2, available=True), step("quick", 1))  # available: at once
    deployments.on_event("MODIFIED", {**_obj("drift", owner="drift"), "spec": 1}, _obj("drift", owner="drift"))
    await asyncio.sleep(0.05)
    assert reconciler.keys == [("ns", "quick"), ("ns", "drift")], "nothing deferred has run before its delay"
    await asyncio.sleep(0.4)
    keys = await _reconciled(controller, reconciler, 3)
    await task
    assert keys == [("ns", "quick"), ("ns", "drift"), ("ns", "slow")], "three steps, one reconcile; quick's delay void"


def test_owns_needs_for_first() -> None:
    builder = ControllerBuilder("builder-order", InformerCache(FakeApi(), WatchSettings()), ControllerSettings())
    with pytest.raises(ValueError, match="for_"):
        builder.owns(DEPLOYMENTS)


async def test_events_a_filter_rejects_never_reach_the_queue() -> None:
    cache = InformerCache(FakeApi(), WatchSettings())
    reconciler = _Recorder()
    controller = (
        ControllerBuilder("builder-filter", cache, ControllerSettings(workers=1))
        .for_(WEBSERVERS, when=lambda _type, obj, _old: not obj["metadata"]["name"].startswith("echo"))
        .owns(DEPLOYMENTS, label_selector=SELECTOR, when=lambda event_type, _obj, _old: event_type == "DELETED")
        .complete(reconciler)
    )
    task = asyncio.create_task(controller.run())
    await asyncio.sleep(0)
    webservers = cache.group(WEBSERVERS).informers[0]
    deployments = cache.group(DEPLOYMENTS, label_selector=SELECTOR).informers[0]
    webservers.on_event("MODIFIED", _obj("echo-of-a-write"), None)
    webservers.on_event("MODIFIED", _obj("edited"), None)
    deployments.on_event("MODIFIED", _obj("d", owner="unchanged"), None)
    deployments.on_event("DELETED", _obj("d", owner="deleted"), None)
    keys = await _reconciled(controller, reconciler, 2)
    await task
    assert sorted(keys) == [("ns", "deleted"), ("ns", "edited")]


def test_for_and_owns_give_their_transform_and_page_size_to_the_shared_views() -> None:
    cache = InformerCache(FakeApi(), WatchSettings())

    def slim(o: dict[str, Any]) -> dict[str, Any]:
        return o

    (
        ControllerBuilder("shaped", cache, ControllerSettings())
        .for_(WEBSERVERS, shape=CacheShape(transform=slim, page_size=50))
        .owns(DEPLOYMENTS, label_selector=SELECTOR, shape=CacheShape(transform=slim))
        .complete(_Recorder())
    )
    (webservers,) = cache.group(WEBSERVERS).informers
    (deployments,) = cache.group(DEPLOYMENTS, label_selector=SELECTOR).informers
    assert (webservers.shape.transform, webservers.page_size) == (slim, 50)
    assert (deployments.shape.transform, deployments.page_size) == (slim, 500)
    with pytest.raises(ValueError, match="different transform"):
        cache.group(WEBSERVERS, shape=CacheShape(transform=lambda o: o))
