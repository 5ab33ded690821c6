"""How many reviews /metrics may send to the API server: a rate (client-go's token bucket) and a bound in flight.

Why: every pod may call /metrics with a made-up token, and each new token costs a TokenReview at the API server.
controller-runtime sends its reviews through client-go's rate limiter (its rest config: 20 per second, bursts of
30); here the same token bucket (``kube.ratelimit.TokenBucket``), plus a bound on reviews waiting for an answer
(a slow API server must not pile up thousands of them) and on how long a caller may wait for its turn. A request
that would wait longer is answered at once with 429 and ``Retry-After`` (``ReviewsBusy``) instead of queueing:
queued callers would hold their connections and their memory while the flood goes on. A caller cancelled while
it waits (it hung up) gives its token back.

Answers that are cached cost nothing here (``manager.metrics.reviewcache`` sits in front): Prometheus, whose token is
cached after its first scrape, is not slowed by a flood of junk tokens. Used by ``manager.metrics.auth``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from webserver_operator.kube.ratelimit import TokenBucket

__all__ = ["REVIEWS_IN_FLIGHT", "REVIEW_BURST", "REVIEW_MAX_WAIT", "REVIEW_QPS", "ReviewLimiter", "ReviewsBusy"]

#: client-go's defaults as controller-runtime sets them (rest.Config QPS 20, Burst 30).
REVIEW_QPS = 20.0
REVIEW_BURST = 30
#: Reviews waiting for the API server's answer at once.
REVIEWS_IN_FLIGHT = 16
#: The longest a request waits for its turn to be reviewed, in seconds; beyond it: 429.
REVIEW_MAX_WAIT = 1.0


class ReviewsBusy(Exception):
    """Too many reviews now: the caller should be told to retry after ``retry_after`` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many reviews in progress; retry in {retry_after:.0f}s")
        self.retry_after = retry_after


class ReviewLimiter:
    """``async with limiter.turn():`` around one review; raises ``ReviewsBusy`` when it would wait too long."""

    def __init__(
        self,
        *,
        qps: float = REVIEW_QPS,
        burst: int = REVIEW_BURST,
        in_flight: int = REVIEWS_IN_FLIGHT,
        max_wait: float = REVIEW_MAX_WAIT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._bucket = TokenBucket(qps=qps, burst=burst, clock=clock, sleep=sleep)
        self._slots = asyncio.Semaphore(in_flight)
        self._max_wait = max_wait
        self._clock = clock
        self._sleep = sleep
        self.refused = 0

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        started = self._clock()
        delay = self._bucket.reserve()
        if delay > self._max_wait:
            self._bucket.cancel()
            self.refused += 1
            raise ReviewsBusy(max(1.0, delay))
        if delay > 0:
            try:
                await self._sleep(delay)
            except asyncio.CancelledError:
                self._bucket.cancel()
                raise
        left = self._max_wait - (self._clock() - started)
        try:
            async with asyncio.timeout(max(left, 0.0)):
                await self._slots.acquire()
        except TimeoutError:
            self.refused += 1
            raise ReviewsBusy(1.0) from None
        try:
            yield
        finally:
            self._slots.release()
