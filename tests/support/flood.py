"""Flood a /metrics URL with concurrent scrapes from a process of its own, and print what it saw as JSON.

Why a separate process: Prometheus scrapes from elsewhere. Scraping from threads of the process under test would
make the scrapers compete with its health thread for the same interpreter lock, which measures the scrapers, not
the operator. Used by tests/unit/manager/metrics/test_scrape_flood.py:

    python -m tests.support.flood URL --token T --concurrency 32 --seconds 4
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import time
from typing import Any

import aiohttp

from harness.scrape import client_context


async def flood(url: str, *, token: str | None, concurrency: int, seconds: float) -> dict[str, Any]:
    """``concurrency`` scrapers, each scraping again as soon as it has an answer, for ``seconds``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    latencies: list[float] = []
    statuses: collections.Counter[int] = collections.Counter()
    sizes: set[int] = set()
    deadline = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency, ssl=client_context() if url.startswith("https:") else False)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def scraper() -> None:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=30)) as response:
                    body = await response.read()
                latencies.append(time.perf_counter() - started)
                statuses[response.status] += 1
                sizes.add(len(body))

        await asyncio.gather(*(scraper() for _ in range(concurrency)))
    latencies.sort()
    return {
        "scrapes": len(latencies),
        "statuses": {str(k): v for k, v in statuses.items()},
        "p50_s": statistics.median(latencies),
        "p99_s": latencies[int(0.99 * (len(latencies) - 1))],
        "max_s": latencies[-1],
        "max_bytes": max(sizes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--token")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    result = asyncio.run(flood(args.url, token=args.token, concurrency=args.concurrency, seconds=args.seconds))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
