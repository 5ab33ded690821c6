"""The review cache: an answer lives for its own time to live, one fetch per key at a time, errors are not kept."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from webserver_operator.manager.metrics.reviewcache import ReviewCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Fetch:
    """Counts fetches; each returns the next answer (or raises it when it is an exception)."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self) -> object:
        self.calls += 1
        await self.gate.wait()
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_answers_live_for_their_own_time_to_live() -> None:
    clock = Clock()
    cache: ReviewCache[str, object] = ReviewCache(ttl=lambda allowed: 300 if allowed else 30, clock=clock)
    deny, allow = Fetch(False, True), Fetch(True, False)
    assert await cache.get("denied", deny) is False
    assert await cache.get("allowed", allow) is True
    clock.now += 29
    assert await cache.get("denied", deny) is False and deny.calls == 1
    clock.now += 2  # 31 s: the denial has expired, the allowance has not
    assert await cache.get("denied", deny) is True and deny.calls == 2
    assert await cache.get("allowed", allow) is True and allow.calls == 1
    clock.now += 270  # 301 s
    assert await cache.get("allowed", allow) is False and allow.calls == 2


async def test_concurrent_callers_share_one_fetch() -> None:
    cache: ReviewCache[str, object] = ReviewCache(ttl=lambda _: 60, clock=Clock())
    fetch = Fetch("alice")
    fetch.gate.clear()
    waiters = [asyncio.create_task(cache.get("token", fetch)) for _ in range(20)]
    await asyncio.sleep(0)
    fetch.gate.set()
    assert await asyncio.gather(*waiters) == ["alice"] * 20
    assert fetch.calls == 1


async def test_errors_are_raised_to_every_waiter_and_not_cached() -> None:
    cache: ReviewCache[str, object] = ReviewCache(ttl=lambda _: 60, clock=Clock())
    fetch = Fetch(RuntimeError("API server unreachable"), "alice")
    with pytest.raises(RuntimeError, match="unreachable"):
        await cache.get("token", fetch)
    assert await cache.get("token", fetch) == "alice"
    assert fetch.calls == 2


async def test_a_caller_that_goes_away_does_not_cancel_the_fetch_for_the_others() -> None:
    cache: ReviewCache[str, object] = ReviewCache(ttl=lambda _: 60, clock=Clock())
    fetch = Fetch("alice")
    fetch.gate.clear()
    leaver = asyncio.create_task(cache.get("token", fetch))
    stayer = asyncio.create_task(cache.get("token", fetch))
    await asyncio.sleep(0)
    leaver.cancel()
    fetch.gate.set()
    assert await stayer == "alice"
    assert fetch.calls == 1


async def test_the_cache_is_bounded_and_drops_expired_then_oldest_entries() -> None:
    clock = Clock()
    cache: ReviewCache[int, float] = ReviewCache(ttl=lambda ttl: ttl, max_entries=3, clock=clock)
    fetches: list[int] = []

    def answer(key: int, ttl: float) -> Callable[[], Awaitable[float]]:
        async def fetch() -> float:
            fetches.append(key)
            return ttl

        return fetch

    for key, ttl in ((1, 10.0), (2, 100.0), (3, 100.0)):
        await cache.get(key, answer(key, ttl))
    clock.now += 11  # entry 1 expired
    await cache.get(4, answer(4, 100.0))
    assert len(cache) == 3
    await cache.get(5, answer(5, 100.0))  # full of live entries: the oldest (2) goes
    assert len(cache) == 3
    fetches.clear()
    for key in (2, 5, 4):
        await cache.get(key, answer(key, 100.0))
    assert fetches == [2]  # 2 was dropped and fetched again (dropping 3); 5 and 4 were cached


async def test_negative_answers_never_push_positive_ones_out() -> None:
    """Issue 32 major 2: with one bound for both, 4096 junk tokens pushed Prometheus' identity out of the cache."""
    cache: ReviewCache[str, object] = ReviewCache(
        ttl=lambda _: 60, positive=lambda user: user is not None, max_entries=3, clock=Clock()
    )
    fetch = Fetch("prometheus")
    await cache.get("prom-token", fetch)
    for i in range(100):
        await cache.get(f"junk-{i}", Fetch(None))
    assert await cache.get("prom-token", fetch) == "prometheus" and fetch.calls == 1
    assert len(cache) == 1 + 3  # the positive side, and the newest 3 negative answers
    assert "junk-99" in cache and "junk-0" not in cache


async def test_a_fetch_is_cancelled_when_every_caller_has_gone() -> None:
    """Issue 32 major 2: a review went on for callers that had hung up (20,000 of them: +396 MiB)."""
    cache: ReviewCache[str, object] = ReviewCache(ttl=lambda _: 60, clock=Clock())
    fetch = Fetch("alice")
    fetch.gate.clear()
    callers = [asyncio.create_task(cache.get("token", fetch)) for _ in range(3)]
    await asyncio.sleep(0)
    assert cache.in_flight == 1
    for caller in callers:
        caller.cancel()
    await asyncio.gather(*callers, return_exceptions=True)
    await asyncio.sleep(0)
    assert cache.in_flight == 0
    fetch.gate.set()
    await asyncio.sleep(0)
    assert fetch.answers == ["alice"]  # the fetch never went on to take its answer
    assert "token" not in cache


async def test_a_caller_arriving_as_the_last_one_leaves_gets_an_answer_of_its_own() -> None:
    cache: ReviewCache[str, object] = ReviewCache(ttl=lambda _: 60, clock=Clock())
    fetch = Fetch("alice", "alice")
    fetch.gate.clear()
    leaver = asyncio.create_task(cache.get("token", fetch))
    await asyncio.sleep(0)
    leaver.cancel()
    newcomer = asyncio.create_task(cache.get("token", fetch))  # arrives before the cancelled fetch has unwound
    await asyncio.gather(leaver, return_exceptions=True)
    fetch.gate.set()
    assert await newcomer == "alice"  # not the cancellation of the fetch it did not ask to stop
    assert fetch.calls == 2 and cache.in_flight == 0
