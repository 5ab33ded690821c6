"""The benchmark's workload: WebServer bodies, and many creates or patches with a bounded number in flight.

Why bounded concurrency and retries: the point is to load the system under test, not to make the benchmark's own
requests fail; a 429 (API priority and fairness) or a 5xx is retried with a short backoff and counted, so a run still
completes and the report shows that the server pushed back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.kubeapi import ApiError, KubeApi

Body = dict[str, Any]
NAMESPACE = "bench"
PROBE = "probe"
IMAGE_V1 = "nginx:1.27"
IMAGE_V2 = "nginx:1.28"
WS_PATH = "/apis/web.webserver-operator.dev/v1/namespaces/{ns}/webservers"
PATHS = {
    "ws": WS_PATH,
    "dep": "/apis/apps/v1/namespaces/{ns}/deployments",
    "svc": "/api/v1/namespaces/{ns}/services",
}
MERGE = "application/merge-patch+json"


def ws_name(i: int) -> str:
    return f"ws-{i:05d}"


def webserver(name: str, *, replicas: int, image: str = IMAGE_V1) -> Body:
    return {
        "apiVersion": "web.webserver-operator.dev/v1",
        "kind": "WebServer",
        "metadata": {"name": name},
        "spec": {"image": image, "replicas": replicas},
    }


def path(kind: str, name: str | None = None, namespace: str = NAMESPACE) -> str:
    base = PATHS[kind].format(ns=namespace)
    return base if name is None else f"{base}/{name}"


@dataclass
class Fanout:
    """Send times per name, plus the retries the server asked for."""

    sent: dict[str, float] = field(default_factory=dict)
    retries: int = 0


async def _send(fanout: Fanout, name: str, request: Callable[[str], Any]) -> None:
    for attempt in range(6):
        fanout.sent.setdefault(name, time.time())
        try:
            await request(name)
            return
        except ApiError as err:
            if err.status not in (429, 500, 503, 504) or attempt == 5:
                raise
            fanout.retries += 1
            await asyncio.sleep(0.1 * 2**attempt)


async def fan_out(api: KubeApi, names: Iterable[str], request: Callable[[str], Any], *, concurrency: int) -> Fanout:
    """Run ``request(name)`` for every name with at most ``concurrency`` in flight."""
    fanout = Fanout()
    queue: asyncio.Queue[str] = asyncio.Queue()
    for name in names:
        queue.put_nowait(name)

    async def worker() -> None:
        while True:
            try:
                name = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await _send(fanout, name, request)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return fanout


async def create_webservers(api: KubeApi, names: Iterable[str], *, replicas: int, concurrency: int) -> Fanout:
    return await fan_out(
        api,
        names,
        lambda name: api.request("POST", path("ws"), body=webserver(name, replicas=replicas)),
        concurrency=concurrency,
    )


async def patch_webservers(api: KubeApi, names: Iterable[str], patch: Body, *, concurrency: int) -> Fanout:
    return await fan_out(
        api,
        names,
        lambda name: api.request("PATCH", path("ws", name), body=patch, content_type=MERGE),
        concurrency=concurrency,
    )
