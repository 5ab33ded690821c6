"""A small admin HTTP client for the harness: JSON in, JSON out, with the kubeconfig's client certificate.

Why not the operator's ``KubeClient``: the harness judges the operator, so it must not share its client code (a bug
there would hide itself). Why not kubernetes_asyncio's generated classes: the harness reads and writes hundreds of
objects a second as plain dicts and needs the HTTP status of every failure, which the generated models obscure.

Used by ``workload`` (the churn), ``observe`` (state), ``identity`` (setup) and ``scenario``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

GROUP = "web.webserver-operator.dev"
API_VERSION_WS = f"{GROUP}/v1"
WEBSERVERS = f"/apis/{GROUP}/v1"
APPS = "/apis/apps/v1"
CORE = "/api/v1"


def ws_path(namespace: str, name: str = "") -> str:
    return f"{WEBSERVERS}/namespaces/{namespace}/webservers" + (f"/{name}" if name else "")


def deployment_path(namespace: str, name: str = "") -> str:
    return f"{APPS}/namespaces/{namespace}/deployments" + (f"/{name}" if name else "")


def service_path(namespace: str, name: str = "") -> str:
    return f"{CORE}/namespaces/{namespace}/services" + (f"/{name}" if name else "")


class ApiError(Exception):
    """A request failed: ``status`` is the HTTP status (0 when no response arrived)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


@dataclass(frozen=True)
class Endpoint:
    """Where the API server is and how to authenticate, read from a kubeconfig's current context."""

    server: str
    ca_file: str
    cert_file: str | None
    key_file: str | None
    token: str | None

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Endpoint:
        config = yaml.safe_load(path.read_text())
        ctx_name = config["current-context"]
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == ctx["user"])
        return cls(
            server=cluster["server"],
            ca_file=_file(cluster, "certificate-authority"),
            cert_file=_file(user, "client-certificate") if _has(user, "client-certificate") else None,
            key_file=_file(user, "client-key") if _has(user, "client-key") else None,
            token=user.get("token"),
        )


def _has(section: dict[str, Any], key: str) -> bool:
    return key in section or f"{key}-data" in section


def _file(section: dict[str, Any], key: str) -> str:
    """A path for ``key`` whether the kubeconfig gives a file or inline base64 ``<key>-data``."""
    if key in section:
        return str(section[key])
    data = base64.b64decode(section[f"{key}-data"])
    with tempfile.NamedTemporaryFile(prefix="chaos-", suffix=".pem", delete=False) as fh:
        fh.write(data)
        return fh.name


class KubeApi:
    """``async with KubeApi(endpoint) as api``: JSON requests with a per-request timeout."""

    def __init__(self, endpoint: Endpoint, *, timeout: float = 10.0, user_agent: str = "chaos-harness") -> None:
        self.endpoint = endpoint
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeApi:
        ctx = ssl.create_default_context(cafile=self.endpoint.ca_file)
        if self.endpoint.cert_file and self.endpoint.key_file:
            ctx.load_cert_chain(self.endpoint.cert_file, self.endpoint.key_file)
        headers = {"User-Agent": self._user_agent, "Accept": "application/json"}
        if self.endpoint.token:
            headers["Authorization"] = f"Bearer {self.endpoint.token}"
        self._session = aiohttp.ClientSession(
            base_url=self.endpoint.server,
            connector=aiohttp.TCPConnector(ssl=ctx, limit=32),
            headers=headers,
            timeout=self._timeout,
        )
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """The decoded JSON response; ``ApiError`` for any HTTP error, timeout or connection failure."""
        assert self._session is not None, "use KubeApi as an async context manager"
        data = None if body is None else json.dumps(body)
        try:
            async with self._session.request(
                method, path, data=data, params=params, headers={"Content-Type": content_type}
            ) as resp:
                text = await resp.text()
                if resp.status >= 400:
                    message = text
                    with contextlib.suppress(ValueError):
                        message = json.loads(text).get("message", text)
                    raise ApiError(resp.status, message)
                try:
                    result: dict[str, Any] = json.loads(text) if text else {}
                except ValueError:
                    result = {"text": text}  # /readyz and friends answer plain text
                return result
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise ApiError(0, f"{method} {path}: {type(err).__name__}: {err}") from err

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        return await self.request("GET", path, params=params or None)

    async def get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.get(path)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def items(self, path: str, **params: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = (await self.get(path, **params)).get("items") or []
        return result

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    async def delete(self, path: str) -> None:
        try:
            await self.request("DELETE", path)
        except ApiError as err:
            if err.status != 404:
                raise

    async def apply_object(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create ``body`` at the collection ``path``, or leave an existing object of that name as it is."""
        try:
            return await self.create(path, body)
        except ApiError as err:
            if err.status != 409:
                raise
            return await self.get(f"{path}/{body['metadata']['name']}")
