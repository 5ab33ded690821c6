"""CPU per request of ``KubeClient``, with and without the per-request environment lookups of aiohttp's ``trust_env``.

Why: the bulk-create profile (bench/README.md, "Profile") showed aiohttp reading ``~/.netrc`` and the proxy variables
in a thread-pool executor on every request of the session kubernetes_asyncio creates; ``KubeClient.create`` now swaps
that session for one that does not (``kube.client._read_environment_once``). This measures both in one run, against a
local aiohttp server in the same process (so the figure includes the server's share, equal in both modes).

Run: ``.venv/bin/python -m bench.request_cost [--requests 2000] [--rounds 3]``; prints the median per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from unittest import mock

from aiohttp import web
from aiohttp.test_utils import TestServer

from webserver_operator.core.settings import ClientSettings
from webserver_operator.kube import client as kube_client
from webserver_operator.kube.library import Configuration


async def _cpu_ms_per_request(*, library_session: bool, requests: int) -> float:
    async def answer(_: web.Request) -> web.Response:
        return web.json_response({"kind": "Service", "metadata": {"name": "web"}})

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", answer)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    configuration = Configuration(host=str(server.make_url("")).rstrip("/"))
    if library_session:
        with mock.patch.object(kube_client, "_read_environment_once", return_value=None):
            client = await kube_client.KubeClient.create(configuration, settings=ClientSettings())
    else:
        client = await kube_client.KubeClient.create(configuration, settings=ClientSettings())
    in_flight = asyncio.Semaphore(8)

    async def one() -> None:
        async with in_flight:
            await client.request("GET", "/api/v1/namespaces/default/services/web")

    try:
        start = time.process_time()
        await asyncio.gather(*(one() for _ in range(requests)))
        return 1000 * (time.process_time() - start) / requests
    finally:
        await client.close()
        await server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"library session (trust_env=True)": [], "KubeClient's session": []}
    for _ in range(args.rounds):  # alternating, so drift in machine load hits both alike
        for label, library_session in (("library session (trust_env=True)", True), ("KubeClient's session", False)):
            results[label].append(
                asyncio.run(_cpu_ms_per_request(library_session=library_session, requests=args.requests))
            )
    for label, values in results.items():
        each = ", ".join(f"{v:.3f}" for v in values)
        print(f"{label}: median {statistics.median(values):.3f} ms CPU per request ({each})")


if __name__ == "__main__":
    main()
