"""Retry policy of API requests: which failures are retried, and how long to wait before the next attempt.

Why a pure ``retry_delay`` plus a tiny loop with injected ``sleep``/``rand``: the decision (retry or not, how long)
is where bugs hide, and it can be tested exhaustively without a server and without sleeping.

Rules (as client-go, with jittered exponential backoff instead of its fixed 1 s):

- 429 TooManyRequests, 500/502/503/504 and transport errors (refused, reset, timeouts) are retried; every other
  4xx is an answer, not a glitch, and is raised at once.
- Non-idempotent verbs are retried too: a retried create that had in fact succeeded surfaces as 409 AlreadyExists, a
  retried update with a resourceVersion as 409 Conflict, a retried delete as 404: the reconciler handles all three.
- ``Retry-After`` (header or Status ``details.retryAfterSeconds``) is honoured as given, capped at ``backoff_cap``
  so a misbehaving proxy cannot park a worker for minutes (the work queue's own backoff takes over from there).
- Otherwise the delay is ``min(cap, base * 2**retry)`` scaled by a jitter factor in [0.5, 1), so that many workers
  failing together do not retry in lockstep.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from webserver_operator.kube.errors import ApiError, KubeError

__all__ = ["RetryPolicy", "call_with_retries", "retry_delay"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    backoff_base: float = 0.2
    backoff_cap: float = 30.0


def retry_delay(
    error: KubeError, *, retries_done: int, policy: RetryPolicy, rand: Callable[[], float] = random.random
) -> float | None:
    """Seconds to wait before retrying after ``error``, or ``None`` to give up and raise it.

    ``retries_done`` counts the retries already made (0 after the first failed attempt); ``rand`` returns a float in
    [0, 1) and is injectable for tests.
    """
    if not error.retriable or retries_done >= policy.max_retries:
        return None
    if isinstance(error, ApiError) and error.retry_after is not None:
        return min(max(error.retry_after, 0.0), policy.backoff_cap)
    ceiling = min(policy.backoff_cap, policy.backoff_base * (2.0**retries_done))
    return ceiling * (0.5 + rand() / 2.0)


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
