"""Informer against a scripted fake API: list pagination, watch resume points, 410 relist, errors, stall watchdog."""

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.fake_api import STALL, FakeApi
from webserver_operator import metrics
from webserver_operator.core.backoff import Backoff, BackoffPolicy
from webserver_operator.core.resources import Resource
from webserver_operator.kube.errors import Forbidden, Gone, NotFound, ServerError, TransportError
from webserver_operator.runtime.informers.informer import CacheShape, Informer

pytestmark = pytest.mark.timeout(5)

WEBSERVERS = Resource("example.com", "v1", "webservers", "WebServer")
PATH = "/apis/example.com/v1/namespaces/default/webservers"


def obj(name: str, rv: str, *, namespace: str = "default", owner_uid: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": rv, "uid": f"uid-{name}"}
    if owner_uid:
        meta["ownerReferences"] = [{"kind": "WebServer", "name": "o", "uid": owner_uid, "controller": True}]
    return {"metadata": meta, "spec": {}}


def page(items: list[dict[str, Any]], rv: str, cont: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {"kind": "WebServerList", "apiVersion": "example.com/v1", "metadata": meta, "items": items}


def event(kind: str, o: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": o}


def bookmark(rv: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"kind": "WebServer", "metadata": {"resourceVersion": rv}}}


def error_event(code: int, reason: str) -> dict[str, Any]:
    return {"type": "ERROR", "object": {"kind": "Status", "status": "Failure", "code": code, "reason": reason}}


def gone(path: str = PATH) -> Gone:
    return Gone(status=410, reason="Expired", message="too old resource version", method="GET", path=path)


def transport() -> TransportError:
    return TransportError(method="GET", path=PATH, cause="connection reset")


def FakeKube(*, lists: list[Any], watches: list[Any]) -> FakeApi:  # noqa: N802 - reads like the class it makes
    """Scripted API: ``lists`` are list responses (or exceptions); ``watches`` are scripts, one per watch call.

    A watch script is an exception (raised when opening) or a list of events / exceptions (raised mid-stream) /
    floats (pause that long) / ``STALL``; the stream then ends normally. When a queue runs dry the call blocks
    and ``idle`` is set.
    """
    api = FakeApi(lists=lists)
    api.watches.extend(watches)
    return api


def fast_backoff() -> Backoff:
    return Backoff(BackoffPolicy(base=0.001, cap=0.005))


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None]] = []

    def __call__(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        old_rv = old["metadata"]["resourceVersion"] if old else None
        self.events.append((kind, f"{new['metadata']['name']}@{new['metadata']['resourceVersion']}", old_rv))


def make_informer(kube: FakeApi, **kwargs: Any) -> Informer:
    options: dict[str, Any] = {
        "namespace": "default",
        "backoff": fast_backoff(),
        "forbidden_backoff": fast_backoff(),
        "rng": lambda: 1.0,
    }
    options.update(kwargs)
    return Informer(kube, WEBSERVERS, **options)


async def run_until_idle(informer: Informer, kube: FakeApi) -> None:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(kube.idle.wait(), 3)
        await asyncio.sleep(0)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def store_state(informer: Informer) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list()}


