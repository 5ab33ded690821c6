"""The benchmark's own API client: aiohttp with the kubeconfig's credentials, JSON in and out, watches as lines.

Why not the operator's client: the benchmark measures the operator from the outside and must keep working while the
operator's internals change; a bug in the operator's client must not hide in its own measurement. Why not kubectl:
bulk creates at 50 in flight and watches over thousands of objects need one long-lived process. Only loopback API
servers are accepted (the benchmark's clusters are local by design).

Called by the tracker (list + watch), the scenarios (creates, patches, deletes) and the report of API metrics.
"""

from __future__ import annotations

import base64
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

Body = dict[str, Any]
USER_AGENT = "webserver-bench"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class ApiError(Exception):
    """An HTTP error from the API server; ``status`` is the HTTP code and the text is the server's message."""

    def __init__(self, status: int, method: str, path: str, text: str) -> None:
        try:
            message = json.loads(text).get("message", text)
        except (ValueError, AttributeError):
            message = text
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status


@dataclass(frozen=True)
class Endpoint:
    server: str
    ssl_context: ssl.SSLContext
    headers: dict[str, str]


def _material(entry: dict[str, Any], key: str, workdir: Path) -> str | None:
    """Path of a PEM file given as ``key`` (a path) or ``key-data`` (base64) in a kubeconfig entry."""
    if entry.get(f"{key}-data"):
        path = workdir / key
        path.write_bytes(base64.b64decode(entry[f"{key}-data"]))
        return str(path)
    value = entry.get(key)
    return str(value) if value else None


def load_endpoint(kubeconfig: Path) -> Endpoint:
    """Server, TLS context and auth headers of the kubeconfig's current context; refuses non-loopback servers."""
    config = yaml.safe_load(kubeconfig.read_text())
    current = config.get("current-context")
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    server = str(cluster["server"]).rstrip("/")
    host = urlsplit(server).hostname or ""
    if host not in LOOPBACK:
        raise ValueError(
            f"{kubeconfig} points at {server}: the benchmark only talks to a local control plane on 127.0.0.1 "
            "(it creates and deletes thousands of objects); use the cluster that `python -m bench` starts"
        )
    with tempfile.TemporaryDirectory(prefix="bench-kubeconfig-") as tmp:
        workdir = Path(tmp)
        ctx = ssl.create_default_context(cafile=_material(cluster, "certificate-authority", workdir))
        if cluster.get("insecure-skip-tls-verify"):
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        cert = _material(user, "client-certificate", workdir)
        key = _material(user, "client-key", workdir)
        if cert and key:
            ctx.load_cert_chain(cert, key)
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if user.get("token"):
        headers["Authorization"] = f"Bearer {user['token']}"
    return Endpoint(server=server, ssl_context=ctx, headers=headers)


class Api:
    """One aiohttp session to the API server; use as ``async with Api(endpoint) as api``."""

    def __init__(self, endpoint: Endpoint, *, max_connections: int = 200) -> None:
        self.endpoint = endpoint
        self._max = max_connections
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        connector = aiohttp.TCPConnector(limit=self._max, ssl=self.endpoint.ssl_context)
        self._session = aiohttp.ClientSession(
            base_url=self.endpoint.server,
            headers=self.endpoint.headers,
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None),
            read_bufsize=2**20,  # watch lines are whole objects
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("Api used outside `async with`")
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Body | None = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        seconds: float = 60,
    ) -> Body:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if body is not None else {}
        async with self.session.request(
            method,
            path,
            data=data,
            headers=headers,
            params=query,
            timeout=aiohttp.ClientTimeout(total=seconds),
        ) as resp:
            text = await resp.text()
            if resp.status >= 400:
                raise ApiError(resp.status, method, path, text)
            result: Body = json.loads(text) if text else {}
            return result

    async def text(self, path: str, *, seconds: float = 30) -> str:
        async with self.session.get(path, timeout=aiohttp.ClientTimeout(total=seconds)) as resp:
            text = await resp.text()
            if resp.status >= 400:
                raise ApiError(resp.status, "GET", path, text)
            return text

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
        async with self.session.get(
            path, params=query, timeout=aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 30)
        ) as resp:
            if resp.status >= 400:
                raise ApiError(resp.status, "WATCH", path, await resp.text())
            async for line in resp.content:
                if line.strip():
                    yield time.time(), json.loads(line)
