"""A small admin client for the Kubernetes API: aiohttp with the kubeconfig's credentials, JSON in and out.

Why not the operator's ``KubeClient``: the tests, the benchmark and the chaos harness judge the operator from the
outside, so they must not share its client code (a bug there would hide itself). Why not kubernetes_asyncio's
generated classes: they read and write hundreds of objects a second as plain dicts, watch thousands of objects as
lines, and need the HTTP status of every failure, which the generated models obscure.

Every failure is an ``ApiError`` with the HTTP status, 0 when no response arrived (timeout, connection refused while
the API server restarts). Used by the chaos harness (churn, observation, identities), the benchmark (bulk writes,
list + watch tracking, API metrics) and the tests that set up identities.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yaml
from aiohttp.client_proto import ResponseHandler

Body = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
GROUP = "web.webserver-operator.dev"
API_VERSION_WS = f"{GROUP}/v1"
WEBSERVERS = f"/apis/{GROUP}/v1"
APPS = "/apis/apps/v1"
CORE = "/api/v1"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
#: How long leaving a ``KubeApi`` waits for the server to answer the TLS close of its connections, then aborts them.
CLOSE_GRACE_SECONDS = 0.5
#: Connections whose sockets are closed leave the tracked set once it holds this many (a long chaos run opens many).
_PRUNE_AT = 256


def ws_path(namespace: str, name: str = "") -> str:
    return f"{WEBSERVERS}/namespaces/{namespace}/webservers" + (f"/{name}" if name else "")


def deployment_path(namespace: str, name: str = "") -> str:
    return f"{APPS}/namespaces/{namespace}/deployments" + (f"/{name}" if name else "")


def service_path(namespace: str, name: str = "") -> str:
    return f"{CORE}/namespaces/{namespace}/services" + (f"/{name}" if name else "")


class ApiError(Exception):
    """A request failed: ``status`` is the HTTP status (0 when no response arrived), the text the server's message."""

    def __init__(self, status: int, message: str, *, method: str = "", path: str = "") -> None:
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}HTTP {status}: {message}" if status else f"{where}{message}")
        self.status = status


def _server_message(text: str) -> str:
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(text).get("message", text))
    return text


@dataclass(frozen=True)
class Endpoint:
    """Where the API server is and how to authenticate, read from a kubeconfig's current context."""

    server: str
    ca_file: str | None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure: bool = False

    @classmethod
    def from_kubeconfig(cls, path: Path, *, loopback_only: str = "") -> Endpoint:
        """The current context's endpoint.

        ``loopback_only``: refuse any server not on this machine, with that reason (the benchmark creates and deletes
        thousands of objects and must never reach a real cluster).
        """
        config = yaml.safe_load(path.read_text())
        ctx_name = config["current-context"]
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == ctx["user"])
        server = str(cluster["server"]).rstrip("/")
        if loopback_only and (urlsplit(server).hostname or "") not in LOOPBACK:
            raise ValueError(f"{path} points at {server}: {loopback_only}")
        return cls(
            server=server,
            ca_file=_file(cluster, "certificate-authority"),
            cert_file=_file(user, "client-certificate"),
            key_file=_file(user, "client-key"),
            token=user.get("token"),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
        )

    def require_ca_file(self) -> str:
        """The CA file, for callers that hand it to another client (a ServiceAccount's kubeconfig or token dir)."""
        if self.ca_file is None:
            raise ValueError(
                f"the kubeconfig for {self.server} names no certificate-authority: "
                "use the control plane's own admin kubeconfig (hack/cluster.sh kubeconfig)"
            )
        return self.ca_file

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def _file(section: dict[str, Any], key: str) -> str | None:
    """A path for ``key`` whether the kubeconfig gives a file or inline base64 ``<key>-data``; None when neither."""
    if section.get(key):
        return str(section[key])
    if not section.get(f"{key}-data"):
        return None
    data = base64.b64decode(section[f"{key}-data"])
    with tempfile.NamedTemporaryFile(prefix="kubeapi-", suffix=".pem", delete=False) as fh:
        fh.write(data)
        return fh.name


