"""IdleTimer: fires once activity stops for its timeout, never while touched in time, and not while paused."""

from __future__ import annotations

import asyncio

from webserver_operator.kube.transport.idle import IdleTimer


async def test_fires_once_the_touches_stop() -> None:
    fired: list[float] = []
    loop = asyncio.get_running_loop()
    # The touches are a tenth of the timeout apart: a loop starved by a busy machine (a sleep of 0.05 s taking
    # 0.1 s) must not count as idle, or the test fails on a loaded CI runner and passes on an idle one.
    timer = IdleTimer(0.5, lambda: fired.append(loop.time()))
    timer.touch()
    for _ in range(12):  # 0.6 s of touches, 0.05 s apart: longer than the timeout, never idle that long
        await asyncio.sleep(0.05)
        timer.touch()
    assert fired == []
    last = loop.time()
    await asyncio.sleep(0.9)
    assert len(fired) == 1
    assert fired[0] - last >= 0.49


async def test_a_paused_timer_does_not_fire_and_the_next_touch_counts_afresh() -> None:
    fired: list[str] = []
    timer = IdleTimer(0.5, lambda: fired.append("idle"))
    timer.touch()
    timer.pause()
    await asyncio.sleep(0.7)  # past the timeout, paused
    assert fired == []
    timer.touch()
    await asyncio.sleep(0.05)
    assert fired == []
    await asyncio.sleep(0.9)
    assert fired == ["idle"]


async def test_stop_cancels_it() -> None:
    fired: list[str] = []
    timer = IdleTimer(0.05, lambda: fired.append("idle"))
    timer.touch()
    timer.stop()
    await asyncio.sleep(0.15)
    assert fired == []
