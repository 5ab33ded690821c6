"""Retry decisions (pure) and the retry loop, with injected sleep and jitter: nothing here really sleeps."""

from __future__ import annotations

import math

import pytest

from webserver_operator.core.backoff import BackoffPolicy
from webserver_operator.kube.errors import (
    ApiError,
    KubeError,
    TransportError,
    api_error_from_response,
)
from webserver_operator.kube.retry import RetryPolicy, call_with_retries, retry_delay

POLICY = RetryPolicy(max_retries=5, backoff=BackoffPolicy(base=0.2, cap=30.0, jitter=0.5))
PATH = "/api/v1/namespaces/d/services/s"


def http_error(code: int, *, retry_after: str | None = None) -> ApiError:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return api_error_from_response(code, b"", method="GET", path=PATH, headers=headers)


def transport(*, retriable: bool = True) -> TransportError:
    return TransportError(method="GET", path=PATH, cause="reset", retriable=retriable)


@pytest.mark.parametrize("code", [400, 401, 403, 404, 405, 409, 410, 415, 422, 501])
def test_answers_are_not_retried(code: int) -> None:
    assert retry_delay(http_error(code), retries_done=0, policy=POLICY, rand=lambda: 0.0) is None


@pytest.mark.parametrize("error", [http_error(429), http_error(500), http_error(502), http_error(503), transport()])
def test_glitches_are_retried_with_capped_exponential_backoff(error: KubeError) -> None:
    lows = [retry_delay(error, retries_done=n, policy=POLICY, rand=lambda: 0.0) for n in range(5)]
    highs = [retry_delay(error, retries_done=n, policy=POLICY, rand=lambda: 0.999999) for n in range(5)]
    assert lows == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6])
    assert highs == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2], rel=1e-5)
    assert retry_delay(error, retries_done=5, policy=POLICY, rand=lambda: 0.0) is None


def test_backoff_is_capped() -> None:
    policy = RetryPolicy(max_retries=20, backoff=BackoffPolicy(base=1.0, cap=5.0, jitter=0.5))
    assert retry_delay(http_error(503), retries_done=10, policy=policy, rand=lambda: 0.999999) == pytest.approx(5.0)


def test_retry_after_is_honoured_and_capped() -> None:
    assert retry_delay(http_error(429, retry_after="1"), retries_done=3, policy=POLICY, rand=lambda: 0.5) == 1.0
    assert retry_delay(http_error(503, retry_after="0"), retries_done=0, policy=POLICY) == 0.0
    assert retry_delay(http_error(429, retry_after="3600"), retries_done=0, policy=POLICY) == 30.0
    # Retry-After never turns a non-retriable answer into a retry, nor extends the budget.
    assert retry_delay(http_error(404, retry_after="1"), retries_done=0, policy=POLICY) is None
    assert retry_delay(http_error(429, retry_after="1"), retries_done=5, policy=POLICY) is None


def test_non_retriable_transport_error() -> None:
    assert retry_delay(transport(retriable=False), retries_done=0, policy=POLICY) is None


def test_zero_retries() -> None:
    assert retry_delay(http_error(503), retries_done=0, policy=RetryPolicy(max_retries=0)) is None


class Script:
    """An attempt function failing with the given errors, then returning "ok"."""

    def __init__(self, *errors: KubeError) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def test_loop_retries_then_succeeds() -> None:
    attempt = Script(http_error(429, retry_after="2"), http_error(500), transport())
    sleeps = Sleeps()
    seen: list[tuple[int, float]] = []
    result = await call_with_retries(
        attempt, policy=POLICY, sleep=sleeps, rand=lambda: 0.0, on_retry=lambda e, d: seen.append((e.attempts, d))
    )
    assert result == "ok"
    assert attempt.calls == 4
    assert sleeps.delays == pytest.approx([2.0, 0.2, 0.4])
    assert seen == [(1, 2.0), (2, pytest.approx(0.2)), (3, pytest.approx(0.4))]


async def test_loop_gives_up_and_reports_attempts() -> None:
    attempt = Script(*[http_error(503) for _ in range(10)])
    sleeps = Sleeps()
    with pytest.raises(ApiError) as caught:
        await call_with_retries(attempt, policy=POLICY, sleep=sleeps, rand=lambda: 0.0)
    assert attempt.calls == 6
    assert len(sleeps.delays) == 5
    assert caught.value.attempts == 6
    assert "failed after 6 attempts" in str(caught.value)


async def test_loop_raises_answers_at_once() -> None:
    attempt = Script(http_error(409))
    sleeps = Sleeps()
    with pytest.raises(ApiError) as caught:
        await call_with_retries(attempt, policy=POLICY, sleep=sleeps)
    assert caught.value.status == 409
    assert caught.value.attempts == 1
    assert sleeps.delays == []


@pytest.mark.parametrize("raw", [b"NaN", b"Infinity", b"-Infinity", b"-3", b"9" * 400])
def test_any_retry_after_seconds_gives_a_finite_delay_within_the_cap(raw: bytes) -> None:
    """What a server writes into ``details.retryAfterSeconds`` never becomes NaN, an overflow or a long park."""
    body = b'{"kind":"Status","code":429,"reason":"TooManyRequests","details":{"retryAfterSeconds":%b}}' % raw
    error = api_error_from_response(429, body, method="GET", path=PATH)
    delay = retry_delay(error, retries_done=0, policy=POLICY, rand=lambda: 0.5)
    assert delay is not None
    assert math.isfinite(delay)
    assert 0.0 <= delay <= POLICY.backoff.cap
