"""CPU per request of ``KubeClient``: a GET and a POST of a Deployment-sized body, on each event loop.

Why: the bulk-create profile (bench/README.md, "Profile") showed the request path as the largest share of the
operator's CPU. This measures it alone, against a local aiohttp server in the same process (so the figure includes
the server's share, equal in every mode), alternating the modes within one run so that drift in machine load hits
all of them alike: the standard library's loop and uvloop (``manager.eventloop``) and, with ``--library-session``,
the session kubernetes_asyncio creates (``trust_env=True``: aiohttp reads ``~/.netrc`` and the proxy variables in a
thread-pool executor on every request; ``kube.client._read_environment_once`` replaces it).

Run: ``.venv/bin/python -m bench.request_cost [--requests 2000] [--rounds 3] [--library-session]``; prints the median
per mode. Run the same file in two checkouts to compare two versions of the request path.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from unittest import mock

import uvloop
from aiohttp import web
from aiohttp.test_utils import TestServer

from webserver_operator.core.settings import ClientSettings
from webserver_operator.kube import client as kube_client
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


async def _cpu_ms_per_request(*, library_session: bool, requests: int) -> float:
    async def answer(request: web.Request) -> web.Response:
        if request.method == "POST":
            return web.json_response(await request.json(), status=201)
        return web.json_response({"kind": "Service", "metadata": {"name": "web"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    configuration = Configuration(host=str(server.make_url("")).rstrip("/"))
    if library_session:
        with mock.patch.object(kube_client, "_read_environment_once", return_value=None):
            client = await kube_client.KubeClient.create(configuration, settings=ClientSettings())
    else:
        client = await kube_client.KubeClient.create(configuration, settings=ClientSettings())
    in_flight = asyncio.Semaphore(8)

    async def one(i: int) -> None:
        async with in_flight:
            if i % 2:
                await client.request("POST", "/apis/apps/v1/namespaces/default/deployments", body=BODY)
            else:
                await client.request("GET", "/api/v1/namespaces/default/services/web")

    try:
        start = time.process_time()
        await asyncio.gather(*(one(i) for i in range(requests)))
        return 1000 * (time.process_time() - start) / requests
    finally:
        await client.close()
        await server.close()


def _run(factory: Callable[[], asyncio.AbstractEventLoop], *, library_session: bool, requests: int) -> float:
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_cpu_ms_per_request(library_session=library_session, requests=requests))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per mode and round, half GET, half POST")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--library-session", action="store_true", help="also measure kubernetes_asyncio's session")
    args = parser.parse_args()
    modes: list[tuple[str, Callable[[], asyncio.AbstractEventLoop], bool]] = [
        ("asyncio loop", asyncio.new_event_loop, False),
        ("uvloop", uvloop.new_event_loop, False),
    ]
    if args.library_session:
        modes.append(("asyncio loop, library session (trust_env=True)", asyncio.new_event_loop, True))
    results: dict[str, list[float]] = {label: [] for label, _, _ in modes}
    for _ in range(args.rounds):  # alternating, so drift in machine load hits every mode alike
        for label, factory, library_session in modes:
            results[label].append(_run(factory, library_session=library_session, requests=args.requests))
    for label, values in results.items():
        each = ", ".join(f"{v:.3f}" for v in values)
        print(f"{label}: median {statistics.median(values):.3f} ms CPU per request ({each})")


if __name__ == "__main__":
    main()
