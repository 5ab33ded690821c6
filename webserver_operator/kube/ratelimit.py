"""Client-side token-bucket rate limit (client-go's ``QPS``/``Burst``), off unless configured.

Why it exists even though the API server has priority and fairness: a relist storm after an outage (every informer
relisting, every key requeued) can otherwise fire thousands of requests in a second from one process; a token bucket
smooths that out while letting a short burst through at full speed.

Why reservations (tokens may go negative) and not a lock + loop: each caller takes its token immediately and sleeps
exactly until it is due, so waiters are served in arrival order without a lock; a caller cancelled while waiting gives
its token back. ``reserve()`` is the pure part (clock injected) and is what the tests exercise.

Used by ``kube.client`` before every request when ``--qps`` is set.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    def __init__(
        self,
        *,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be > 0, got {qps!r}")
        self._qps = qps
        self._burst = float(max(1, burst))  # client-go requires burst >= 1 when a qps is set
        self._clock = clock
        self._sleep = sleep
        self._tokens = self._burst
        self._last = clock()

    def reserve(self) -> float:
        """Take one token now; return how many seconds the caller must wait before using it."""
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def cancel(self) -> None:
        """Give back a reserved token (the caller was cancelled before using it)."""
        self._tokens = min(self._burst, self._tokens + 1.0)

    async def acquire(self) -> float:
        """Wait for a token; return the seconds waited."""
        delay = self.reserve()
        if delay > 0:
            try:
                await self._sleep(delay)
            except asyncio.CancelledError:
                self.cancel()
                raise
        return delay
