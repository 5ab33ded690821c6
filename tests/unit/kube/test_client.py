"""``KubeClient`` against a tiny aiohttp server answering like the API server: the real request path, end to end.

Covered: JSON in/out, auth and user-agent headers, bool query encoding, content types of the patch flavours,
retries of 429 (Retry-After) / 5xx / refused connections with every attempt counted in the metrics, no retry of
other 4xx, read timeouts, and watch streams (split lines, big objects, ERROR events, 410 on open, read timeout,
connection cut mid-event, clean end).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client import Configuration

from webserver_operator import metrics
from webserver_operator.core.resources import DEPLOYMENTS, SERVICES
from webserver_operator.core.settings import ClientSettings
from webserver_operator.core.vocabulary import MERGE_PATCH, QueryValue
from webserver_operator.kube.client import FIELD_MANAGER, USER_AGENT, KubeClient
from webserver_operator.kube.config import load_in_cluster_configuration
from webserver_operator.kube.errors import (
    ConfigurationError,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    ServerError,
    TransportError,
    WritesStopped,
)
from webserver_operator.kube.retry import RetryPolicy

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
TOKEN = "Bearer sekrit-token-value"


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


class FakeApiServer:
    def __init__(self) -> None:
        self.handlers: deque[Handler] = deque()
        self.seen: list[Seen] = []
        self.release = asyncio.Event()

    def then(self, *handlers: Handler) -> None:
        self.handlers.extend(handlers)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(Seen(request.method, request.path, dict(request.query), dict(request.headers), body))
        if not self.handlers:
            return web.json_response({"kind": "Status", "code": 500, "message": "no handler left"}, status=500)
        return await self.handlers.popleft()(request)


def answer(status: int, body: object = None, *, headers: dict[str, str] | None = None) -> Handler:
    async def handler(_: web.Request) -> web.StreamResponse:
        if body is None:
            return web.Response(status=status, headers=headers)
        return web.json_response(body, status=status, headers=headers)

    return handler


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
async def server() -> AsyncIterator[tuple[FakeApiServer, str]]:
    fake = FakeApiServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield fake, str(test_server.make_url("")).rstrip("/")
    finally:
        fake.release.set()
        await test_server.close()


def configuration_for(url: str) -> Configuration:
    configuration = Configuration(host=url)
    configuration.api_key["BearerToken"] = TOKEN
    return configuration


SETTINGS = ClientSettings(connect_timeout=2.0, read_timeout=2.0)
RETRY = RetryPolicy(max_retries=3)


@pytest.fixture
async def kube(server: tuple[FakeApiServer, str]) -> AsyncIterator[tuple[KubeClient, FakeApiServer, Sleeps]]:
    fake, url = server
    sleeps = Sleeps()
    client = await KubeClient.create(
        configuration_for(url), settings=SETTINGS, watch_read_timeout=5.0, retry=RETRY, sleep=sleeps, rand=lambda: 0.0
    )
    try:
        yield client, fake, sleeps
    finally:
        await client.close()


def requests_total(code: str, method: str, host: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "rest_client_requests_total", {"code": code, "method": method, "host": host}
    )
    return value or 0.0


def duration_count(verb: str, host: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "rest_client_request_duration_seconds_count", {"verb": verb, "host": host}
    )
    return value or 0.0


async def test_get_sends_auth_user_agent_and_encodes_bools(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    fake.then(answer(200, {"kind": "Deployment", "metadata": {"name": "web"}}))
    got = await client.request(
        "get", "/apis/apps/v1/namespaces/d/deployments/web", query={"pretty": False, "limit": 5, "x": "y"}
    )
    assert got == {"kind": "Deployment", "metadata": {"name": "web"}}
    seen = fake.seen[0]
    assert (seen.method, seen.path) == ("GET", "/apis/apps/v1/namespaces/d/deployments/web")
    assert seen.query == {"pretty": "false", "limit": "5", "x": "y"}
    assert seen.headers["Authorization"] == TOKEN
    assert seen.headers["User-Agent"] == USER_AGENT
    assert seen.headers["Accept"] == "application/json"


async def test_empty_body_is_an_empty_dict(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    fake.then(answer(200))
    assert await client.request("DELETE", "/api/v1/namespaces/d/services/s") == {}


async def test_429_honours_retry_after_and_counts_every_attempt(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, sleeps = kube
    before_429 = requests_total("429", "GET", client.host)
    before_200 = requests_total("200", "GET", client.host)
    before_count = duration_count("GET", client.host)
    fake.then(
        answer(429, status_body(429, "TooManyRequests", "Too many requests"), headers={"Retry-After": "2"}),
        answer(429, status_body(429, "TooManyRequests", "Too many requests"), headers={"Retry-After": "1"}),
        answer(200, {"items": []}),
    )
    assert await client.request("GET", SERVICES.path(namespace="d"), query={"labelSelector": "app=web"}) == {
        "items": []
    }
    assert sleeps.delays == [2.0, 1.0]
    assert len(fake.seen) == 3
    assert fake.seen[0].query == {"labelSelector": "app=web"}
    assert requests_total("429", "GET", client.host) - before_429 == 2
    assert requests_total("200", "GET", client.host) - before_200 == 1
    assert duration_count("GET", client.host) - before_count == 3


async def test_500_then_200_backs_off(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, sleeps = kube
    fake.then(
        answer(500, status_body(500, "InternalError", "etcdserver: request timed out")),
        answer(503, None),
        answer(201, {"metadata": {"name": "web"}}),
    )
    created = await client.request(
        "POST", SERVICES.path(namespace="d"), body={"metadata": {"name": "web"}}, query={"fieldManager": "op"}
    )
    assert created == {"metadata": {"name": "web"}}
    assert sleeps.delays == pytest.approx([0.1, 0.2])  # base 0.2 * 2**n with jitter factor 0.5 (rand=0)
    assert [s.method for s in fake.seen] == ["POST", "POST", "POST"]
    assert json.loads(fake.seen[0].body) == {"metadata": {"name": "web"}}
    assert fake.seen[0].query == {"fieldManager": "op"}


async def test_gives_up_after_max_retries(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, sleeps = kube
    fake.then(*[answer(503, status_body(503, "ServiceUnavailable", "apiserver is shutting down")) for _ in range(9)])
    with pytest.raises(ServerError) as caught:
        await client.request("GET", DEPLOYMENTS.path(namespace="d", name="web"))
    assert len(fake.seen) == RETRY.max_retries + 1
    assert len(sleeps.delays) == RETRY.max_retries
    assert caught.value.attempts == 4
    assert "apiserver is shutting down" in str(caught.value)


@pytest.mark.parametrize(
    ("code", "reason", "error_type"),
    [(404, "NotFound", NotFound), (403, "Forbidden", Forbidden), (409, "AlreadyExists", Conflict)],
)
async def test_other_4xx_are_not_retried(
    kube: tuple[KubeClient, FakeApiServer, Sleeps], code: int, reason: str, error_type: type[Exception]
) -> None:
    client, fake, sleeps = kube
    fake.then(answer(code, status_body(code, reason, f"the {reason} message")))
    with pytest.raises(error_type) as caught:
        await client.request("POST", DEPLOYMENTS.path(namespace="d"), body={"metadata": {"name": "web"}})
    assert f"the {reason} message" in str(caught.value)
    assert len(fake.seen) == 1
    assert sleeps.delays == []


async def test_writes_name_the_field_manager_and_reads_do_not(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    fake.then(*[answer(200, {}) for _ in range(4)])
    body = {"spec": {"replicas": 2}}
    await client.request("PATCH", DEPLOYMENTS.path(namespace="d", name="web"), body=body, content_type=MERGE_PATCH)
    await client.request("PUT", SERVICES.path(namespace="d", name="s"), body={"metadata": {"resourceVersion": "7"}})
    await client.request("POST", SERVICES.path(namespace="d"), body={}, query={"fieldManager": "someone"})
    await client.request("GET", SERVICES.path(namespace="d", name="s"))
    patch, put, post, get = fake.seen
    assert patch.headers["Content-Type"] == MERGE_PATCH
    assert json.loads(patch.body) == body
    assert patch.query == {"fieldManager": "webserver-operator"}
    assert (put.method, put.path, put.query) == (
        "PUT",
        "/api/v1/namespaces/d/services/s",
        {"fieldManager": FIELD_MANAGER},
    )
    assert post.query == {"fieldManager": "someone"}
    assert get.query == {}


async def test_the_reconcile_view_tries_once_and_shares_the_client(
    kube: tuple[KubeClient, FakeApiServer, Sleeps],
) -> None:
    client, fake, sleeps = kube
    fake.then(answer(503, status_body(503, "ServiceUnavailable", "busy")), answer(200, {"ok": 1}))
    with pytest.raises(ServerError):
        await client.without_retries().request("GET", SERVICES.path(namespace="d", name="s"))
    assert sleeps.delays == []
    assert await client.request("GET", SERVICES.path(namespace="d", name="s")) == {"ok": 1}
    assert len(fake.seen) == 2


async def test_read_timeout_is_a_transport_error(server: tuple[FakeApiServer, str]) -> None:
    fake, url = server

    async def slow(_: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(fake.release.wait(), timeout=5)
        return web.json_response({})

    fake.then(slow)
    settings = ClientSettings(read_timeout=0.2)
    async with await KubeClient.create(
        configuration_for(url), settings=settings, retry=RetryPolicy(max_retries=0)
    ) as client:
        before = requests_total("<error>", "GET", client.host)
        with pytest.raises(TransportError, match="timed out") as caught:
            await client.request("GET", "/api/v1/namespaces")
        assert caught.value.retriable
        assert requests_total("<error>", "GET", client.host) - before == 1


async def test_connection_refused_is_retried_then_raised() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = Sleeps()
    settings = ClientSettings(connect_timeout=2.0)
    async with await KubeClient.create(
        configuration_for(f"http://127.0.0.1:{port}"), settings=settings, retry=RetryPolicy(max_retries=2), sleep=sleeps
    ) as k:
        before = requests_total("<error>", "GET", k.host)
        with pytest.raises(TransportError) as caught:
            await k.request("GET", "/api/v1/namespaces")
        assert caught.value.attempts == 3
        assert len(sleeps.delays) == 2
        assert f"at 127.0.0.1:{port}" in str(caught.value)
        assert requests_total("<error>", "GET", k.host) - before == 3


async def test_client_side_rate_limit(server: tuple[FakeApiServer, str]) -> None:
    fake, url = server
    fake.then(*[answer(200, {}) for _ in range(3)])
    sleeps = Sleeps()
    # 1 qps: the third request waits even on a machine slow enough to take a tenth of a second per request.
    settings = ClientSettings(qps=1.0, burst=2)
    async with await KubeClient.create(configuration_for(url), settings=settings, sleep=sleeps) as client:
        for _ in range(3):
            await client.request("GET", "/api/v1/namespaces")
    assert len(sleeps.delays) == 1
    assert 0 < sleeps.delays[0] <= 1.0


async def test_failures_are_logged_without_secrets(
    kube: tuple[KubeClient, FakeApiServer, Sleeps], caplog: pytest.LogCaptureFixture
) -> None:
    client, fake, _ = kube
    caplog.set_level(logging.DEBUG)
    fake.then(
        answer(503, status_body(503, "ServiceUnavailable", "try later")),
        answer(422, status_body(422, "Invalid", "spec.replicas: Invalid value: -1")),
    )
    with pytest.raises(Exception, match="Invalid value"):
        await client.request("POST", SERVICES.path(namespace="d"), body={"data": {"password": "hunter2"}})
    text = caplog.text
    assert "POST /api/v1/namespaces/d/services" in text
    assert "try later" in text
    assert "Invalid value: -1" in text
    assert "sekrit" not in text
    assert "hunter2" not in text


# --- watch -----------------------------------------------------------------------------------------------------------


def event(kind: str, name: str, rv: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "object": {"kind": "Service", "metadata": {"name": name, "resourceVersion": rv}, **extra}}


def stream(
    *chunks: bytes, then: Callable[[], Awaitable[None]] | None = None, cut: bool = False, pace: float = 0.005
) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
            await asyncio.sleep(pace)
        if then is not None:
            await then()
        if cut:
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write_eof()
        return response

    return handler


WATCH_QUERY: dict[str, QueryValue] = {
    "resourceVersion": "10",
    "allowWatchBookmarks": True,
    "timeoutSeconds": 3,
    "labelSelector": "a=b",
}


async def test_watch_stream_with_split_lines_and_big_objects(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    big = event("MODIFIED", "big", "12", data={"blob": "x" * 3_000_000})
    expired = {"type": "ERROR", "object": status_body(410, "Expired", "too old resource version: 10 (11)")}
    body = b"".join(json.dumps(e).encode() + b"\n" for e in [event("ADDED", "a", "11"), big, expired])
    chunks = [body[:5], body[5:40], *[body[i : i + 1_000_000] for i in range(40, len(body), 1_000_000)]]
    fake.then(stream(*chunks))
    async with client.watch("/api/v1/namespaces/d/services", query=WATCH_QUERY) as events:
        received = [e async for e in events]
    assert [e["type"] for e in received] == ["ADDED", "MODIFIED", "ERROR"]
    assert received[1] == big
    assert received[2]["object"]["code"] == 410  # yielded as-is: the informer decides
    assert fake.seen[0].query == {
        "resourceVersion": "10",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "3",
        "labelSelector": "a=b",
        "watch": "true",
    }
    assert fake.seen[0].headers["Authorization"] == TOKEN


async def test_watch_410_on_open(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, sleeps = kube
    fake.then(answer(410, status_body(410, "Expired", "too old resource version: 1 (99)")))
    with pytest.raises(Gone) as caught:
        async with client.watch("/api/v1/services", query=WATCH_QUERY):
            pytest.fail("must not open")
    assert caught.value.reason == "Expired"
    assert caught.value.verb == "watch"
    assert len(fake.seen) == 1
    assert sleeps.delays == []


async def test_watch_403_names_the_watch_verb(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    message = 'services is forbidden: User "x" cannot watch resource "services" in API group "" at the cluster scope'
    fake.then(answer(403, status_body(403, "Forbidden", message)))
    with pytest.raises(Forbidden, match='"watch" on resource "services"'):
        async with client.watch("/api/v1/services", query=WATCH_QUERY):
            pass


async def test_watch_read_timeout(server: tuple[FakeApiServer, str]) -> None:
    fake, url = server

    async def hang() -> None:
        await asyncio.wait_for(fake.release.wait(), timeout=10)

    fake.then(stream(json.dumps(event("ADDED", "a", "2")).encode() + b"\n", then=hang))
    # read_timeout is shorter than the wait below: the watch must use watch_read_timeout, not read_timeout.
    settings = ClientSettings(read_timeout=0.1)
    client = await KubeClient.create(configuration_for(url), settings=settings, watch_read_timeout=1.5)
    async with client, client.watch("/api/v1/services", query={"timeoutSeconds": 1}) as events:
        assert (await anext(events))["type"] == "ADDED"
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TransportError, match="read timeout"):
            await anext(events)
        assert 1.2 < loop.time() - started < 5


async def test_watch_without_an_answer_times_out_at_the_watch_read_timeout(server: tuple[FakeApiServer, str]) -> None:
    """Until the answer's headers arrive, the watch read timeout bounds the wait (not the shorter request timeout)."""
    fake, url = server

    async def silent(_: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(fake.release.wait(), timeout=10)
        return web.json_response({})

    fake.then(silent)
    client = await KubeClient.create(
        configuration_for(url), settings=ClientSettings(read_timeout=0.1), watch_read_timeout=1.5
    )
    async with client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TransportError, match="no answer within the watch read timeout") as caught:
            async with client.watch("/api/v1/services", query={"timeoutSeconds": 1}):
                pass
        assert 1.2 < loop.time() - started < 5
        assert caught.value.retriable
    fake.release.set()


