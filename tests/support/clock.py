"""``ManualClock``: a monotonic clock for unit tests that only moves when the test moves it.

Pure logic in the operator takes its clock as a parameter (``clock: Callable[[], float]``): the Lease fence, the
work queue, the token bucket, the repeated-failure log. Tests pass one of these and set or advance ``now``.
"""

from __future__ import annotations


class ManualClock:
    """Callable like ``time.monotonic``; reads ``now``."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
