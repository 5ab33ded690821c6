"""Flood a TLS port with idle connections and made-up tokens from a process of its own; print what happened as JSON.

What any pod in the cluster can do to the operator's /metrics port without a token: ``--bare`` TCP connections that
never start a handshake, ``--tls`` connections that finish the handshake and then send nothing, and ``--tokens``
requests for /metrics each with a different made-up bearer token (over 50 kept-alive connections). All are held
``--hold`` seconds; the report says how many idle connections the server had closed by then, and the statuses of
the token requests.

Used by tests/unit/manager/test_connection_flood.py and the measurements in docs/monitoring.md:

    python -m tests.support.connflood HOST PORT --bare 2000 --tls 2000 --tokens 2000 --hold 5

A separate process, as test_scrape_flood.py explains: the client must not share the interpreter of what it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import ssl
import sys
import time
from typing import Any

import aiohttp

_OPENING_AT_ONCE = 200
_TOKEN_CONNECTIONS = 50


def _insecure() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the flood does not care whose certificate it is
    return context


async def _open(host: str, port: int, context: ssl.SSLContext | None, gate: asyncio.Semaphore) -> Any:
    async with gate:
        try:
            return await asyncio.wait_for(asyncio.open_connection(host, port, ssl=context), 20)
        except (OSError, TimeoutError):
            return None


async def _junk_tokens(host: str, port: int, count: int) -> collections.Counter[str]:
    """``count`` requests for /metrics, each with another made-up token, over 50 kept-alive connections."""
    statuses: collections.Counter[str] = collections.Counter()
    connector = aiohttp.TCPConnector(limit=_TOKEN_CONNECTIONS, ssl=_insecure())
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(index: int) -> None:
            headers = {"Authorization": f"Bearer junk-{index}-{time.time_ns()}"}
            try:
                timeout = aiohttp.ClientTimeout(total=20)
                async with session.get(f"https://{host}:{port}/metrics", headers=headers, timeout=timeout) as answer:
                    await answer.read()
                    statuses[str(answer.status)] += 1
            except (aiohttp.ClientError, OSError, TimeoutError) as err:
                statuses[type(err).__name__] += 1

        await asyncio.gather(*(one(i) for i in range(count)))
    return statuses


async def _poke(reader: asyncio.StreamReader) -> None:
    """Read what the server sent, if anything: an EOF or a reset marks the connection closed by the server."""
    with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
        await asyncio.wait_for(reader.read(1), 0.5)


def _closed(reader: asyncio.StreamReader) -> bool:
    return reader.at_eof() or reader.exception() is not None


async def flood(host: str, port: int, *, bare: int, tls: int, tokens: int, hold: float) -> dict[str, Any]:
    gate = asyncio.Semaphore(_OPENING_AT_ONCE)
    started = time.monotonic()
    opened_bare = [c for c in await asyncio.gather(*(_open(host, port, None, gate) for _ in range(bare))) if c]
    context = _insecure()
    opened_tls = [c for c in await asyncio.gather(*(_open(host, port, context, gate) for _ in range(tls))) if c]
    statuses = await _junk_tokens(host, port, tokens)
    flooded = time.monotonic() - started
    await asyncio.sleep(hold)
    await asyncio.gather(*(_poke(reader) for reader, _ in opened_bare + opened_tls))
    result = {
        "bare_opened": len(opened_bare),
        "tls_opened": len(opened_tls),
        "bare_closed_by_server": sum(_closed(reader) for reader, _ in opened_bare),
        "tls_closed_by_server": sum(_closed(reader) for reader, _ in opened_tls),
        "token_statuses": dict(statuses),
        "flood_seconds": round(flooded, 2),
    }
    for _, writer in opened_bare + opened_tls:
        writer.transport.abort()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--bare", type=int, default=0)
    parser.add_argument("--tls", type=int, default=0)
    parser.add_argument("--tokens", type=int, default=0)
    parser.add_argument("--hold", type=float, default=0.0)
    args = parser.parse_args()
    result = asyncio.run(flood(args.host, args.port, bare=args.bare, tls=args.tls, tokens=args.tokens, hold=args.hold))
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
