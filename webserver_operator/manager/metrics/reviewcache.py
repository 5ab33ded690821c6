"""A small async cache for review answers: a time to live per answer, one request in flight per key, bounded.

Why: Prometheus scrapes every 30 s with the same token, and a flood of scrapes must not become a flood of
TokenReviews and SubjectAccessReviews at the API server. k8s.io/apiserver, which controller-runtime's metrics
filter uses, caches token answers for 1 minute (authenticated or not), allowed access for 5 minutes and denied
access for 30 seconds, and sends one review per token at a time; ``manager.metrics.auth`` does the same with this
cache. Errors are not cached: the next scrape asks again.

Two more rules, because every pod may send requests with made-up tokens:

- Positive and negative answers (``positive(answer)``: a token that authenticated, an access allowed) are bounded
  separately, each to ``max_entries``: a flood of junk tokens fills and evicts only the negative side and cannot push
  Prometheus' identity out of the cache (with one shared bound, 4096 junk tokens did).
- A fetch lives only while someone waits for it: when every caller waiting for a key has gone (the scraper hung up
  and aiohttp cancelled its handler), the review is cancelled, so no work keeps running for clients that left.

Hand-written rather than a library: ``cachetools`` has no single flight for coroutines and ``async-lru`` one time to
live per cache, while an allowed answer must live longer than a denied one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["ReviewCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ReviewCache(Generic[K, V]):
    """``await cache.get(key, fetch)``: a cached answer younger than ``ttl(answer)``, else ``fetch()``'s, shared."""

    def __init__(
        self,
        *,
        ttl: Callable[[V], float],
        positive: Callable[[V], bool] = lambda _: True,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._positive = positive
        self._max_entries = max_entries
        self._clock = clock
        #: Positive answers and negative ones, each bounded on its own.
        self._sides: tuple[dict[K, tuple[float, V]], dict[K, tuple[float, V]]] = ({}, {})
        self._flights: dict[K, asyncio.Future[V]] = {}
        self._waiting: dict[asyncio.Future[V], int] = {}

    def __len__(self) -> int:
        return sum(len(side) for side in self._sides)

    def __contains__(self, key: K) -> bool:
        return any(key in side for side in self._sides)

    @property
    def in_flight(self) -> int:
        """Fetches running now."""
        return len(self._flights)

    async def get(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        for side in self._sides:
            entry = side.get(key)
            if entry is not None and entry[0] > self._clock():
                return entry[1]
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._fill(key, fetch))
            flight.add_done_callback(_retrieve)
            self._flights[key] = flight
        self._waiting[flight] = self._waiting.get(flight, 0) + 1
        try:
            # Shielded: a scraper that hangs up does not cancel the review the others wait for...
            return await asyncio.shield(flight)
        finally:
            left = self._waiting.pop(flight) - 1
            if left:
                self._waiting[flight] = left
            elif not flight.done():
                flight.cancel()  # ...but the last one to go takes it with them,
                if self._flights.get(key) is flight:
                    del self._flights[key]  # and a caller arriving meanwhile starts a fetch of its own.

    async def _fill(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        try:
            value = await fetch()
        finally:
            if self._flights.get(key) is asyncio.current_task():
                del self._flights[key]
        ttl = self._ttl(value)
        if ttl > 0:
            self._store(key, self._clock() + ttl, value)
        return value

    def _store(self, key: K, expires: float, value: V) -> None:
        for side in self._sides:
            side.pop(key, None)
        entries = self._sides[0] if self._positive(value) else self._sides[1]
        if len(entries) >= self._max_entries:
            now = self._clock()
            for stale in [k for k, (until, _) in entries.items() if until <= now]:
                del entries[stale]
        while len(entries) >= self._max_entries:
            del entries[next(iter(entries))]  # the oldest entry of this side (insertion order)
        entries[key] = (expires, value)


def _retrieve(flight: asyncio.Future[Any]) -> None:
    """Mark a failed flight's error as seen: every waiter may have gone (it is raised to those still there)."""
    with contextlib.suppress(asyncio.CancelledError):
        flight.exception()
