"""What the reconciler remembers about one WebServer between two reconciles: one record per key, in one mapping.

Every memory the reconciler keeps for a WebServer lives in a ``KeyMemory`` record, and the records in one ``Memory``
mapping, so that forgetting a WebServer (deleted, or its shard handed to another replica) is dropping one entry and
a memory added later is a field here, forgotten with the rest without anyone having to remember it. Each field says
what it saves: a memory only ever spares work or a write; losing it (a restart) costs one more read or write, never
a wrong answer.

A store that must keep its own mapping (an aggregate or an order of its own: the re-create window, the revision
gauge's counts, the pacer's rolling set, the echo filter the event handlers read by object, the Event recorder's
de-duplication by uid, the Ready gauge's series) is attached (``Memory.attach``): ``Memory.forget`` tells it too and
``Memory.keys`` lists its keys, so one ``forget(key)`` reaches every per-WebServer memory and ``keys`` is its check.

Pure data, no I/O. Used by ``reconcile.reconciler`` (the status side: what was written, when, and found current),
``reconcile.children`` (the child side: namesakes, clean versions, an owner found behind), ``reconcile.fights`` (the
drift repairs per child) and ``reconcile.probes`` (when pods became unready, the last look at their probe Events).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from webserver_operator.core.vocabulary import KubeObject, ObjectKey

__all__ = ["ChildrenVersions", "KeyMemory", "KeyedStore", "Memory", "RepairHistory", "StatusInputs"]

#: What a children check read: the WebServer's uid and generation, the Deployment's and Service's resourceVersions and
#: the PodDisruptionBudget's (None: absent).
ChildrenVersions = tuple[str, int, str, str, str | None]

#: What a status decision reads: the WebServer's resourceVersion, its children's (None: absent), the problem's verdict
#: and the pods' last probe failure.
StatusInputs = tuple[str, str | None, str | None, tuple[str, str, bool] | None, str | None]


@dataclass(slots=True)
class RepairHistory:
    """One child's drift repairs within the fight window (``reconcile.fights``): when, which fields, by whose write."""

    times: deque[float]
    fields: tuple[str, ...] = ()
    writer: str | None = None


class KeyedStore(Protocol):
    """A per-WebServer store with a mapping of its own, attached to the ``Memory`` so that forgetting reaches it."""

    def forget(self, key: ObjectKey, /) -> None: ...

    def keys(self) -> AbstractSet[ObjectKey]: ...


@dataclass(slots=True)
class KeyMemory:
    """Everything remembered about one WebServer; a new record remembers nothing.

    Slotted, with an immutable set (the empty one is shared): a record per WebServer costs about a hundred bytes
    beyond what it holds, as the separate maps' entries did.
    """

    #: How many reconciles in a row met a problem (0: none): the recheck delay grows with it, and the garbage
    #: collector gets ``GC_PATIENCE`` of them before a wait becomes a problem for a person.
    problem_streak: int = 0
    #: The kinds of children found to be someone else's namesake: outside the label-filtered caches, so read on the
    #: next look rather than created (a create could only be refused with 409 AlreadyExists).
    not_ours: frozenset[str] = frozenset()
    #: Our last status write the cache may not have seen yet: the resourceVersion it replaced and the object the API
    #: server returned (``WebServerReconciler._latest``).
    status_written: tuple[str, KubeObject] | None = None
    #: When (clock seconds) this replica last wrote the status: a ``progress_detail`` write waits until
    #: ``PROGRESS_DETAIL_INTERVAL`` after it.
    status_put_at: float | None = None
    #: What the last status decision read when it found the stored status current or made it so: ``next_status`` is
    #: a pure function of those, so while a reconcile reads the same versions it is not computed again.
    status_current: StatusInputs | None = None
    #: The (uid, generation) and the children's resourceVersions the last sync found owned, as desired and with nothing
    #: to write: while a reconcile reads exactly those, the children are not compared again.
    children_clean: ChildrenVersions | None = None
    #: The cached uid whose quick re-create found the owner gone or replaced on the API server: until a check passes,
    #: its children are not created again before the owner is read (``reconcile.recreates``).
    owner_behind: str | None = None
    #: Since when the pods have been unready, for a Deployment without a Progressing condition (``reconcile.probes``).
    unready_since: datetime | None = None
    #: When the probe Events were last read, and the failure found then (None: none): read again after
    #: ``LOOK_INTERVAL`` only.
    probe_look: tuple[datetime, str | None] | None = None
    #: The drift repairs of each child kind within ``FIGHT_WINDOW`` (None: none): enough of them make a fight
    #: (``reconcile.fights``).
    repairs: dict[str, RepairHistory] | None = None


class Memory:
    """The records by WebServer key: ``get`` reads without keeping, ``of`` keeps, ``forget`` drops one entry.

    ``forget`` and ``keys`` also reach every attached store.
    """

    def __init__(self) -> None:
        self._records: dict[ObjectKey, KeyMemory] = {}
        self._stores: list[KeyedStore] = []

    def attach(self, *stores: KeyedStore) -> None:
        """Forget ``stores``' memory of a key with the record's, and count their keys in ``keys``."""
        self._stores.extend(stores)

    def get(self, key: ObjectKey) -> KeyMemory | None:
        """The record of ``key``, or None when nothing is remembered (no record made)."""
        return self._records.get(key)

    def of(self, key: ObjectKey) -> KeyMemory:
        """The record of ``key``, made empty when there is none: for a write to it."""
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = KeyMemory()
        return record

    def forget(self, key: ObjectKey) -> None:
        """Drop everything remembered of ``key``: its record and its entries in every attached store."""
        self._records.pop(key, None)
        for store in self._stores:
            store.forget(key)

    def keys(self) -> set[ObjectKey]:
        """Every key the records or an attached store remember (what ``forget`` must clear)."""
        keys = set(self._records)
        for store in self._stores:
            keys |= store.keys()
        return keys

    def items(self) -> Iterator[tuple[ObjectKey, KeyMemory]]:
        return iter(self._records.items())
