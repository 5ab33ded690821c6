"""The zero-slack Lease-expiry rule: no write from a replica once the Lease it last renewed has expired.

Why a second rule next to ``verdicts.deposed_writes``: that one checks the operator's own promise (stop writing
``renew_deadline`` after the last successful renewal) and allows 1 s of slack for the distance between a send and
the audit record. This one checks what every other replica is entitled to rely on, with no slack at all: once a
Lease has expired, anyone may take it over, so a write that arrives after that instant can interleave with the new
leader's writes. It is judged where a replica is most likely to break it: frozen (SIGSTOP) through its expiry and
then resumed, with requests it had prepared before the freeze.

What "expired" means, precisely, from what the harness can observe (the audit log records the request and response
bodies of the audited replicas' Lease writes, ``hack/audit-policy.yaml``):

- A **grant** is a successful (2xx) create or update of the run's Lease by a replica, naming a holder. It declares
  ``spec.renewTime`` (the writer's wall clock when it built the request, microseconds) and
  ``spec.leaseDurationSeconds``. It expires at ``renewTime + leaseDurationSeconds``: the definition of the Lease
  object itself, and never later than the moment a standby counting ``leaseDurationSeconds`` from when *it* observed
  that write may take over, because the write was built before the server stored it and before anyone saw it.
- The grant **covering** a write is the latest grant by the same ServiceAccount (the replica's slot; each slot has
  its own) that the API server had completed (``stageTimestamp``) before it received the write. A renewal still in
  flight covers nothing yet.
- A write is **late** when the API server received it (``requestReceivedTimestamp``) strictly after its covering
  grant expired, or when no grant covers it. Accepted and rejected writes are both late: a rejected one still left
  the replica unfenced. Lease writes are the election itself (optimistic concurrency decides them) and are not judged.

All timestamps are wall-clock microseconds of one machine: the replicas, the API server and the harness share its
clock, so no skew enters the comparison.

With one Lease per shard (``--shards``), the same rule holds per shard Lease, with one addition: a replica that hands
a shard back releases its Lease (a successful write clearing ``holderIdentity``), and from the moment the API server
stored that release its grant no longer covers anything, however far its ``renewTime + leaseDurationSeconds`` lies
ahead. A grant together with that end is a **tenure** (``tenures``); ``shardverdicts`` judges every shard's writes by
them. The writer of a grant can be told apart more finely than by ServiceAccount: ``tenures`` takes a function naming
the writer of a request, which the sharded verdicts make the slot's incarnation (a process restarted in the same slot
is another replica and inherits nothing).

Used by ``trust`` (the leader-freeze verdict) and ``shardverdicts``; pure, tested in
``tests/unit/chaos/test_fencing.py`` and ``tests/unit/chaos/test_shardverdicts.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.audit import Request

Writer = Callable[[Request], str]
"""Names who sent a request (by default its user, the slot's ServiceAccount)."""


def by_user(r: Request) -> str:
    return r.user


@dataclass(frozen=True)
class Grant:
    """One successful Lease write naming a holder: what it promised everyone else."""

    user: str
    holder: str
    completed: float  # when the API server stored it (audit stageTimestamp)
    renew_time: float  # spec.renewTime it wrote
    duration: float  # spec.leaseDurationSeconds it wrote

    @property
    def expires(self) -> float:
        return self.renew_time + self.duration


@dataclass(frozen=True)
class Late:
    """A write received after its covering grant expired (``grant`` None: no grant covered it at all)."""

    write: Request
    grant: Grant | None

    def describe(self, origin: float) -> str:
        w = self.write
        what = f"{w.verb} {w.resource} {w.namespace}/{w.name} -> {w.code} at {w.received - origin:+.3f}s"
        if self.grant is None:
            return f"{what}, never covered by a Lease grant"
        return f"{what}, {w.received - self.grant.expires:.3f}s after the Lease expired (held as {self.grant.holder})"


def grants(timeline: list[Request]) -> list[Grant]:
    """The grants among successful Lease writes (``verdicts.lease_timeline``), in commit order."""
    found = [
        Grant(r.user, r.lease_holder, r.completed, r.lease_renew_time, r.lease_duration)
        for r in timeline
        if r.lease_holder and r.lease_renew_time is not None and r.lease_duration is not None
    ]
    found.sort(key=lambda g: g.completed)
    return found


def covering(found: list[Grant], *, user: str, at: float) -> Grant | None:
    """The latest grant by ``user`` completed before ``at``."""
    mine = [g for g in found if g.user == user and g.completed < at]
    return mine[-1] if mine else None


def late_writes(
    requests: list[Request], timeline: list[Request], *, user: str, start: float, end: float
) -> tuple[list[Late], list[Late]]:
    """(accepted, rejected) writes by ``user`` received in [start, end] after their covering grant expired."""
    found = grants(timeline)
    accepted: list[Late] = []
    rejected: list[Late] = []
    for w in requests:
        if w.user != user or not w.is_write or w.resource == "leases" or not start <= w.received <= end:
            continue
        grant = covering(found, user=user, at=w.received)
        if grant is None or w.received > grant.expires:
            (accepted if w.ok else rejected).append(Late(w, grant))
    return accepted, rejected


@dataclass(frozen=True)
class Tenure:
    """One grant of a Lease and the moment it stopped covering its writer: expiry, or an earlier release."""

    grant: Grant
    writer: str
    released: float | None = None  # when the API server stored the same writer's release (holderIdentity cleared)

    @property
    def end(self) -> float:
        return self.grant.expires if self.released is None else min(self.grant.expires, self.released)


def tenures(timeline: list[Request], *, writer: Writer = by_user) -> list[Tenure]:
    """The grants of one Lease (``timeline``: its successful writes), each ended by expiry or by its writer's release.

    A release (a successful write with an empty ``holderIdentity``) ends every earlier grant of the same writer.
    """
    ordered = sorted(timeline, key=lambda r: r.completed)
    found: list[tuple[Grant, str]] = []
    released: dict[int, float] = {}
    for r in ordered:
        who = writer(r)
        if r.lease_holder and r.lease_renew_time is not None and r.lease_duration is not None:
            found.append((Grant(r.user, r.lease_holder, r.completed, r.lease_renew_time, r.lease_duration), who))
        elif r.lease_holder == "":
            for i, (_, w) in enumerate(found):
                if w == who and i not in released:
                    released[i] = r.completed
    return [Tenure(g, w, released.get(i)) for i, (g, w) in enumerate(found)]


def covering_tenure(found: list[Tenure], *, writer: str, at: float) -> Tenure | None:
    """The latest tenure of ``writer`` whose grant the API server had stored before ``at``."""
    mine = [t for t in found if t.writer == writer and t.grant.completed < at]
    return mine[-1] if mine else None
