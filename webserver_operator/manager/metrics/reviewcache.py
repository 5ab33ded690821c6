"""A small async cache for review answers: a time to live per answer, one request in flight per key, bounded.

Why: Prometheus scrapes every 30 s with the same token, and a flood of scrapes must not become a flood of
TokenReviews and SubjectAccessReviews at the API server. k8s.io/apiserver, which controller-runtime's metrics
filter uses, caches token answers for 1 minute (authenticated or not), allowed access for 5 minutes and denied
access for 30 seconds, and sends one review per token at a time; ``manager.metrics.auth`` does the same with this
cache. Errors are not cached: the next scrape asks again.

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
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._clock = clock
        self._entries: dict[K, tuple[float, V]] = {}
        self._flights: dict[K, asyncio.Future[V]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        entry = self._entries.get(key)
        if entry is not None and entry[0] > self._clock():
            return entry[1]
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._fill(key, fetch))
            flight.add_done_callback(_retrieve)
            self._flights[key] = flight
        # Shielded: a scraper that hangs up does not cancel the review the others wait for.
        return await asyncio.shield(flight)

    async def _fill(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        try:
            value = await fetch()
        finally:
            self._flights.pop(key, None)
        ttl = self._ttl(value)
        if ttl > 0:
            self._store(key, self._clock() + ttl, value)
        return value

    def _store(self, key: K, expires: float, value: V) -> None:
        self._entries.pop(key, None)
        if len(self._entries) >= self._max_entries:
            now = self._clock()
            for stale in [k for k, (until, _) in self._entries.items() if until <= now]:
                del self._entries[stale]
        while len(self._entries) >= self._max_entries:
            del self._entries[next(iter(self._entries))]  # the oldest entry (insertion order)
        self._entries[key] = (expires, value)


def _retrieve(flight: asyncio.Future[Any]) -> None:
    """Mark a failed flight's error as seen: every waiter may have gone (it is raised to those still there)."""
    with contextlib.suppress(asyncio.CancelledError):
        flight.exception()
