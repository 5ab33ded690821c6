"""How loudly to log a failure that repeats: a warning when it starts, again every ``every`` seconds while it lasts.

Why: a failure logged once at warning and then at debug (to keep a retry loop from flooding the log) looks, an hour
later, like a failure that went away. One logged at every retry floods the log and buries everything else. The
middle way: the first occurrence of a failure (or a different failure) is a warning, repeats are debug, and one
warning per period says it is still happening and how often.

Pure (the clock is injected); the caller logs. Used by ``runtime.leases.lease`` for failing Lease calls (a standby that
cannot read the Lease, a leader whose renewals fail) and by any retry loop that wants the same rule.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RepeatedFailure"]


@dataclass(frozen=True)
class _Report:
    """How to log this occurrence: at ``level``; ``repeats`` occurrences were logged at debug since the last warning."""

    level: int
    repeats: int

    @property
    def suffix(self) -> str:
        """Text to append to the log line: how many times it happened since the last warning."""
        return f" (failed {self.repeats + 1} times since the last warning)" if self.repeats else ""


class RepeatedFailure:
    """The log level of each occurrence of a failure; see the module docstring."""

    def __init__(self, *, every: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not every > 0:
            raise ValueError(f"every must be a positive number of seconds, got {every!r}")
        self._every = every
        self._clock = clock
        self._text: str | None = None
        self._warned_at = 0.0
        self._repeats = 0

    def failed(self, text: str) -> _Report:
        """Count one occurrence of the failure ``text``."""
        now = self._clock()
        if text != self._text or now - self._warned_at >= self._every:
            report = _Report(logging.WARNING, self._repeats if text == self._text else 0)
            self._text, self._warned_at, self._repeats = text, now, 0
            return report
        self._repeats += 1
        return _Report(logging.DEBUG, self._repeats)

    def succeeded(self) -> bool:
        """The operation worked; True when it had been failing (worth an info line saying it recovered)."""
        was_failing = self._text is not None
        self._text, self._repeats = None, 0
        return was_failing
