"""Capped exponential backoff with jitter that resets after a quiet stretch, for list/watch retries.

Why: this mirrors client-go's reflector backoff (``NewExponentialBackoffManager(800ms, 30s, 2min, 2.0, 1.0)``). The
jitter spreads the reconnects of many informers and replicas after an API server restart instead of having them hit it
in lock step; the cap bounds how stale the cache can get; and the reset means a watch that failed once after hours of
health starts again from the short delay, while a hot failure loop keeps growing towards the cap.
"""

import random
import time
from collections.abc import Callable


class Backoff:
    """``next_delay()`` grows ``initial * factor**n`` up to ``maximum``, scaled by a random factor in [1-jitter, 1]."""

    def __init__(
        self,
        *,
        initial: float,
        maximum: float,
        factor: float = 2.0,
        jitter: float = 0.5,
        reset_after: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or maximum < initial or factor < 1 or not 0 <= jitter <= 1:
            raise ValueError("invalid backoff parameters")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._clock = clock
        self._rng = rng
        self._attempt = 0
        self._last: float | None = None

    def next_delay(self) -> float:
        """The delay before the next retry; counts one more failure."""
        now = self._clock()
        if self._last is not None and now - self._last > self.reset_after:
            self._attempt = 0
        self._last = now
        base = self.initial * self.factor ** min(self._attempt, 64)
        self._attempt += 1
        capped = min(base, self.maximum)
        return float(capped * (1.0 - self.jitter * self._rng()))

    def reset(self) -> None:
        self._attempt = 0
        self._last = None

    @property
    def attempts(self) -> int:
        return self._attempt
