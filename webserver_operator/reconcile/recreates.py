"""Children this replica created moments ago: a second create of one of them is checked against the API server first.

Why: the reconciler writes children from the informer cache, and a cache can be behind in one way that no write
refuses. When a WebServer is deleted and recreated while its watch lags (a relist delayed by 429s after an API server
restart), the cached copy still carries the old uid. A child created from it is owned by that uid, the garbage
collector deletes it, the delete queues the WebServer again, and the same stale copy creates it again: under chaos,
32 Deployments in 7 s until the relist. Controller-runtime has the same loop; the cure is cheap because it needs one
read only when a child is created a second time for the same uid within ``RECREATE_WINDOW``, which a healthy cluster
only sees when someone deletes a brand-new child. That read goes beside the create, so such a repair does not wait
for it; once a read finds the cache behind, the owner is read before each create until it catches up
(``WebServerReconciler._create_checked``).

Pure: ``RecentCreates`` keeps the time of each child's last create per owner uid, on the reconciler's clock, and
forgets entries older than the window as new ones arrive (its own mapping, in the order of the creates, so a WebServer's
entries are dropped by that order as well as by ``forget``: attached to the reconciler's ``reconcile.memory.Memory``).
Used by ``reconcile.children``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Final

__all__ = ["RECREATE_WINDOW", "ChildKey", "RecentCreates"]

RECREATE_WINDOW: Final = 30.0
"""Seconds after a create within which creating the same child again for the same owner uid reads the owner first."""

ChildKey = tuple[str, str, str]
"""(namespace, WebServer name, child kind)."""


class RecentCreates:
    """The last create of each child, with the owner uid it was created for, over the last ``RECREATE_WINDOW``."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._created: OrderedDict[ChildKey, tuple[str, float]] = OrderedDict()

    def created(self, child: ChildKey, owner_uid: str) -> None:
        """Record a create of ``child`` owned by ``owner_uid`` now."""
        now = self._clock()
        self._created.pop(child, None)
        self._created[child] = (owner_uid, now)
        while self._created:
            _, (_, at) = next(iter(self._created.items()))
            if now - at <= RECREATE_WINDOW:
                break
            self._created.popitem(last=False)

    def again_soon(self, child: ChildKey, owner_uid: str) -> bool:
        """Whether creating ``child`` for ``owner_uid`` now would be a second create within the window."""
        last = self._created.get(child)
        return last is not None and last[0] == owner_uid and self._clock() - last[1] <= RECREATE_WINDOW

    def forget(self, key: tuple[str, str], /) -> None:
        """Drop the children of the WebServer ``key`` (namespace, name): deleted, or its shard handed over."""
        for child in [c for c in self._created if c[:2] == key]:
            del self._created[child]

    def __len__(self) -> int:
        return len(self._created)

    def keys(self) -> set[tuple[str, str]]:
        """The WebServers (namespace, name) with a child's create remembered."""
        return {(child[0], child[1]) for child in self._created}
