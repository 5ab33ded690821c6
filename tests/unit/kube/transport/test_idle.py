"""IdleTimer: fires once activity stops for its timeout, never while touched in time, and not while paused."""

from __future__ import annotations

import asyncio

from webserver_operator.kube.transport.idle import IdleTimer


async def test_fires_once_the_touches_stop() -> None:
    fired: list[float] = []
    loop = asyncio.get_running_loop()
    timer = IdleTimer(0.1, lambda: fired.append(loop.time()))
    timer.touch()
    for _ in range(5):  # 0.25 s of touches, 0.05 s apart: longer than the timeout, never idle that long
        await asyncio.sleep(0.05)
        timer.touch()
    assert fired == []
    last = loop.time()
    await asyncio.sleep(0.3)
    assert len(fired) == 1
    assert fired[0] - last >= 0.09


async def test_a_paused_timer_does_not_fire_and_the_next_touch_counts_afresh() -> None:
    fired: list[str] = []
    timer = IdleTimer(0.1, lambda: fired.append("idle"))
    timer.touch()
    timer.pause()
    await asyncio.sleep(0.25)
    assert fired == []
    timer.touch()
    await asyncio.sleep(0.05)
    assert fired == []
    await asyncio.sleep(0.2)
    assert fired == ["idle"]


async def test_stop_cancels_it() -> None:
    fired: list[str] = []
    timer = IdleTimer(0.05, lambda: fired.append("idle"))
    timer.touch()
    timer.stop()
    await asyncio.sleep(0.15)
    assert fired == []