def counter(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_paginated_list_fills_store_then_watches_from_list_rv() -> None:
    kube = FakeKube(
        lists=[page([obj("a", "1"), obj("b", "2")], "10", cont="tok"), page([obj("c", "3")], "10")],
        watches=[[event("ADDED", obj("d", "11"))]],
    )
    rec = Recorder()
    informer = make_informer(kube, on_event=rec, label_selector="app=web", watch_timeout_seconds=120)
    await run_until_idle(informer, kube)

    assert informer.synced.is_set()
    assert store_state(informer) == {"a": "1", "b": "2", "c": "3", "d": "11"}
    assert kube.list_queries == [
        {"limit": "500", "labelSelector": "app=web"},
        {"limit": "500", "labelSelector": "app=web", "continue": "tok"},
    ]
    first_watch = kube.watch_queries[0]
    assert first_watch["resourceVersion"] == "10"
    assert first_watch["allowWatchBookmarks"] == "true"
    assert first_watch["labelSelector"] == "app=web"
    assert first_watch["timeoutSeconds"] == "120"
    assert kube.watch_queries[1]["resourceVersion"] == "11"
    assert rec.events == [
        ("ADDED", "a@1", None),
        ("ADDED", "b@2", None),
        ("ADDED", "c@3", None),
        ("ADDED", "d@11", None),
    ]
    listed = informer.store.get(("default", "a"))
    assert listed is not None
    assert (listed["kind"], listed["apiVersion"]) == ("WebServer", "example.com/v1")


async def test_normal_watch_end_rewatches_from_last_bookmark_without_relist() -> None:
    kube = FakeKube(
        lists=[page([obj("a", "1")], "5")],
        watches=[
            [event("MODIFIED", obj("a", "6")), bookmark("9")],
            [bookmark("12")],
        ],
    )
    rec = Recorder()
    informer = make_informer(kube, on_event=rec)
    await run_until_idle(informer, kube)

    assert len(kube.list_queries) == 1, "a normal end of a watch must not relist"
    assert [q["resourceVersion"] for q in kube.watch_queries] == ["5", "9", "12"]
    assert store_state(informer) == {"a": "6"}
    assert rec.events == [("ADDED", "a@1", None), ("MODIFIED", "a@6", "1")]
    assert informer.resource_version == "12"


async def test_410_error_event_relists_fresh_and_diffs_the_store() -> None:
    kube = FakeKube(
        lists=[
            page([obj("a", "1"), obj("b", "2"), obj("c", "3")], "5"),
            page([obj("a", "1"), obj("b", "7"), obj("e", "8")], "20"),
        ],
        watches=[[bookmark("6"), error_event(410, "Expired")]],
    )
    rec = Recorder()
    informer = make_informer(kube, on_event=rec)
    relists_before = counter("webserver_operator_watch_relists_total", {"resource": "webservers"})
    await run_until_idle(informer, kube)

    assert len(kube.list_queries) == 2
    assert "resourceVersion" not in kube.list_queries[1], "a relist is a fresh (consistent) list"
    assert [q["resourceVersion"] for q in kube.watch_queries] == ["5", "20"]
    assert store_state(informer) == {"a": "1", "b": "7", "e": "8"}
    assert rec.events[3:] == [("DELETED", "c@3", None), ("MODIFIED", "b@7", "2"), ("ADDED", "e@8", None)]
    assert counter("webserver_operator_watch_relists_total", {"resource": "webservers"}) - relists_before == 2


async def test_410_when_opening_the_watch_relists() -> None:
    kube = FakeKube(lists=[page([obj("a", "1")], "5"), page([], "30")], watches=[gone()])
    rec = Recorder()
    informer = make_informer(kube, on_event=rec)
    await run_until_idle(informer, kube)

    assert len(kube.list_queries) == 2
    assert [q["resourceVersion"] for q in kube.watch_queries] == ["5", "30"]
    assert store_state(informer) == {}
    assert rec.events[-1] == ("DELETED", "a@1", None)


async def test_transport_error_rewatches_from_last_rv_with_backoff() -> None:
    kube = FakeKube(
        lists=[page([obj("a", "1")], "5")],
        watches=[
            [event("MODIFIED", obj("a", "6")), transport()],
            transport(),
            ServerError(status=503, reason="ServiceUnavailable", message="x", method="GET", path=PATH),
            [event("DELETED", obj("a", "9"))],
        ],
    )
    rec = Recorder()
    informer = make_informer(kube, on_event=rec)
    await run_until_idle(informer, kube)

    assert len(kube.list_queries) == 1, "transient errors resume the watch, they do not relist"
    assert [q["resourceVersion"] for q in kube.watch_queries] == ["5", "6", "6", "6", "9"]
    assert store_state(informer) == {}
    assert rec.events[-1] == ("DELETED", "a@9", "6")
    assert informer.consecutive_failures == 0


async def test_consecutive_failures_are_counted_while_the_watch_keeps_failing() -> None:
    kube = FakeKube(lists=[page([], "5")], watches=[transport(), transport(), transport()])
    informer = make_informer(kube)
    await run_until_idle(informer, kube)
    assert informer.consecutive_failures == 3
    assert informer.synced.is_set()


async def test_stalled_watch_is_restarted_from_the_same_rv() -> None:
    kube = FakeKube(lists=[page([obj("a", "1")], "5")], watches=[[bookmark("7"), STALL], [bookmark("8")]])
    informer = make_informer(kube, stall_timeout=0.05)
    stalls_before = counter("webserver_operator_watch_restarts_total", {"resource": "webservers", "reason": "stalled"})
    await run_until_idle(informer, kube)

    assert [q["resourceVersion"] for q in kube.watch_queries] == ["5", "7", "8"]
    assert len(kube.list_queries) == 1
    stalls = counter("webserver_operator_watch_restarts_total", {"resource": "webservers", "reason": "stalled"})
    assert stalls - stalls_before == 1


async def test_a_watch_that_goes_quiet_after_a_steady_stretch_is_caught() -> None:
    """The stall timer is set again while events come (not on every event): it must still fire once they stop, after
    a steady stretch longer than the stall timeout itself."""
    script: list[Any] = []
    for rv in range(6, 16):
        script += [0.03, bookmark(str(rv))]  # 0.3 s of events against a stall timeout of 0.12 s
    kube = FakeKube(lists=[page([], "5")], watches=[[*script, STALL], [bookmark("16")]])
    informer = make_informer(kube, stall_timeout=0.12)
    stalls_before = counter("webserver_operator_watch_restarts_total", {"resource": "webservers", "reason": "stalled"})
    await run_until_idle(informer, kube)
    assert [q["resourceVersion"] for q in kube.watch_queries] == ["5", "15", "16"]
    stalls = counter("webserver_operator_watch_restarts_total", {"resource": "webservers", "reason": "stalled"})
    assert stalls - stalls_before == 1


async def test_slow_but_steady_watch_is_not_mistaken_for_a_stall() -> None:
    script: list[Any] = []
    for rv in range(6, 21):
        # 0.45 s in all against a stall timeout of 0.25 s, never more than 0.03 s without an event: a gap eight times
        # that (a loaded machine pausing the loop) is still no stall.
        script += [0.03, bookmark(str(rv))]
    kube = FakeKube(lists=[page([], "5")], watches=[script])
    informer = make_informer(kube, stall_timeout=0.25)
    stalls_before = counter("webserver_operator_watch_restarts_total", {"resource": "webservers", "reason": "stalled"})
    await run_until_idle(informer, kube)
    assert [q["resourceVersion"] for q in kube.watch_queries] == ["5", "20"]
    stalls = counter("webserver_operator_watch_restarts_total", {"resource": "webservers", "reason": "stalled"})
    assert stalls == stalls_before


async def test_expired_continue_token_restarts_the_list_from_scratch() -> None:
    kube = FakeKube(
        lists=[
            page([obj("a", "1")], "5", cont="old"),
            gone(),
            page([obj("b", "2")], "9", cont="new"),
            page([obj("c", "3")], "9"),
        ],
        watches=[],
    )
    rec = Recorder()
    # A backoff long enough to notice: an expired continue token is not a failure, the list restarts at once.
    informer = make_informer(kube, on_event=rec, backoff=Backoff(BackoffPolicy(base=10.0, cap=10.0)))
    await run_until_idle(informer, kube)

    assert [q.get("continue") for q in kube.list_queries] == [None, "old", None, "new"]
    assert store_state(informer) == {"b": "2", "c": "3"}, "a half list must never reach the store"
    assert rec.events == [("ADDED", "b@2", None), ("ADDED", "c@3", None)]
    assert kube.watch_queries[0]["resourceVersion"] == "9"


async def test_forbidden_list_keeps_unsynced_logs_rbac_hint_and_retries(caplog: pytest.LogCaptureFixture) -> None:
    denied = Forbidden(
        status=403, reason="Forbidden", message="webservers is forbidden: cannot list", method="GET", path=PATH
    )
    kube = FakeKube(lists=[denied, denied], watches=[])
    informer = make_informer(kube)
    with caplog.at_level(logging.ERROR, logger="webserver_operator.controller.informer"):
        await run_until_idle(informer, kube)
    assert not informer.synced.is_set()
    assert len(kube.list_queries) == 3, "the informer keeps retrying"
    assert informer.consecutive_failures == 2
    assert "forbidden" in caplog.text
    assert "ServiceAccount needs get/list/watch on webservers" in caplog.text


async def test_missing_crd_then_installed_syncs(caplog: pytest.LogCaptureFixture) -> None:
    missing = NotFound(status=404, reason="NotFound", message="the server could not find", method="GET", path=PATH)
    kube = FakeKube(lists=[missing, page([obj("a", "1")], "3")], watches=[])
    informer = make_informer(kube)
    with caplog.at_level(logging.ERROR, logger="webserver_operator.controller.informer"):
        await run_until_idle(informer, kube)
    assert informer.synced.is_set()
    assert store_state(informer) == {"a": "1"}
    assert "CustomResourceDefinition" in caplog.text


async def test_not_found_on_watch_relists() -> None:
    missing = NotFound(status=404, reason="NotFound", message="gone", method="GET", path=PATH)
    kube = FakeKube(lists=[page([obj("a", "1")], "3"), page([], "4")], watches=[missing])
    informer = make_informer(kube)
    await run_until_idle(informer, kube)
    assert len(kube.list_queries) == 2
    assert store_state(informer) == {}


async def test_non_410_error_event_resumes_from_last_rv() -> None:
    kube = FakeKube(lists=[page([], "3")], watches=[[bookmark("4"), error_event(500, "InternalError")]])
    informer = make_informer(kube)
    await run_until_idle(informer, kube)
    assert len(kube.list_queries) == 1
    assert [q["resourceVersion"] for q in kube.watch_queries] == ["3", "4"]


async def test_handler_exception_does_not_break_the_informer() -> None:
    def explode(kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        raise RuntimeError("handler bug")

    kube = FakeKube(lists=[page([obj("a", "1")], "3")], watches=[[event("ADDED", obj("b", "4"))]])
    informer = make_informer(kube, on_event=explode)
    await run_until_idle(informer, kube)
    assert store_state(informer) == {"a": "1", "b": "4"}
    assert kube.watch_queries[-1]["resourceVersion"] == "4"


@pytest.mark.parametrize(
    ("base", "rng", "expected"),
    [
        (300, lambda: 0.0, 150),
        (300, lambda: 1.0, 300),
        (300, lambda: 0.5, 225),
        (80, lambda: 0.0, 60),
        (10, lambda: 0.0, 10),
    ],
)
def test_watch_timeout_is_jittered_between_half_and_full_with_a_floor(
    base: int, rng: Callable[[], float], expected: int
) -> None:
    kube = FakeKube(lists=[], watches=[])
    informer = Informer(kube, WEBSERVERS, watch_timeout_seconds=base, rng=rng)
    assert informer._watch_timeout() == expected


@pytest.mark.parametrize(("rng", "expected"), [(lambda: 0.0, 90.0), (lambda: 0.5, 105.0), (lambda: 1.0, 120.0)])
def test_default_stall_timeout_is_drawn_per_watch_from_90_to_120_seconds(
    rng: Callable[[], float], expected: float
) -> None:
    """Bookmarks arrive about every 60 s on a quiet watch: a silent half-open watch is noticed within two of them,
    whatever the watch timeout, and informers that stalled together do not reconnect in lock step."""
    informer = Informer(FakeKube(lists=[], watches=[]), WEBSERVERS, watch_timeout_seconds=300, rng=rng)
    assert informer._stall_timeout() == expected
    assert Informer(FakeKube(lists=[], watches=[]), WEBSERVERS, stall_timeout=4.0, rng=rng)._stall_timeout() == 4.0


async def test_a_stalled_watch_is_reopened_with_backoff_not_in_a_loop() -> None:
    """A watch that stalls again and again (or a tiny stall timeout) must not be reopened at once every time: the
    re-watch waits for the reconnect backoff, as after a failure."""
    kube = FakeKube(lists=[page([], "5")], watches=[[STALL]] * 6)
    informer = make_informer(kube, stall_timeout=0.01, backoff=Backoff(BackoffPolicy(base=0.1, cap=1.0)))
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.sleep(0.35)
        opened = len(kube.watch_queries)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert opened <= 3, f"{opened} watches opened in 0.35 s (stall 0.01 s, backoff 0.1 s doubling)"
    assert [q["resourceVersion"] for q in kube.watch_queries] == ["5"] * opened


async def test_last_activity_advances_with_events() -> None:
    now = [100.0]
    kube = FakeKube(lists=[page([], "1")], watches=[[bookmark("2")]])
    informer = make_informer(kube, clock=lambda: now[0])
    now[0] = 200.0
    await run_until_idle(informer, kube)
    assert informer.last_activity == 200.0
    assert informer.seconds_since_activity() == 0.0


def _heavy(name: str, rv: str) -> dict[str, Any]:
    o = obj(name, rv)
    o["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    o["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}' * 100,
        "team": "blue",
    }
    return o


async def test_fields_nobody_reads_are_stripped_on_the_way_into_the_cache() -> None:
    """managedFields and kubectl's last-applied copy can be most of an object's size; the cache keeps neither."""
    kube = FakeKube(lists=[page([_heavy("a", "1")], "10")], watches=[[event("ADDED", _heavy("b", "11"))]])
    informer = make_informer(kube)
    await run_until_idle(informer, kube)
    for name in ("a", "b"):
        cached = informer.store.get(("default", name))
        assert cached is not None
        assert "managedFields" not in cached["metadata"]
        assert cached["metadata"]["annotations"] == {"team": "blue"}


def test_routine_watch_restarts_are_exported_at_zero_before_the_first_one() -> None:
    """A series born at 1 hides the first restart from rate(): the dashboard's watch panel would stay flat."""
    Informer(FakeKube(lists=[], watches=[]), WEBSERVERS, name="restarts-at-zero")
    for reason in ("timeout", "closed", "stalled"):
        labels = {"resource": "restarts-at-zero", "reason": reason}
        assert metrics.REGISTRY.get_sample_value("webserver_operator_watch_restarts_total", labels) == 0, reason


async def test_a_transform_shapes_every_listed_and_watched_object_before_the_store_and_the_handlers() -> None:
    """A transform (controller-runtime's ``cache.TransformFunc``) runs after the default stripping, on every path."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def keep_name_only(o: dict[str, Any]) -> dict[str, Any]:
        o["metadata"] = {k: v for k, v in o["metadata"].items() if k in ("name", "namespace", "resourceVersion")}
        return o

    kube = FakeKube(
        lists=[page([_heavy("a", "1"), _heavy("gone", "2")], "10")],
        watches=[[event("ADDED", _heavy("b", "11")), event("DELETED", _heavy("gone", "12"))]],
    )
    shape = CacheShape(transform=keep_name_only)
    informer = make_informer(kube, shape=shape, on_event=lambda t, o, _old: seen.append((t, o)))
    await run_until_idle(informer, kube)
    assert sorted(o["metadata"]["name"] for o in informer.store.list()) == ["a", "b"]
    for _type, o in seen:
        assert set(o["metadata"]) == {"name", "namespace", "resourceVersion"}, o
    assert [t for t, _o in seen] == ["ADDED", "ADDED", "ADDED", "DELETED"]
