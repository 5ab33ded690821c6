"""The one backoff formula: capped exponential growth, scaled down by jitter, used by every retry in the operator.

Why one formula: four places wait before trying again (an API request retried after a 429/5xx, an informer
reconnecting after a failed list or watch, the work queue requeueing a failed key, and the slow recheck of a
WebServer waiting on a problem only a person can fix). With one ``BackoffPolicy`` they share one definition of
"attempt n waits this long", one jitter convention and one set of validated parameters, and each keeps only the
numbers that fit it (client-go's 5 ms for the queue, its reflector's 800 ms to 30 s for informers, ...).

Jitter convention: the delay is ``min(cap, base * factor**attempt)`` times a factor drawn from ``[1 - jitter, 1]``
(``rand() == 0`` gives the low end). Jitter spreads the retries of many workers or replicas that failed together,
and only ever shortens a delay, so the cap stays a true upper bound.

``Backoff`` is the stateful form for a single retry loop (an informer): it counts attempts and starts over after a
quiet stretch, so a watch that failed once after hours of health reconnects quickly while a hot failure loop keeps
growing towards the cap. The work queue keeps one attempt count per key and calls ``BackoffPolicy.delay`` itself.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff", "BackoffPolicy"]

#: Beyond this many attempts every policy is at its cap (and ``factor**attempt`` would overflow a float).
_MAX_EXPONENT = 64


@dataclass(frozen=True)
class BackoffPolicy:
    """``delay(n) = min(cap, base * factor**n) * (1 - jitter * (1 - rand()))``; see the module docstring."""

    base: float
    cap: float
    factor: float = 2.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.base) and self.base > 0):
            raise ValueError(f"backoff base must be a positive number of seconds, got {self.base!r}")
        if not (math.isfinite(self.cap) and self.cap >= self.base):
            raise ValueError(f"backoff cap ({self.cap!r}) must be a number of seconds >= base ({self.base!r})")
        if not self.factor >= 1:
            raise ValueError(f"backoff factor must be >= 1, got {self.factor!r}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"backoff jitter must be between 0 and 1, got {self.jitter!r}")

    def delay(self, attempt: int, *, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number ``attempt`` (0 for the first retry)."""
        exponent = min(max(attempt, 0), _MAX_EXPONENT)
        ceiling = min(self.cap, self.base * self.factor**exponent)
        if not self.jitter:
            return float(ceiling)
        return float(ceiling * (1.0 - self.jitter * (1.0 - rand())))


class Backoff:
    """Attempt counter over a ``BackoffPolicy`` for one retry loop; starts over after ``reset_after`` quiet seconds."""

    def __init__(
        self,
        policy: BackoffPolicy,
        *,
        reset_after: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy
        self.reset_after = reset_after
        self._clock = clock
        self._rand = rand
        self._attempt = 0
        self._last: float | None = None

    def next_delay(self) -> float:
        """The delay before the next retry; counts one more failure."""
        now = self._clock()
        if self._last is not None and now - self._last > self.reset_after:
            self._attempt = 0
        self._last = now
        delay = self.policy.delay(self._attempt, rand=self._rand)
        self._attempt += 1
        return delay

    def reset(self) -> None:
        self._attempt = 0
        self._last = None

    @property
    def attempts(self) -> int:
        return self._attempt
