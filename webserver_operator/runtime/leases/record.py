"""The ``coordination.k8s.io/v1`` Lease record: who holds it, whether it may be claimed, and the records we write.

Why a module of its own: these are the rules that decide who may act, and they are pure (a record in, a decision or a
record out, the clocks passed in), so they are tested exhaustively without a server, as client-go keeps them in
``resourcelock`` apart from its election loop. ``runtime.leases.lease.Lease`` is the only caller; it hands the records
it gets from here to the API server.

What the records carry, as client-go writes them so ``kubectl get lease`` reads the same whichever implementation
wrote it: ``holderIdentity``, ``leaseDurationSeconds`` (an integer, rounded up so the declared validity is never
shorter), ``acquireTime``/``renewTime`` as ``metav1.MicroTime`` (written for people; never read back, see
``may_claim``), and ``leaseTransitions``, counted when the holder changes. Spec fields we do not know
(``preferredHolder``, ``strategy``) are carried over, never dropped.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webserver_operator.core.resources import LEASES

__all__ = [
    "Sighting",
    "claimed_lease",
    "format_micro_time",
    "holder_of",
    "is_live",
    "lease_duration_seconds",
    "may_claim",
    "new_lease",
    "released_lease",
    "sighted",
]


def format_micro_time(moment: datetime) -> str:
    """RFC 3339 with microseconds in UTC, as ``metav1.MicroTime``: ``2026-11-22T10:00:00.000000Z``."""
    if moment.tzinfo is None:
        raise ValueError("format_micro_time needs an aware datetime")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_duration_seconds(lease_duration: float) -> int:
    """``spec.leaseDurationSeconds`` is an integer: round up, so the declared validity is never shorter."""
    return max(1, math.ceil(lease_duration))


def holder_of(spec: Mapping[str, Any] | None) -> str:
    """``spec.holderIdentity``; ``""`` when absent, null or not a string (a released or never-held Lease)."""
    holder = (spec or {}).get("holderIdentity")
    return holder if isinstance(holder, str) else ""


def _declared_duration(spec: Mapping[str, Any], default: float) -> float:
    value = spec.get("leaseDurationSeconds")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


def _transitions(spec: Mapping[str, Any]) -> int:
    value = spec.get("leaseTransitions")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


@dataclass(frozen=True)
class Sighting:
    """A Lease record as last seen (``spec``; ``None``: no Lease) and ``since``, when that exact record was first seen.

    ``since`` is read on the observer's monotonic clock after the answer arrived; it is what expiry is measured from.
    """

    spec: Mapping[str, Any] | None
    since: float


def sighted(previous: Sighting | None, spec: Mapping[str, Any] | None, *, now: float) -> Sighting:
    """The sighting after seeing ``spec`` at ``now``: unchanged while the record is the same, else starting now."""
    if previous is not None and previous.spec == spec:
        return previous
    return Sighting(None if spec is None else dict(spec), now)


def is_live(sighting: Sighting, *, now: float, lease_duration: float) -> bool:
    """Whether the Lease names a holder that renewed it within its declared duration, as far as ``now`` can tell."""
    return bool(holder_of(sighting.spec)) and not may_claim(
        sighting.spec, identity="", now=now, observed_at=sighting.since, lease_duration=lease_duration
    )


def may_claim(
    observed: Mapping[str, Any] | None,
    *,
    identity: str,
    now: float,
    observed_at: float,
    lease_duration: float,
) -> bool:
    """Whether a candidate may write the Lease naming itself now.

    ``observed`` is the Lease's ``spec`` (``None``: the Lease does not exist); ``observed_at`` is the monotonic time
    at which this exact record was first seen and ``now`` the same clock now. Immediately when the Lease does not
    exist, names nobody (released) or already names us (the same identity restarted); otherwise once the record has
    not changed for its ``leaseDurationSeconds`` (the holder's declaration, falling back to ``lease_duration``) on
    our clock. Timestamps inside the record are deliberately ignored: nodes' wall clocks differ and NTP may step them,
    so only elapsed time on one clock is compared.
    """
    if observed is None:
        return True
    holder = holder_of(observed)
    if holder in ("", identity):
        return True
    return now - observed_at >= _declared_duration(observed, lease_duration)


def new_lease(
    *,
    namespace: str,
    name: str,
    identity: str,
    lease_duration: float,
    now: datetime,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Lease to create, held by ``identity`` from ``now``; ``labels`` let a set of Leases be listed together."""
    stamp = format_micro_time(now)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": LEASES.api_version,
        "kind": LEASES.kind,
        "metadata": metadata,
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": lease_duration_seconds(lease_duration),
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": 0,
        },
    }


def claimed_lease(
    observed: Mapping[str, Any], *, identity: str, lease_duration: float, now: datetime
) -> dict[str, Any]:
    """``observed`` (a whole Lease, with its resourceVersion) rewritten to be held by ``identity`` as of ``now``.

    Renewing our own Lease keeps ``acquireTime`` and ``leaseTransitions``; taking it from anyone else (including
    nobody, after a release) starts a new ``acquireTime`` and counts a transition. Other spec fields are kept.
    """
    lease = copy.deepcopy(dict(observed))
    old: Mapping[str, Any] = lease.get("spec") or {}
    stamp = format_micro_time(now)
    spec = dict(old)
    spec["holderIdentity"] = identity
    spec["leaseDurationSeconds"] = lease_duration_seconds(lease_duration)
    spec["renewTime"] = stamp
    if holder_of(old) == identity:
        spec["acquireTime"] = old.get("acquireTime") or stamp
        spec["leaseTransitions"] = _transitions(old)
    else:
        spec["acquireTime"] = stamp
        spec["leaseTransitions"] = _transitions(old) + 1
    lease["spec"] = spec
    return lease


def released_lease(observed: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """``observed`` rewritten as client-go's ``ReleaseOnCancel`` does: no holder, 1 s duration, fresh times."""
    lease = copy.deepcopy(dict(observed))
    stamp = format_micro_time(now)
    spec = dict(lease.get("spec") or {})
    spec.update(
        holderIdentity="",
        leaseDurationSeconds=1,
        acquireTime=stamp,
        renewTime=stamp,
        leaseTransitions=_transitions(spec),
    )
    lease["spec"] = spec
    return lease
