"""Progress lines on stderr: what the benchmark is doing and how far each milestone has come.

Why: a full run takes tens of minutes; a person watching must see it is alive, which system and scenario it is in,
and how many objects have reached each milestone, without reading logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Mapping

from bench.tracker import Milestone

_START = time.monotonic()


def say(message: str) -> None:
    elapsed = int(time.monotonic() - _START)
    print(f"[bench {elapsed // 60:3d}m{elapsed % 60:02d}s] {message}", file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def reporting(
    label: str, milestones: Mapping[str, Milestone], total: int, *, every: float = 5.0
) -> AsyncIterator[None]:
    """Print ``label`` and each milestone's count every ``every`` seconds while the block runs."""
    started = time.monotonic()

    async def loop() -> None:
        while True:
            await asyncio.sleep(every)
            counts = ", ".join(f"{name} {m.count}/{total}" for name, m in milestones.items())
            say(f"  {label}: {counts} ({time.monotonic() - started:.0f}s)")

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
