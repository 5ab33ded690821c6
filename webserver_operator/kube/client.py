"""``Kube``: the only object in the operator that talks HTTP to the API server.

Everything above this layer works with plain JSON dicts. Why not the generated ``*Api`` classes and model objects:
deserialising into models is slow, drops unknown fields (lossy round trips are how operators clobber fields they do
not own) and needs per-kind code. We call ``ApiClient.call_api`` with ``_preload_content=False`` and decode JSON
ourselves, which keeps what the library does well (TLS setup, auth headers, token refresh) and none of the rest.

kubernetes_asyncio traps handled here (verified against the installed 36.x source):

- ``_preload_content=False`` returns the raw aiohttp response and never raises on HTTP errors: the status is checked
  here and turned into ``errors.ApiError`` subclasses.
- ``_request_timeout``: nothing by default (a dead connection hangs forever); a single number becomes
  ``ClientTimeout(total=n)``, which kills healthy watches at ``n``. We pass an ``aiohttp.ClientTimeout`` with
  ``sock_connect`` = connect timeout and ``sock_read`` = read timeout (time without receiving a byte), no total.
- Auth: the bearer token and its refresh hook are only applied when ``auth_settings=["BearerToken"]`` is passed.
- Query values go through ``urlencode`` as-is: Python ``True`` would become ``"True"``, so bools are encoded here.
- The ``ApiClient`` owns an ``aiohttp.ClientSession``: it must be created inside the running loop and shared;
  ``Kube.create`` does that, ``close()`` releases it.
- ``kubernetes_asyncio.watch.Watch`` retries a 410 with the same stale resourceVersion: ``watch()`` here only opens
  and decodes the stream (see ``webserver_operator.kube.stream``); the informer relists.

Retries (429, 5xx, transport errors; see ``webserver_operator.kube.retry``) apply to ``request()`` and the wrappers,
not to ``watch()``, whose caller must handle a failed open anyway. Every attempt, retried or not, is counted in
``rest_client_requests_total{code,method,host}`` and ``rest_client_request_duration_seconds{verb,host}``; labels
never carry paths or object names. Failed attempts are logged with method, path (no query string), status and the
API server's message; never headers or bodies, which may carry tokens or Secret data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Literal, Self
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio.client import ApiClient, Configuration

from webserver_operator import metrics
from webserver_operator.kube.errors import KubeError, TransportError, api_error_from_response
from webserver_operator.kube.ratelimit import TokenBucket
from webserver_operator.kube.resources import Resource
from webserver_operator.kube.retry import RetryPolicy, call_with_retries
from webserver_operator.kube.settings import ClientSettings
from webserver_operator.kube.stream import WatchStream

__all__ = ["PATCH_CONTENT_TYPES", "Kube", "PatchType", "QueryValue"]

log = logging.getLogger(__name__)

QueryValue = str | int | bool
PatchType = Literal["merge", "strategic", "apply", "json"]

PATCH_CONTENT_TYPES: Mapping[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    # Server-side apply: the body is sent as JSON, which is valid YAML; needs fieldManager, optionally force.
    "apply": "application/apply-patch+yaml",
    "json": "application/json-patch+json",
}

_JSON = "application/json"
# Status code label of attempts that got no HTTP answer, as client-go.
_NO_STATUS = "<error>"


def encode_query(query: Mapping[str, QueryValue] | None) -> list[tuple[str, str]]:
    """Query parameters as strings the API server understands (``true``/``false`` for bools)."""
    pairs: list[tuple[str, str]] = []
    for key, value in (query or {}).items():
        if isinstance(value, bool):
            pairs.append((key, "true" if value else "false"))
        else:
            pairs.append((key, str(value)))
    return pairs


class Kube:
    """Shared API client. Build it with ``await Kube.create(configuration, settings=...)`` inside the running loop."""

    def __init__(
        self,
        api: ApiClient,
        *,
        settings: ClientSettings,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._api = api
        self._settings = settings
        self._sleep = sleep
        self._rand = rand
        self._policy = RetryPolicy(
            max_retries=settings.max_retries, backoff_base=settings.backoff_base, backoff_cap=settings.backoff_cap
        )
        self._limiter = (
            TokenBucket(qps=settings.qps, burst=settings.burst, sleep=sleep) if settings.qps is not None else None
        )
        server = str(api.configuration.host)
        self._host = urlsplit(server).netloc or server
        self._request_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=settings.connect_timeout, sock_read=settings.read_timeout
        )
        self._watch_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=settings.connect_timeout, sock_read=settings.watch_read_timeout
        )

    @classmethod
    async def create(
        cls,
        configuration: Configuration,
        *,
        settings: ClientSettings,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> Self:
        """Create the client in the running loop (its aiohttp session binds to it). ``sleep``/``rand``: test hooks."""
        asyncio.get_running_loop()
        api = ApiClient(configuration=configuration)
        api.user_agent = settings.user_agent
        return cls(api, settings=settings, sleep=sleep, rand=rand)

    @property
    def host(self) -> str:
        """``host[:port]`` of the API server (the ``host`` metric label)."""
        return self._host

    @property
    def settings(self) -> ClientSettings:
        return self._settings

    async def close(self) -> None:
        await self._api.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- raw requests --------------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None = None,
        body: object | None = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        """Send a request (retried per the retry policy) and return the decoded JSON body (``{}`` when empty).

        Raises ``ApiError`` subclasses for HTTP errors and ``TransportError`` when no answer came. ``body`` is any
        JSON-serialisable value (also for ``application/apply-patch+yaml``: JSON is YAML).
        """
        method = method.upper()
        pairs = encode_query(query)

        def on_retry(error: KubeError, delay: float) -> None:
            log.warning("%s %s attempt %d failed, retrying in %.2fs: %s", method, path, error.attempts, delay, error)

        try:
            return await call_with_retries(
                lambda: self._attempt(method, path, query=pairs, body=body, content_type=content_type or _JSON),
                policy=self._policy,
                sleep=self._sleep,
                rand=self._rand,
                on_retry=on_retry,
            )
        except KubeError as error:
            if error.retriable:
                log.warning("%s %s gave up after %d attempts: %s", method, path, error.attempts, error)
            raise

    async def _attempt(
        self, method: str, path: str, *, query: list[tuple[str, str]], body: object | None, content_type: str
    ) -> dict[str, Any]:
        started = time.monotonic()
        response = await self._send(
            method, path, query=query, body=body, content_type=content_type, client_timeout=self._request_timeout
        )
        try:
            data = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self._observe(method, _NO_STATUS, started)
            raise self._transport_error(exc, method=method, path=path) from exc
        finally:
            response.release()
        status = int(response.status)
        self._observe(method, str(status), started)
        if not 200 <= status < 300:
            error = api_error_from_response(status, data, method=method, path=path, headers=response.headers)
            log.debug("%s %s -> %d %s: %s", method, path, status, error.reason, error.message)
            raise error
        return self._decode(data, method=method, path=path)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]],
        body: object | None,
        content_type: str | None,
        client_timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """One HTTP exchange up to the response headers; transport failures become ``TransportError``."""
        if self._limiter is not None:
            await self._limiter.acquire()
        headers = {"Accept": _JSON}
        if content_type is not None:
            headers["Content-Type"] = content_type
        started = time.monotonic()
        try:
            response: aiohttp.ClientResponse = await self._api.call_api(
                path,
                method,
                query_params=query,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=client_timeout,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self._observe(method, _NO_STATUS, started)
            error = self._transport_error(exc, method=method, path=path)
            log.debug("%s %s -> no answer: %s", method, path, error.cause)
            raise error from exc
        return response

    def _observe(self, method: str, code: str, started: float) -> None:
        metrics.REST_CLIENT_REQUESTS.labels(code=code, method=method, host=self._host).inc()
        metrics.REST_CLIENT_REQUEST_DURATION.labels(verb=method, host=self._host).observe(time.monotonic() - started)

    def _transport_error(self, exc: BaseException, *, method: str, path: str) -> TransportError:
        retriable = True
        if isinstance(exc, TimeoutError):
            cause = f"timed out ({type(exc).__name__}; connect timeout {self._settings.connect_timeout:g}s)"
        elif isinstance(exc, aiohttp.ClientConnectorCertificateError | ssl.SSLCertVerificationError):
            retriable = False
            cause = f"TLS certificate verification failed ({exc}): check the CA in the kubeconfig / ServiceAccount"
        elif isinstance(exc, aiohttp.InvalidURL):
            retriable = False
            cause = f"invalid URL {exc}"
        else:
            cause = f"{type(exc).__name__}: {exc}"
        return TransportError(method=method, path=path, cause=cause, host=self._host, retriable=retriable)

    @staticmethod
    def _decode(data: bytes, *, method: str, path: str) -> dict[str, Any]:
        if not data.strip():
            return {}
        try:
            decoded = json.loads(data)
        except ValueError as exc:
            raise TransportError(
                method=method, path=path, cause=f"the answer is not JSON ({exc})", retriable=False
            ) from exc
        if not isinstance(decoded, dict):
            raise TransportError(
                method=method, path=path, cause=f"the answer is a JSON {type(decoded).__name__}", retriable=False
            )
        return decoded

    # --- watch ---------------------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def watch(self, path: str, *, query: Mapping[str, QueryValue]) -> AsyncIterator[WatchStream]:
        """Open a watch on a collection ``path``; an async context manager yielding an async iterator of events.

        ::

            async with kube.watch(DEPLOYMENTS.path(), query={"resourceVersion": rv, "allowWatchBookmarks": True,
                                                              "timeoutSeconds": 290}) as events:
                async for event in events:   # {"type": "ADDED"|...|"BOOKMARK"|"ERROR", "object": {...}}
                    ...

        Opening raises ``ApiError`` on a non-200 answer (410 Gone for a too-old resourceVersion, 403...) and
        ``TransportError`` when the server cannot be reached; not retried. Iterating raises ``TransportError`` on a
        read timeout, a reset connection or a body cut mid-event, and ends normally when the server closes the
        stream (``timeoutSeconds`` elapsed): re-watch from the last resourceVersion seen. ``ERROR`` events (a
        ``Status`` in ``object``, e.g. code 410 "Expired") are yielded as they are. Leaving the block closes the
        connection. ``timeoutSeconds`` is required and must be below ``settings.watch_read_timeout``, so that a
        healthy stream is always ended by the server, never by the client's read timeout.
        """
        timeout_seconds = query.get("timeoutSeconds")
        if isinstance(timeout_seconds, bool) or not str(timeout_seconds).isdigit():
            raise ValueError("watch needs an integer timeoutSeconds (server-side end of the stream), e.g. 290")
        if not 0 < int(str(timeout_seconds)) < self._settings.watch_read_timeout:
            raise ValueError(
                f"watch timeoutSeconds={timeout_seconds} must be > 0 and below the client watch read timeout "
                f"({self._settings.watch_read_timeout:g}s)"
            )
        pairs = [(k, v) for k, v in encode_query(query) if k != "watch"] + [("watch", "true")]
        started = time.monotonic()
        response = await self._send(
            "GET", path, query=pairs, body=None, content_type=None, client_timeout=self._watch_timeout
        )
        try:
            self._observe("GET", str(response.status), started)
            if response.status != 200:
                try:
                    data = await response.read()
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    raise self._transport_error(exc, method="GET", path=path) from exc
                error = api_error_from_response(
                    int(response.status), data, method="GET", path=path, headers=response.headers, verb="watch"
                )
                log.debug("watch %s -> %d %s: %s", path, error.status, error.reason, error.message)
                raise error
            yield WatchStream(read_chunk=response.content.readany, method="GET", path=path, host=self._host)
        finally:
            if response.content.at_eof():
                response.release()  # fully read: the connection can be reused
            else:
                response.close()  # abandoned mid-stream: drop the connection

    # --- thin wrappers -------------------------------------------------------------------------------------------

    async def get(self, resource: Resource, *, namespace: str | None = None, name: str) -> dict[str, Any]:
        return await self.request("GET", resource.path(namespace=namespace, name=name))

    async def create_object(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """POST a new object (the name ``create`` is taken by the constructor).

        Retried like every request: a create that succeeded unseen surfaces as 409 AlreadyExists
        (``Conflict.already_exists``).
        """
        query: dict[str, QueryValue] = {"fieldManager": field_manager} if field_manager else {}
        return await self.request("POST", resource.path(namespace=namespace), query=query, body=body)

    async def patch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        name: str,
        body: object,
        patch_type: PatchType = "merge",
        field_manager: str | None = None,
        force: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """PATCH with the content type of ``patch_type``; ``apply`` (server-side apply) needs ``field_manager``."""
        if patch_type not in PATCH_CONTENT_TYPES:
            raise ValueError(f"unknown patch_type {patch_type!r}: use one of {', '.join(PATCH_CONTENT_TYPES)}")
        query: dict[str, QueryValue] = {}
        if field_manager:
            query["fieldManager"] = field_manager
        if patch_type == "apply":
            if not field_manager:
                raise ValueError("server-side apply needs a field_manager")
            if force:
                query["force"] = True
        elif force:
            raise ValueError("force is only valid for server-side apply (patch_type='apply')")
        return await self.request(
            "PATCH",
            resource.path(namespace=namespace, name=name, subresource=subresource),
            query=query,
            body=body,
            content_type=PATCH_CONTENT_TYPES[patch_type],
        )

    async def replace(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        name: str,
        body: Mapping[str, Any],
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT (optimistic concurrency: a stale ``metadata.resourceVersion`` in ``body`` gives 409 Conflict)."""
        query: dict[str, QueryValue] = {"fieldManager": field_manager} if field_manager else {}
        return await self.request(
            "PUT", resource.path(namespace=namespace, name=name, subresource=subresource), query=query, body=body
        )

    async def delete(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        name: str,
        propagation_policy: Literal["Foreground", "Background", "Orphan"] | None = None,
        preconditions: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """DELETE; ``preconditions`` (``uid`` / ``resourceVersion``) guard against deleting a replaced object."""
        options: dict[str, Any] = {}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", **options} if options else None
        return await self.request("DELETE", resource.path(namespace=namespace, name=name), body=body)

    # Last on purpose: a method named ``list`` shadows the builtin in annotations of the methods after it.
    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> dict[str, Any]:
        """One page of a list; the caller follows ``metadata.continue``. ``namespace=None``: all namespaces."""
        query: dict[str, QueryValue] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if limit is not None:
            query["limit"] = limit
        if continue_:
            query["continue"] = continue_
        return await self.request("GET", resource.path(namespace=namespace), query=query)
