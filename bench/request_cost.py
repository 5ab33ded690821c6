"""CPU per request of ``KubeClient``: a GET and a POST of a Deployment-sized body, on each event loop.

Why: the bulk-create profile (bench/README.md, "Profile") showed the request path as the largest share of the
operator's CPU. This measures it alone, against a local aiohttp server in the same process (so the figure includes
the server's share, equal in every mode), alternating the modes within one run so that drift in machine load hits
all of them alike: ``KubeClient`` on the standard library's loop and on uvloop (``manager.eventloop``) and, with
``--aiohttp``, the same requests sent by a bare aiohttp client session on uvloop, the transport ``KubeClient`` used
before ``kube.transport.connection`` (issue 19; without the client's metrics, token and retry bookkeeping, so a lower
bound).

Run: ``.venv/bin/python -m bench.request_cost [--requests 2000] [--rounds 3] [--aiohttp]``; prints the median per
mode. Run the same file in two checkouts to compare two versions of the request path.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

import aiohttp
import uvloop
from aiohttp import web
from aiohttp.test_utils import TestServer

from webserver_operator.core.settings import ClientSettings
from webserver_operator.kube import client as kube_client
from webserver_operator.kube import jsoncodec
from webserver_operator.kube.library import Configuration

#: About the size of the Deployment the operator creates per WebServer (labels, owner reference, one container).
BODY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "default",
        "labels": {f"app.kubernetes.io/{k}": "webserver-operator" for k in ("name", "instance", "managed-by")},
        "ownerReferences": [
            {"apiVersion": "web.webserver-operator.dev/v1alpha1", "kind": "WebServer", "name": "web", "uid": "u" * 36}
        ],
    },
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/instance": "web"}},
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/instance": "web", "app.kubernetes.io/name": "webserver"}},
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": "nginx:1.27",
                        "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                    }
                ],
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
            },
        },
    },
}


async def _cpu_ms_per_request(*, bare_aiohttp: bool, requests: int) -> float:
    async def answer(request: web.Request) -> web.Response:
        if request.method == "POST":
            return web.json_response(await request.json(), status=201)
        return web.json_response({"kind": "Service", "metadata": {"name": "web"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    url = str(server.make_url("")).rstrip("/")
    session = aiohttp.ClientSession() if bare_aiohttp else None
    client = await kube_client.KubeClient.create(Configuration(host=url), settings=ClientSettings())
    in_flight = asyncio.Semaphore(8)
    deployments, service = "/apis/apps/v1/namespaces/default/deployments", "/api/v1/namespaces/default/services/web"

    async def one(i: int) -> None:
        async with in_flight:
            if session is not None:
                method, path = ("POST", deployments) if i % 2 else ("GET", service)
                data = jsoncodec.encode(BODY) if i % 2 else None
                headers = {"Content-Type": "application/json"} if data else {}
                async with session.request(method, f"{url}{path}", data=data, headers=headers) as response:
                    jsoncodec.decode(await response.read())
            elif i % 2:
                await client.request("POST", deployments, body=BODY)
            else:
                await client.request("GET", service)

    try:
        start = time.process_time()
        await asyncio.gather(*(one(i) for i in range(requests)))
        return 1000 * (time.process_time() - start) / requests
    finally:
        await client.close()
        if session is not None:
            await session.close()
        await server.close()


def _run(factory: Callable[[], asyncio.AbstractEventLoop], *, bare_aiohttp: bool, requests: int) -> float:
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_cpu_ms_per_request(bare_aiohttp=bare_aiohttp, requests=requests))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per mode and round, half GET, half POST")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--aiohttp", action="store_true", help="also measure a bare aiohttp session (the old path)")
    args = parser.parse_args()
    modes: list[tuple[str, Callable[[], asyncio.AbstractEventLoop], bool]] = [
        ("asyncio loop", asyncio.new_event_loop, False),
        ("uvloop", uvloop.new_event_loop, False),
    ]
    if args.aiohttp:
        modes.append(("uvloop, bare aiohttp session", uvloop.new_event_loop, True))
    results: dict[str, list[float]] = {label: [] for label, _, _ in modes}
    for _ in range(args.rounds):  # alternating, so drift in machine load hits every mode alike
        for label, factory, bare_aiohttp in modes:
            results[label].append(_run(factory, bare_aiohttp=bare_aiohttp, requests=args.requests))
    for label, values in results.items():
        each = ", ".join(f"{v:.3f}" for v in values)
        print(f"{label}: median {statistics.median(values):.3f} ms CPU per request ({each})")


if __name__ == "__main__":
    main()
