"""``eventually``: wait for a condition on state that has no event to await, with a bound and a message.

Why: state owned by the code under test (a work queue's length, a connection's read pause, a Lease fence) changes
inside tasks the test does not control, and how soon depends on the machine. A fixed sleep is either slow or, on a
busy CI runner, too short; a hand-written polling loop per test says the same thing several ways. Used by the unit
tests of the controller loop, the manager's shards, the connection pool and the Lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["eventually"]


async def eventually(condition: Callable[[], bool], within: float = 2.0, *, what: str = "") -> None:
    """Return once ``condition()`` is true; fail the test if it is not within ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            while not condition():  # noqa: ASYNC110 - polling a predicate is the point
                await asyncio.sleep(0.002)
    except TimeoutError:
        raise AssertionError(f"not true within {within} s: {what or condition}") from None
