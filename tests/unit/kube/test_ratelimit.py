"""Client-side token bucket: bursts, sustained rate, fairness by reservation, refund on cancellation."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.clock import ManualClock
from webserver_operator.kube.ratelimit import TokenBucket


def test_burst_then_qps() -> None:
    clock = ManualClock()
    bucket = TokenBucket(qps=2.0, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    # Out of tokens: each further caller waits one more 1/qps slot, in arrival order.
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0.5, 1.0, 1.5])
    clock.now += 10.0  # refills, but never beyond the burst size
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.5)


def test_zero_burst_means_one() -> None:
    clock = ManualClock()
    bucket = TokenBucket(qps=1.0, burst=0, clock=clock)
    assert bucket.reserve() == 0.0
    assert bucket.reserve() == pytest.approx(1.0)


def test_invalid_qps() -> None:
    with pytest.raises(ValueError, match="qps"):
        TokenBucket(qps=0, burst=1)


async def test_acquire_sleeps_the_reserved_delay() -> None:
    clock = ManualClock()
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    bucket = TokenBucket(qps=4.0, burst=1, clock=clock, sleep=sleep)
    assert await bucket.acquire() == 0.0
    assert await bucket.acquire() == pytest.approx(0.25)
    assert delays == pytest.approx([0.25])


async def test_cancelled_waiter_gives_its_token_back() -> None:
    clock = ManualClock()
    bucket = TokenBucket(qps=1.0, burst=1, clock=clock)
    bucket.reserve()
    waiter = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    # Without the refund the next caller would wait 2 s.
    assert bucket.reserve() == pytest.approx(1.0)
