"""``Throttle``: the keys the API server refused with 429, held together and let go by one probe.

Why: a 429 (API Priority and Fairness, or max-in-flight) says the API server is too busy for this client now and
when to ask again (``Retry-After``, 1 s from APF). It says nothing about the key. Counted as a failure, as any error
is, each throttled attempt took a step of the key's 5 ms doubling backoff: in ``make chaos``'s apf-starvation fault
(410 refusals in a minute) one key climbed to a wait of about 50 s and came back that long after the API server
had recovered (docs/reliability.md). client-go does not count them either: its REST client waits ``Retry-After``
and repeats the request itself, up to 10 times, inside the reconcile, so controller-runtime's rate limiter never
sees the 429s; but its worker sleeps meanwhile.

Here a refused key is held aside with no backoff step and its worker goes on with other keys. The held keys are not
retried one by one: while the server throttles, each retry is one more request it must refuse. Once ``Retry-After``
has passed, one of them goes back to the queue as a probe. If the probe's reconcile gets past the throttling (any
outcome but another 429) every held key is queued again; another 429 holds the probe again until its new
``Retry-After``. So a starved client sends one probe per ``Retry-After`` on top of what events bring, and its keys
come back within one ``Retry-After`` of the API server's recovery, not after their backoff. A probe that never
reports (the key left this replica's shards, the write gate paused it) is replaced by the next one.

Pure, with the clock passed in: ``runtime.controller.loop.Controller`` calls ``hold`` for a 429, ``ran`` when a key's
reconcile starts, ``settled`` when it ends otherwise, ``due`` from its housekeeping loop, ``drop`` when keys are handed
over; it hands on keys to queue.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["DEFAULT_RETRY_AFTER", "Throttle"]

#: The wait when a 429 carries no ``Retry-After``: what the API server's APF and max-in-flight filters send.
DEFAULT_RETRY_AFTER = 1.0

K = TypeVar("K", bound=Hashable)


class Throttle(Generic[K]):
    """The held keys in the order they were refused, the probe out now, and when the next probe may go."""

    def __init__(self) -> None:
        self._held: dict[K, None] = {}  # insertion-ordered: the longest-held key probes first
        self._probe: K | None = None
        self._next_probe = 0.0

    @property
    def active(self) -> bool:
        """True while keys are held or a probe is out."""
        return bool(self._held) or self._probe is not None

    def held(self) -> list[K]:
        return list(self._held)

    def hold(self, key: K, retry_after: float | None, now: float) -> bool:
        """Hold ``key`` after a 429; returns True if it starts a throttled period (nothing was held before)."""
        starts = not self.active
        if key == self._probe:
            self._probe = None
        self._held[key] = None
        self._next_probe = max(self._next_probe, now + (retry_after if retry_after else DEFAULT_RETRY_AFTER))
        return starts

    def ran(self, key: K) -> None:
        """``key``'s reconcile starts (an event woke it, or it is the probe): it is no longer held."""
        self._held.pop(key, None)

    def settled(self, key: K) -> list[K]:
        """``key``'s reconcile ended in anything but a 429: if it was the probe, every held key, now let go."""
        if key != self._probe:
            return []
        self._probe = None
        released = list(self._held)
        self._held.clear()
        return released

    def due(self, now: float, out: Callable[[K], bool]) -> K | None:
        """The key to send as the next probe, if one is due; ``out(key)``: whether the probe is queued or running."""
        if self._probe is not None and not out(self._probe):
            self._probe = None  # it will not report: the next held key probes instead
        if self._probe is not None or not self._held or now < self._next_probe:
            return None
        self._probe = next(iter(self._held))
        del self._held[self._probe]
        return self._probe

    def drop(self, belongs: Callable[[K], bool]) -> None:
        """Forget the keys for which ``belongs(key)`` (handed over to another replica, or the controller stopped)."""
        for key in [key for key in self._held if belongs(key)]:
            del self._held[key]
        if self._probe is not None and belongs(self._probe):
            self._probe = None
