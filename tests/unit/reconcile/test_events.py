"""EventRecorder: Events leave in the background (a reconcile never waits for one), bounded in flight and in queue."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support import factories
from tests.support.fake_api import FakeApi, status_error
from webserver_operator import metrics
from webserver_operator.core.resources import EVENTS
from webserver_operator.reconcile.events import EventRecorder

pytestmark = pytest.mark.timeout(5)

NS = "team-a"


def webserver(name: str) -> dict[str, Any]:
    """The involved object as the reconciler hands it on: metadata is what an Event refers to."""
    return factories.webserver(name, namespace=NS, uid=f"uid-{name}", resource_version="7", spec=None)


def stored_events(api: FakeApi) -> list[tuple[str, str, str]]:
    """What `kubectl get events -n team-a` lists: involved object, reason, message."""
    return sorted(
        (e["involvedObject"]["name"], e["reason"], e["message"])
        for e in api.collections.get(EVENTS.path(namespace=NS), {}).values()
    )


async def test_emit_returns_before_the_event_is_written_and_flush_waits_for_it() -> None:
    api = FakeApi()
    gate = api.gates[EVENTS.path(namespace=NS)] = asyncio.Event()
    recorder = EventRecorder(api, instance="test")
    await asyncio.wait_for(
        recorder.emit(webserver("web"), type_="Normal", reason="Created", message="Created Deployment web"), 0.5
    )
    assert stored_events(api) == [], "the POST is still held by the API server: emit did not wait for it"
    gate.set()
    await recorder.flush()
    assert stored_events(api) == [("web", "Created", "Created Deployment web")]


async def test_a_burst_is_sent_two_at_a_time_and_every_event_arrives_once() -> None:
    api = FakeApi()
    gate = api.gates[EVENTS.path(namespace=NS)] = asyncio.Event()
    recorder = EventRecorder(api, instance="test")
    for i in range(10):
        await recorder.emit(webserver(f"web-{i}"), type_="Normal", reason="Created", message=f"Created Service web-{i}")
    await asyncio.sleep(0.05)
    assert len([c for c in api.calls if c.method == "POST"]) == 2, "at most two Event POSTs in flight"
    gate.set()
    await recorder.flush()
    assert stored_events(api) == sorted((f"web-{i}", "Created", f"Created Service web-{i}") for i in range(10))


async def test_a_full_queue_drops_new_events_with_a_warning_and_keeps_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeApi()
    gate = api.gates[EVENTS.path(namespace=NS)] = asyncio.Event()
    recorder = EventRecorder(api, instance="test", max_queued=3)
    for i in range(8):
        await recorder.emit(webserver(f"web-{i}"), type_="Normal", reason="Created", message=f"m{i}")
    await asyncio.sleep(0.05)
    gate.set()
    await recorder.flush()
    # emit never yields, so the first three fill the queue before a sender takes any; the other five are dropped.
    assert [name for name, _, _ in stored_events(api)] == ["web-0", "web-1", "web-2"]
    assert "event queue full" in caplog.text
    assert "the API server is not keeping up with Events" in caplog.text


async def test_a_failed_write_is_logged_and_the_next_event_still_goes_out(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    path = EVENTS.path(namespace=NS)
    api.failures.append(status_error(403, "Forbidden", method="POST", path=path, message="events is forbidden"))
    recorder = EventRecorder(api, instance="test")
    await recorder.emit(webserver("a"), type_="Warning", reason="InvalidSpec", message="first")
    await recorder.emit(webserver("b"), type_="Normal", reason="Created", message="second")
    await recorder.flush()
    assert stored_events(api) == [("b", "Created", "second")]
    assert "could not record event InvalidSpec on team-a/a" in caplog.text


async def test_close_sends_what_fits_in_the_time_left_and_drops_the_rest_quietly() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, instance="test")
    await recorder.emit(webserver("a"), type_="Normal", reason="Created", message="sent on close")
    await recorder.close(1.0)
    assert stored_events(api) == [("a", "Created", "sent on close")]

    gate = api.gates[EVENTS.path(namespace=NS)] = asyncio.Event()
    for name in ("b", "c", "d"):
        await recorder.emit(webserver(name), type_="Normal", reason="Created", message="never sent")
    await recorder.close(0.0)  # deposed: no time left
    gate.set()
    await asyncio.sleep(0.05)
    assert stored_events(api) == [("a", "Created", "sent on close")], "nothing is written after close"


def stored(api: FakeApi) -> list[dict[str, Any]]:
    return list(api.collections.get(EVENTS.path(namespace=NS), {}).values())


async def test_identical_events_become_one_event_with_a_count() -> None:
    api = FakeApi()
    gate = api.gates[EVENTS.path(namespace=NS)] = asyncio.Event()
    recorder = EventRecorder(api, instance="test")
    for _ in range(3):  # the first POST is held: the repeats are written as one PATCH of the count after it
        await recorder.emit(webserver("web"), type_="Normal", reason="Repaired", message="Repaired Deployment web")
        await asyncio.sleep(0.01)
    assert [c.method for c in api.calls] == ["POST"]
    gate.set()
    await recorder.flush()
    (event,) = stored(api)
    assert event["count"] == 3
    await recorder.emit(webserver("web"), type_="Normal", reason="Repaired", message="Repaired Deployment web")
    await recorder.flush()
    (event,) = stored(api)
    assert event["count"] == 4
    assert [c.method for c in api.writes()] == ["POST", "PATCH", "PATCH"]
    await recorder.emit(webserver("web"), type_="Normal", reason="Repaired", message="another message")
    await recorder.flush()
    assert sorted(e["count"] for e in stored(api)) == [1, 4]


async def test_a_repeat_of_an_expired_event_creates_it_again() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, instance="test")
    await recorder.emit(webserver("web"), type_="Warning", reason="Fight", message="m")
    await recorder.flush()
    api.collections[EVENTS.path(namespace=NS)].clear()  # the API server's one-hour TTL
    await recorder.emit(webserver("web"), type_="Warning", reason="Fight", message="m")
    await recorder.flush()
    (event,) = stored(api)
    assert (event["reason"], event["count"]) == ("Fight", 2)


async def test_one_object_cannot_write_more_than_a_burst_of_events_and_the_drops_are_counted() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, instance="test")
    dropped = metrics.EVENTS_DROPPED.labels(reason="rate_limited")
    before = dropped._value.get()
    for i in range(30):
        await recorder.emit(webserver("noisy"), type_="Normal", reason="Updated", message=f"update {i}")
    await recorder.emit(webserver("quiet"), type_="Normal", reason="Created", message="Created Service quiet")
    await recorder.flush()
    assert len([e for e in stored(api) if e["involvedObject"]["name"] == "noisy"]) == 25
    assert ("quiet", "Created", "Created Service quiet") in stored_events(api)
    assert dropped._value.get() - before == 5


async def test_a_webserver_forgotten_by_its_key_is_told_again_and_leaves_no_memory() -> None:
    """``forget((namespace, name))`` (a deleted WebServer, or its shard handed over) drops its once-only memory."""
    api = FakeApi()
    recorder = EventRecorder(api, instance="test")
    for _ in range(2):
        await recorder.emit(webserver("web"), type_="Warning", reason="Refused", message="m", once_key="Refused/1")
    await recorder.flush()
    assert recorder.keys() == {(NS, "web")}
    recorder.forget((NS, "web"))
    assert recorder.keys() == set()
    await recorder.emit(webserver("web"), type_="Warning", reason="Refused", message="m", once_key="Refused/1")
    await recorder.flush()
    assert stored_events(api) == [("web", "Refused", "m")] * 2, "written once before the forget, and once after"


async def test_a_webserver_created_again_under_its_name_starts_afresh() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, instance="test")
    recreated = factories.webserver("web", namespace=NS, uid="uid-web-2", resource_version="9", spec=None)
    await recorder.emit(webserver("web"), type_="Warning", reason="Refused", message="m", once_key="Refused/1")
    await recorder.emit(recreated, type_="Warning", reason="Refused", message="m", once_key="Refused/1")
    await recorder.flush()
    assert sorted(e["involvedObject"]["uid"] for e in api.collections[EVENTS.path(namespace=NS)].values()) == [
        "uid-web",
        "uid-web-2",
    ]
    assert recorder.keys() == {(NS, "web")}
