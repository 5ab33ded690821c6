"""A task that ticks every few milliseconds and records the longest gap: proof that the event loop was never blocked.

Why: the harness's churn, recovery observers and leader lookups share one event loop with the faults; a fault that
blocks it (issue 21: a synchronous toxiproxy heal polling for minutes) stops all of them. A test runs the code under
test next to a ``Ticker`` and asserts ``longest_gap`` stays small.

Used by the chaos unit tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time


class Ticker:
    """``async with Ticker() as ticker``: ``ticks`` and ``longest_gap`` (seconds) while the block ran."""

    def __init__(self, every: float = 0.01) -> None:
        self.every = every
        self.ticks = 0
        self.longest_gap = 0.0
        self._last = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Ticker:
        self._last = time.monotonic()
        self._task = asyncio.create_task(self._run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        # A loop blocked until just now has not let the task record that gap yet.
        self.longest_gap = max(self.longest_gap, time.monotonic() - self._last)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            now = time.monotonic()
            self.longest_gap = max(self.longest_gap, now - self._last)
            self.ticks += 1
            self._last = now