class KubeApi:
    """``async with KubeApi(endpoint) as api``: JSON requests and line-by-line watches over one aiohttp session.

    ``timeout`` is the default total time of one request (None: none, for callers that set one per request);
    watches are bounded by their server-side ``timeoutSeconds`` instead.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout: float | None = 10.0,
        max_connections: int = 32,
        user_agent: str = "webserver-harness",
    ) -> None:
        self.endpoint = endpoint
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=10)
        self._max = max_connections
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        # Every connection the pool handed out, held until its socket is closed: see ``__aexit__``. Taken when the
        # connection is handed out, not when an answer arrives: a watch cancelled before its answer's head closes its
        # connection too. Strong references: a connection closed on the way out may have no other holder while its
        # TLS close is in flight, and a weak set lost it (the exit then returned with its socket open).
        self._protocols: set[ResponseHandler] = set()

    async def __aenter__(self) -> KubeApi:
        headers = {"User-Agent": self._user_agent, "Accept": "application/json"}
        if self.endpoint.token:
            headers["Authorization"] = f"Bearer {self.endpoint.token}"
        self._session = aiohttp.ClientSession(
            base_url=self.endpoint.server,
            connector=_TrackingConnector(self._protocols, ssl=self.endpoint.ssl_context(), limit=self._max),
            headers=headers,
            timeout=self._timeout,
            read_bufsize=2**20,  # watch lines are whole objects
        )
        return self

    async def __aexit__(self, *_: object) -> None:
        """Close the session and return once every socket is closed.

        aiohttp's close waits only for the connections in its pool, not for those a response closed on its way out
        (a watch cancelled mid-stream, a timed-out request: aio-libs/aiohttp#1925), whose TLS close still waits for
        the server's answer. A loop that ends then (``asyncio.run`` of a chaos run inside the test process) leaves
        their sockets open, and Python warns about unclosed transports in whatever runs when they are collected.
        """
        if self._session is None:
            return
        await self._session.close()
        for abort in (False, True):
            closing = [done for proto in self._protocols if (done := proto.closed) is not None and not done.done()]
            if not closing:
                return
            if abort:
                for proto in self._protocols:
                    if proto.transport is not None:
                        proto.transport.abort()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_GRACE_SECONDS):
                    await asyncio.gather(*closing, return_exceptions=True)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("KubeApi used outside `async with KubeApi(endpoint) as api`")
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        seconds: float | None = None,
    ) -> Body:
        """The decoded JSON response (``{"text": ...}`` for a plain-text answer such as /readyz's or /metrics').

        ``ApiError`` for any HTTP error, timeout or connection failure; ``seconds`` overrides the client's default.
        """
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if body is not None else {}
        per_request = aiohttp.ClientTimeout(total=seconds) if seconds is not None else None
        try:
            async with self.session.request(
                method, path, data=data, params=params, headers=headers, timeout=per_request
            ) as resp:
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise ApiError(0, f"{type(err).__name__}: {err}", method=method, path=path) from err
        if resp.status >= 400:
            raise ApiError(resp.status, _server_message(text), method=method, path=path)
        try:
            result: Body = json.loads(text) if text else {}
        except ValueError:
            result = {"text": text}
        return result

    async def text(self, path: str, *, seconds: float = 30) -> str:
        """The body of a GET that answers plain text (``/metrics``); ``ApiError`` as for ``request``."""
        return str((await self.request("GET", path, seconds=seconds)).get("text", ""))

    async def get(self, path: str, **params: str) -> Body:
        return await self.request("GET", path, params=params or None)

    async def get_or_none(self, path: str) -> Body | None:
        try:
            return await self.get(path)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def items(self, path: str, **params: str) -> list[Body]:
        result: list[Body] = (await self.get(path, **params)).get("items") or []
        return result

    async def create(self, path: str, body: Body) -> Body:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, patch: Body) -> Body:
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def delete(self, path: str) -> None:
        """Delete the object at ``path``; one that is already gone is not an error."""
        try:
            await self.request("DELETE", path)
        except ApiError as err:
            if err.status != 404:
                raise

    async def apply_object(self, path: str, body: Body) -> Body:
        """Create ``body`` at the collection ``path``, or leave an existing object of that name as it is."""
        try:
            return await self.create(path, body)
        except ApiError as err:
            if err.status != 409:
                raise
            return await self.get(f"{path}/{body['metadata']['name']}")

    async def watch(
        self, path: str, *, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[tuple[float, Body]]:
        """Yield ``(receive time, event)`` from one watch request until the server ends it."""
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=timeout_seconds + 30)
        async with self.session.get(path, params=query, timeout=timeout) as resp:
            if resp.status >= 400:
                raise ApiError(resp.status, _server_message(await resp.text()), method="WATCH", path=path)
            async for line in resp.content:
                if line.strip():
                    yield time.time(), json.loads(line)


def _socket_closed(proto: ResponseHandler) -> bool:
    done = proto.closed
    return done is None or done.done()


class _TrackingConnector(aiohttp.TCPConnector):
    """A connector that adds every connection it hands out to ``tracked`` (pruned of closed ones as it grows)."""

    def __init__(self, tracked: set[ResponseHandler], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tracked = tracked

    async def connect(self, req: Any, traces: Any, timeout: aiohttp.ClientTimeout) -> Any:  # noqa: ASYNC109 (aiohttp's signature)
        connection = await super().connect(req, traces, timeout)
        if connection.protocol is not None:
            if len(self._tracked) >= _PRUNE_AT:
                for proto in [proto for proto in self._tracked if _socket_closed(proto)]:
                    self._tracked.discard(proto)
            self._tracked.add(connection.protocol)
        return connection
