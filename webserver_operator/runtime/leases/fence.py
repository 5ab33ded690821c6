"""``LeaseFence``: the validity deadline of one Lease, the single rule that decides whether a write may leave.

Why a deadline and not a flag: a flag ("I am the leader") turns false only when the code that clears it gets to run.
An event loop frozen for a few seconds (CPU throttling at the pod's limit, a big relist, a GC pause) runs nothing,
and the reconcile that happens to resume first still sees the flag set and writes, although a standby may have taken
the Lease meanwhile. A deadline needs no code to run to expire: whoever reads it reads the clock too.

The rule (the one leader election rests on): a standby takes a Lease over no earlier than ``lease_duration`` after it
first saw the holder's last record, which the server stored after the holder *sent* it. So the holder may write
until ``sent + renew_deadline`` of its last successful renew, measured on its own monotonic clock; with
``renew_deadline < lease_duration`` the difference is the time a write checked just before that deadline has to
reach the API server. Clocks of different nodes are never compared, only elapsed time on ours.

One fence per Lease: the leader's Lease, or each shard's Lease with ``--shards`` > 1, whose writes consult their shard's
fence (``runtime.sharding.shardset.ShardSet.why_not``, by the namespace in the request path). The fence is pure (the
clock is injected): ``renewed`` and ``revoke`` are called by the Lease's renew loop (``runtime.leases.lease.Lease``),
``why_not`` by the API client just before a request goes on the wire (``kube.gate``, through ``KubeClient.gated``). It
hands on one thing: ``None`` (write) or why not, in words a log reader can act on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["LeaseFence"]


class LeaseFence:
    """Writes covered by the Lease ``name`` are allowed while ``clock() < sent + renew_deadline`` of its last renew."""

    def __init__(self, name: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        self._sent: float | None = None
        self._renew_deadline = 0.0
        self._revoked: str | None = f"lease {name} is not held by this replica (yet)"

    def renewed(self, *, sent: float, renew_deadline: float) -> None:
        """A write of the Lease naming us, sent at ``sent`` (this fence's clock), succeeded: extend the validity."""
        if not (math.isfinite(renew_deadline) and renew_deadline > 0):
            raise ValueError(f"renew_deadline must be a positive number of seconds, got {renew_deadline!r}")
        if self._revoked is not None or self._sent is None or sent >= self._sent:
            self._sent, self._renew_deadline = sent, renew_deadline
        self._revoked = None

    def revoke(self, why: str) -> None:
        """Close the fence now, whatever the deadline says (the Lease was lost, released or taken)."""
        self._revoked = why

    @property
    def valid_until(self) -> float | None:
        """The clock reading from which writes are refused; ``None`` while the fence is revoked."""
        if self._revoked is not None or self._sent is None:
            return None
        return self._sent + self._renew_deadline

    def why_not(self) -> str | None:
        """``None`` while a write may leave; otherwise why it may not (for ``WritesStopped``)."""
        if self._revoked is not None or self._sent is None:
            return self._revoked or f"lease {self.name} was never renewed"
        age = self._clock() - self._sent
        if age < self._renew_deadline:
            return None
        return (
            f"the last successful renew of lease {self.name} was sent {age:.1f}s ago, beyond the renew deadline "
            f"({self._renew_deadline:g}s): a standby may take over, so this replica writes nothing until a renew "
            "succeeds (if this repeats, the API server is slow or the operator's CPU limit throttles it)"
        )
