"""``IdleTimer``: act once a stretch of time passes without activity, with one timer instead of one per event.

Why: the obvious way to time out a stream, rescheduling a timer (``asyncio.Timeout.reschedule``, aiohttp's
``sock_read``) on every event, cancels one timer handle and schedules another each time; per watch event that was
2-3% of the operator's CPU in a bulk create (bench/README.md). Here activity only stores the loop time; the one timer
looks at it when it comes due, sets itself again for the new deadline while activity goes on, and calls ``on_idle``
once the deadline has really passed.

Used by ``kube.stream`` (a watch's read timeout: only a read that is waiting counts, so a read ``pause``s the timer
when data came) and ``runtime.informers.informer`` (the stall watchdog: every event counts, nothing pauses it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["IdleTimer"]


class IdleTimer:
    """Calls ``on_idle()`` once ``timeout`` s pass after the last ``touch()`` while not paused.

    ``touch()`` starts or continues the watch; ``pause()`` stops counting until the next ``touch()`` (a due timer
    lapses then, and the next ``touch()`` sets a new one); ``stop()`` cancels the timer for good. Must be made and
    used on the running loop.
    """

    def __init__(self, timeout: float, on_idle: Callable[[], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._timeout, self._on_idle = timeout, on_idle
        self._last = 0.0
        self._paused = True
        self._handle: asyncio.TimerHandle | None = None

    def touch(self) -> None:
        self._last, self._paused = self._loop.time(), False
        if self._handle is None:
            self._handle = self._loop.call_at(self._last + self._timeout, self._check)

    def pause(self) -> None:
        self._paused = True

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _check(self) -> None:
        self._handle = None
        if self._paused:
            return
        due = self._last + self._timeout
        if self._loop.time() < due:
            self._handle = self._loop.call_at(due, self._check)
        else:
            self._on_idle()
