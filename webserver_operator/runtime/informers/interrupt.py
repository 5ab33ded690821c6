"""A cancel scope that another task can trip: the informer's way to drop the request in flight when its shards change.

Why: a sharded replica's informer watches the union of the shards it holds (``runtime.sharding.cache``). When that set
changes, the list or watch in flight carries the old selector and must be given up at once, from another task
(the shard rounds), without cancelling the informer's own task (its ``TaskGroup`` would take that for a death) and
without touching the stall watchdog, which is another ``asyncio.timeout`` around the same watch.

``asyncio.Timeout`` is that scope already: rescheduled to now, it cancels the block it guards at its next await and
turns the cancellation into a ``TimeoutError`` at its own exit only, leaving inner timeouts alone. ``Interrupt`` wraps
one so that a trip surfaces as ``Interrupted`` and cannot be mistaken for another timeout; ``fire`` outside a guarded
block does nothing (the next request already reads the new state).

Used by ``runtime.informers.informer`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ["Interrupt", "Interrupted"]


class Interrupted(Exception):
    """The guarded block was given up because ``Interrupt.fire`` was called."""


class Interrupt:
    """``async with interrupt.guard(): ...`` runs until done or until ``fire()``; see the module docstring."""

    def __init__(self) -> None:
        self._scope: asyncio.Timeout | None = None

    @contextlib.asynccontextmanager
    async def guard(self) -> AsyncIterator[None]:
        """Guard the block; raises ``Interrupted`` out of it when fired while it runs."""
        scope = asyncio.timeout(None)
        self._scope = scope
        try:
            async with scope:
                yield
        except TimeoutError as exc:
            if scope.expired():
                raise Interrupted from exc
            raise
        finally:
            self._scope = None

    def fire(self) -> None:
        """Give up the guarded block at its next await (no-op when none runs, or when it is given up already)."""
        scope = self._scope
        if scope is not None and not scope.expired():
            scope.reschedule(asyncio.get_running_loop().time())
