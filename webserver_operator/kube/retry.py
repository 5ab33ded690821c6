"""Retry policy of API requests: which failures are retried, and how long to wait before the next attempt.

Why a pure ``retry_delay`` plus a tiny loop with injected ``sleep``/``rand``: the decision (retry or not, how long)
is where bugs hide, and it can be tested exhaustively without a server and without sleeping.

Who retries here: the informers' lists and the Leases' calls (each bounded by its own deadline). The
reconcile path does not: its client view has ``max_retries=0`` and a failed write goes back to the work queue, which
backs off per key and honours ``Retry-After`` (the controller-runtime model), so one failure is never retried by two
layers at once.

Rules (as client-go, with jittered exponential backoff instead of its fixed 1 s):

- 429 TooManyRequests, 500/502/503/504 and transport errors (refused, reset, timeouts) are retried; every other
  4xx is an answer, not a glitch, and is raised at once.
- Non-idempotent verbs are retried too: a retried create that had in fact succeeded surfaces as 409 AlreadyExists, a
  retried update with a resourceVersion as 409 Conflict, a retried delete as 404. A create with ``generateName``
  (an Event) cannot tell, so ``retries=False`` callers opt out.
- ``Retry-After`` (header or Status ``details.retryAfterSeconds``) is honoured as given, capped at the backoff cap
  so a misbehaving proxy cannot park a caller for minutes. NaN, infinities, negatives and integers too large for a
  float never get here as such: ``kube.errors.bounded_delay`` makes every ``retry_after`` a number in [0, 3600] or
  ``None`` when the error is built (``asyncio.sleep(nan)`` would never return; ``float(10**400)`` raised
  ``OverflowError`` out of a Lease's renewal loop).
- Otherwise the delay comes from ``core.backoff.BackoffPolicy`` (base 0.2 s doubling to 30 s, jitter 0.5).

Called by ``kube.client.request``; hands back the answer or the last error.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from webserver_operator.core.backoff import BackoffPolicy
from webserver_operator.kube.errors import ApiError, KubeError

__all__ = ["RetryPolicy", "call_with_retries", "retry_delay"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    backoff: BackoffPolicy = field(default_factory=lambda: BackoffPolicy(base=0.2, cap=30.0, jitter=0.5))


def retry_delay(
    error: KubeError, *, retries_done: int, policy: RetryPolicy, rand: Callable[[], float] = random.random
) -> float | None:
    """Seconds to wait before retrying after ``error``, or ``None`` to give up and raise it.

    ``retries_done`` counts the retries already made (0 after the first failed attempt); ``rand`` returns a float in
    [0, 1) and is injectable for tests.
    """
    if not error.retriable or retries_done >= policy.max_retries:
        return None
    if isinstance(error, ApiError) and error.retry_after is not None and math.isfinite(error.retry_after):
        return min(max(error.retry_after, 0.0), policy.backoff.cap)
    return policy.backoff.delay(retries_done, rand=rand)


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rand: Callable[[], float] = random.random,
    on_retry: Callable[[KubeError, float], None] | None = None,
) -> T:
    """Run ``attempt()`` until it succeeds or ``retry_delay`` says stop; the last error gets ``attempts`` set."""
    retries = 0
    while True:
        try:
            return await attempt()
        except KubeError as error:
            error.attempts = retries + 1
            delay = retry_delay(error, retries_done=retries, policy=policy, rand=rand)
            if delay is None:
                raise
            if on_retry is not None:
                on_retry(error, delay)
        await sleep(delay)
        retries += 1