async def test_a_steady_watch_outlives_its_read_timeout(server: tuple[FakeApiServer, str]) -> None:
    """Events every 0.25 s for 2.5 s against a watch read timeout of 1.5 s: no gap is that long, so nothing is cut."""
    fake, url = server
    lines = [json.dumps(event("ADDED", f"s{i}", str(i + 2))).encode() + b"\n" for i in range(10)]
    fake.then(stream(*lines, pace=0.25))
    client = await KubeClient.create(configuration_for(url), settings=SETTINGS, watch_read_timeout=1.5)
    async with client, client.watch("/api/v1/services", query={"timeoutSeconds": 1}) as events:
        names = [e["object"]["metadata"]["name"] async for e in events]
    assert names == [f"s{i}" for i in range(10)]


async def test_watch_cut_mid_event(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    fake.then(stream(json.dumps(event("ADDED", "a", "2")).encode() + b'\n{"type": "MODIFIED", "obj', cut=True))
    async with client.watch("/api/v1/services", query=WATCH_QUERY) as events:
        assert (await anext(events))["type"] == "ADDED"
        with pytest.raises(TransportError) as caught:
            await anext(events)
    assert caught.value.retriable


async def test_watch_ends_cleanly_when_the_server_closes(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    fake.then(stream(), answer(200, {"kind": "ServiceList", "items": []}))
    async with client.watch("/api/v1/services", query=WATCH_QUERY) as events:
        assert [e async for e in events] == []
    # The connection pool is still healthy afterwards.
    assert await client.request("GET", SERVICES.path()) == {"kind": "ServiceList", "items": []}


async def test_watch_can_be_abandoned(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube

    async def hang() -> None:
        await asyncio.wait_for(fake.release.wait(), timeout=10)

    fake.then(stream(json.dumps(event("ADDED", "a", "2")).encode() + b"\n", then=hang))
    async with client.watch("/api/v1/services", query=WATCH_QUERY) as events:
        async for _ in events:
            break
    fake.then(answer(200, {"items": []}))
    assert await client.request("GET", SERVICES.path()) == {"items": []}


async def test_watch_requires_a_server_timeout(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    with pytest.raises(ValueError, match="timeoutSeconds"):
        async with client.watch("/api/v1/services", query={"resourceVersion": "1"}):
            pass
    with pytest.raises(ValueError, match="below the client watch read timeout"):
        async with client.watch("/api/v1/services", query={"timeoutSeconds": 600}):
            pass
    assert fake.seen == []


async def test_waiting_for_a_pooled_connection_is_bounded(server: tuple[FakeApiServer, str]) -> None:
    """With every connection held by a watch, a request fails after the connect timeout instead of queueing forever."""
    fake, url = server

    async def hang() -> None:
        await asyncio.wait_for(fake.release.wait(), timeout=10)

    fake.then(stream(json.dumps(event("ADDED", "a", "2")).encode() + b"\n", then=hang))
    settings = ClientSettings(connect_timeout=0.5, read_timeout=5.0)
    client = await KubeClient.create(
        configuration_for(url), settings=settings, retry=RetryPolicy(max_retries=0), pool_size=1
    )
    async with client, client.watch("/api/v1/services", query=WATCH_QUERY) as events:
        assert (await anext(events))["type"] == "ADDED"
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TransportError, match="timed out"):
            await client.request("GET", SERVICES.path(namespace="d"))
        assert loop.time() - started < 3


async def test_a_gated_view_refuses_writes_but_not_reads(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    leading = [True]
    gated = client.gated(lambda _path: None if leading[0] else "the Lease was lost")
    fake.then(answer(200, {}), answer(200, {"ok": 1}))
    await gated.request("PATCH", DEPLOYMENTS.path(namespace="d", name="web"), body={}, content_type=MERGE_PATCH)
    leading[0] = False
    with pytest.raises(WritesStopped, match="the Lease was lost"):
        await gated.request("PUT", SERVICES.path(namespace="d", name="s"), body={})
    assert await gated.request("GET", SERVICES.path(namespace="d", name="s")) == {"ok": 1}
    assert [call.method for call in fake.seen] == ["PATCH", "GET"], "the refused write never left the process"


async def test_the_gate_decides_by_the_path_of_each_write(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    """One gate covers writes under several Leases: the namespace in the path names the shard whose fence decides."""
    client, fake, _ = kube
    held = {"team-a"}
    gated = client.gated(lambda path: None if path.split("/")[4] in held else f"{path}: its shard is not held here")
    fake.then(answer(200, {}))
    await gated.request("PUT", SERVICES.path(namespace="team-a", name="s"), body={})
    with pytest.raises(WritesStopped, match="its shard is not held here"):
        await gated.request("PUT", SERVICES.path(namespace="team-b", name="s"), body={})
    assert [(call.method, call.path) for call in fake.seen] == [("PUT", "/api/v1/namespaces/team-a/services/s")]


class Deadline:
    """A write gate that closes at a moment of a fake clock, as the Lease fence closes at its validity deadline."""

    def __init__(self, *, valid_for: float) -> None:
        self.now = 0.0
        self.valid_until = valid_for

    def why_not(self) -> str | None:
        return None if self.now < self.valid_until else "the Lease's validity deadline has passed"

    async def sleep(self, seconds: float) -> None:
        """The client's sleep hook: time passes (for the rate limiter too) while the request waits."""
        self.now += seconds
        await asyncio.sleep(0)


async def test_a_write_that_waited_in_the_rate_limiter_past_the_deadline_is_not_sent(
    server: tuple[FakeApiServer, str],
) -> None:
    """The gate is checked again after the rate limiter: a write that was allowed when it started, then waited for
    a token until the Lease's validity deadline had passed, never leaves."""
    fake, url = server
    deadline = Deadline(valid_for=0.5)
    client = await KubeClient.create(
        configuration_for(url), settings=ClientSettings(qps=1.0, burst=1), retry=RETRY, sleep=deadline.sleep
    )
    async with client:
        gated = client.gated(lambda _path: deadline.why_not())
        fake.then(answer(200, {}), answer(200, {}))
        await gated.request("PUT", SERVICES.path(namespace="d", name="first"), body={})
        with pytest.raises(WritesStopped, match="validity deadline"):
            await gated.request("PUT", SERVICES.path(namespace="d", name="second"), body={})  # waits ~1 s for a token
        assert deadline.now >= deadline.valid_until, "the second write did wait in the rate limiter"
        assert [(s.method, s.path) for s in fake.seen] == [("PUT", "/api/v1/namespaces/d/services/first")]


async def test_a_write_that_waited_for_a_pooled_connection_past_the_deadline_is_not_sent(
    server: tuple[FakeApiServer, str],
) -> None:
    """The gate is checked after the wait for a free connection, just before the request is written: a write queued
    behind a slow request while the Lease's validity deadline passed never leaves, and its connection is not lost."""
    fake, url = server
    valid = [True]

    async def slow(_: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(fake.release.wait(), timeout=5)
        return web.json_response({"kind": "Service"})

    fake.then(slow, answer(200, {"kind": "Service"}))
    client = await KubeClient.create(configuration_for(url), settings=SETTINGS, retry=RETRY, pool_size=1)
    async with client:
        gated = client.gated(lambda _path: None if valid[0] else "the Lease's validity deadline has passed")
        read = asyncio.create_task(gated.request("GET", SERVICES.path(namespace="d", name="slow")))
        await asyncio.sleep(0.1)  # the read holds the only connection
        write = asyncio.create_task(gated.request("PUT", SERVICES.path(namespace="d", name="web"), body={}))
        await asyncio.sleep(0.1)  # the write passed the gate at its start and waits for the connection
        valid[0] = False
        fake.release.set()
        assert await read == {"kind": "Service"}
        with pytest.raises(WritesStopped, match="validity deadline"):
            await write
        assert await gated.request("GET", SERVICES.path(namespace="d", name="web")) == {"kind": "Service"}
    assert [(s.method, s.path) for s in fake.seen] == [
        ("GET", "/api/v1/namespaces/d/services/slow"),
        ("GET", "/api/v1/namespaces/d/services/web"),
    ]


async def test_a_request_never_leaves_the_event_loop_for_a_thread(
    kube: tuple[KubeClient, FakeApiServer, Sleeps], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No per-request hop to a thread pool: a session trusting the environment reads ~/.netrc and the proxy variables
    in an executor on every request, which the profile of a bulk create showed as a fifth of the operator's CPU."""
    client, fake, _ = kube
    loop = asyncio.get_running_loop()
    hops: list[object] = []
    real_run_in_executor = loop.run_in_executor

    def counting(executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:
        hops.append(func)
        return real_run_in_executor(executor, func, *args)

    monkeypatch.setattr(loop, "run_in_executor", counting)
    for _ in range(3):
        fake.then(answer(200, {"kind": "Service"}))
        await client.request("GET", "/api/v1/namespaces/d/services/web")
    assert [s.path for s in fake.seen] == ["/api/v1/namespaces/d/services/web"] * 3
    assert hops == []


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"HTTPS_PROXY": "http://proxy.example:3128"}, "http://proxy.example:3128"),
        ({"https_proxy": "http://proxy.example:3128", "NO_PROXY": "api.example"}, None),
        ({}, None),
    ],
)
async def test_proxy_variables_are_read_once_like_client_go(
    environment: dict[str, str], expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTPS_PROXY / NO_PROXY keep working (client-go honours them), resolved once for the API server's host."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    configuration = configuration_for("https://api.example:6443")
    client = await KubeClient.create(configuration, settings=SETTINGS)
    try:
        assert configuration.proxy == expected
    finally:
        await client.close()


async def test_bearer_token_comes_from_the_refresh_hook_on_every_request(
    server: tuple[FakeApiServer, str],
) -> None:
    """The request path bypasses ``ApiClient.call_api`` but still runs the library's token refresh per request."""
    fake, url = server
    configuration = configuration_for(url)
    tokens = iter(["Bearer first", "Bearer rotated"])

    async def refresh(config: Configuration) -> None:
        config.api_key["BearerToken"] = next(tokens)

    configuration.refresh_api_key_hook = refresh
    client = await KubeClient.create(configuration, settings=SETTINGS, retry=RETRY)
    try:
        fake.then(answer(200, {}), answer(200, {}))
        await client.request("GET", "/api/v1/namespaces/d/services/a")
        await client.request("GET", "/api/v1/namespaces/d/services/b")
    finally:
        await client.close()
    assert [seen.headers["Authorization"] for seen in fake.seen] == ["Bearer first", "Bearer rotated"]


async def test_no_authorization_header_without_a_bearer_token(server: tuple[FakeApiServer, str]) -> None:
    fake, url = server
    client = await KubeClient.create(Configuration(host=url), settings=SETTINGS, retry=RETRY)
    try:
        fake.then(answer(200, {"kind": "Service"}))
        assert await client.request("GET", "/api/v1/namespaces/d/services/a") == {"kind": "Service"}
    finally:
        await client.close()
    assert "Authorization" not in fake.seen[0].headers
    assert fake.seen[0].headers["User-Agent"] == USER_AGENT


async def test_bodies_keep_unicode_and_integers_exactly(kube: tuple[KubeClient, FakeApiServer, Sleeps]) -> None:
    client, fake, _ = kube
    body = {
        "metadata": {"name": "web", "annotations": {"note": "café ☕ 日本 \U0001f600", "quote": 'a "b" \\ c\n'}},
        "spec": {"replicas": 3, "big": 2**63 - 1, "bigger": 2**70, "ratio": 0.1, "off": False, "none": None},
    }
    fake.then(answer(201, body))
    got = await client.request("POST", "/apis/apps/v1/namespaces/d/deployments", body=body)
    assert json.loads(fake.seen[0].body) == body
    assert fake.seen[0].headers["Content-Type"] == "application/json"
    assert got["metadata"] == body["metadata"]
    assert got["spec"]["big"] == 2**63 - 1


@pytest.mark.parametrize("content", ["sa-token\n", "sa-token\r\n", "  sa-token \n\n"])
async def test_a_token_file_ending_in_a_newline_is_trimmed_as_client_go_does(
    content: str, server: tuple[FakeApiServer, str], tmp_path: Path
) -> None:
    """``echo $TOKEN > token`` leaves a newline; the library sends the file as it is, client-go trims it."""
    fake, url = server
    (tmp_path / "token").write_text(content)
    (tmp_path / "ca.crt").write_text("unused here: the fake API server speaks plain HTTP")
    configuration = load_in_cluster_configuration(
        environ={"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
        token_path=str(tmp_path / "token"),
        ca_path=str(tmp_path / "ca.crt"),
    )
    configuration.host, configuration.ssl_ca_cert = url, None
    client = await KubeClient.create(configuration, settings=SETTINGS, retry=RETRY)
    try:
        fake.then(answer(200, {}))
        assert await client.request("GET", "/api/v1/namespaces/d/services/a") == {}
    finally:
        await client.close()
    assert [seen.headers["Authorization"] for seen in fake.seen] == ["Bearer sa-token"]


@pytest.mark.parametrize(("token", "error"), [("Bearer a\nb", "line break"), ("Bearer \n", "empty")])
async def test_a_token_that_cannot_be_sent_says_where_to_look(
    token: str, error: str, server: tuple[FakeApiServer, str]
) -> None:
    _, url = server
    configuration = Configuration(host=url)
    configuration.api_key["BearerToken"] = token
    client = await KubeClient.create(configuration, settings=SETTINGS, retry=RETRY)
    try:
        with pytest.raises(ConfigurationError, match=f"{error}.*token file"):
            await client.request("GET", "/api/v1/namespaces/d/services/a")
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("host", "no_proxy", "proxied"),
    [
        ("https://10.96.0.1:443", "10.0.0.0/8", False),  # the in-cluster API server, a CIDR as OLM injects it
        ("https://10.96.0.1", "10.0.0.0/8,.svc", False),
        ("https://[fd00::1]:6443", "fd00::/8", False),
        ("https://11.0.0.1:443", "10.0.0.0/8", True),
        ("https://api.example:6443", "example:6443,.example", False),
        ("https://api.example:6443", "api.example:443", True),
    ],
)
async def test_no_proxy_follows_go_cidrs_included(
    host: str, no_proxy: str, proxied: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    configuration = configuration_for(host)
    client = await KubeClient.create(configuration, settings=SETTINGS)
    try:
        assert configuration.proxy == ("http://proxy.example:3128" if proxied else None)
    finally:
        await client.close()
