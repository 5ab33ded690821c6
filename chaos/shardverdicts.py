"""The verdicts of a sharded run (``--shards``): one Lease per shard, judged from the audit log and the Lease objects.

Why a module of its own: with shards there is no single leader, so "a deposed leader's write" (``verdicts``) has no
meaning; what every replica relies on instead is that a shard's objects are written only by the replica whose grant
of *that shard's* Lease is current. These rules are the zero-tolerance verdicts of issue 18, pure functions over
``harness.audit.Request`` records so that they are tested on synthetic audit records
(``tests/unit/chaos/test_shardverdicts.py``):

- **fenced**: every write to a shard's objects (a namespaced write other than a Lease's: Deployments, Services,
  WebServer status, Events) was received while its writer's tenure of that shard's Lease covered it
  (``fencing.tenures``: the latest grant the writer had stored before the write, until ``renewTime +
  leaseDurationSeconds`` or the writer's own release). No slack: accepted and rejected writes both count.
- **one writer at a time**: no shard written by two replicas in one window: a write, and an earlier write to the same
  shard by another replica whose covering tenure had not ended when the later write arrived.
- **takeover**: the shards a dead (killed or frozen) replica held when the fault began are each granted to another
  slot within the limit (lease duration + 5 s), counted from the fault's start to the API server storing the grant.
- **ownership**: every shard Lease has exactly one holder, a live replica renewing it, and the live replicas' shares
  differ by at most one (read from the Lease objects once the run has settled).

A *writer* is one process: the slot's ServiceAccount and the incarnation the write came from (``incarnation``,
from the supervisor's start times), so a replica restarted in the same slot inherits nothing from the one killed.

Used by ``shardfaults`` (per fault window) and ``scenario`` (the whole run).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from chaos.fencing import Tenure, Writer, covering_tenure, tenures
from chaos.verdicts import Rule
from harness.audit import Request

ShardOf = Callable[[str], int | None]
"""The shard of a namespace's objects, None for a namespace outside the sharded space (the Leases' own)."""


def shard_lease(group: str, shard: int) -> str:
    """The name of shard ``shard``'s Lease for the leader-election id ``group`` (``<group>-shard-<i>``)."""
    return f"{group}-shard-{shard}"


def slot_of_holder(holder: str) -> str:
    """``op-a_3f2c`` -> ``op-a``: a replica's Lease identity is ``<POD_NAME>_<random>`` and POD_NAME is its slot."""
    return holder.split("_", 1)[0]


def incarnation(starts: dict[str, list[float]]) -> Writer:
    """A writer function: ``<user>#<n>`` for the n-th process of the user's slot alive when the request arrived.

    ``starts`` maps each slot's user to the times its processes were started, in order.
    """

    def writer(r: Request) -> str:
        return f"{r.user}#{bisect.bisect_right(starts.get(r.user, []), r.received)}"

    return writer


def shard_tenures(requests: list[Request], *, group: str, shards: int, writer: Writer) -> dict[int, list[Tenure]]:
    """Each shard's tenures, from the successful writes of its Lease in ``requests``."""
    pattern = re.compile(rf"^{re.escape(group)}-shard-(\d+)$")
    timelines: dict[int, list[Request]] = {i: [] for i in range(shards)}
    for r in requests:
        m = pattern.match(r.name) if r.resource == "leases" else None
        if m and int(m.group(1)) < shards and r.lease_holder is not None:
            timelines[int(m.group(1))].append(r)
    return {i: tenures(t, writer=writer) for i, t in timelines.items()}


@dataclass(frozen=True)
class ShardWrite:
    """One write to a shard's objects and the tenure that covered it (None: none did)."""

    write: Request
    shard: int
    writer: str
    tenure: Tenure | None

    @property
    def late(self) -> bool:
        return self.tenure is None or self.write.received > self.tenure.end

    def describe(self, origin: float) -> str:
        w = self.write
        who = self.writer.rsplit(":", 1)[-1]
        what = f"{who} {w.verb} {w.resource} {w.namespace}/{w.name} (shard {self.shard}) -> {w.code} at "
        what += f"{w.received - origin:+.3f}s"
        if self.tenure is None:
            return f"{what}, never covered by a grant of the shard's Lease"
        if self.write.received > self.tenure.end:
            how = "released" if self.tenure.released is not None else "expired"
            return f"{what}, {w.received - self.tenure.end:.3f}s after its grant {how} (as {self.tenure.grant.holder})"
        return f"{what}, covered as {self.tenure.grant.holder} until {self.tenure.end - origin:+.3f}s"


def shard_writes(
    requests: list[Request], found: dict[int, list[Tenure]], *, shard_of: ShardOf, writer: Writer
) -> list[ShardWrite]:
    """Every write to a shard's objects in ``requests`` (Lease writes and cluster-scoped writes aside), oldest first."""
    out = []
    for r in sorted(requests, key=lambda r: r.received):
        if not r.is_write or r.resource == "leases" or not r.namespace:
            continue
        shard = shard_of(r.namespace)
        if shard is None:
            continue
        who = writer(r)
        out.append(ShardWrite(r, shard, who, covering_tenure(found.get(shard, []), writer=who, at=r.received)))
    return out


def unfenced(writes: list[ShardWrite], start: float = 0.0, end: float = float("inf")) -> list[ShardWrite]:
    """The writes received in [start, end] that no current tenure of their shard's Lease covered."""
    return [w for w in writes if w.late and start <= w.write.received <= end]


@dataclass(frozen=True)
class Overlap:
    """A write while another replica's tenure of the same shard, which covered its own earlier write, still ran."""

    later: ShardWrite
    earlier: ShardWrite

    def describe(self, origin: float) -> str:
        assert self.earlier.tenure is not None
        return (
            f"shard {self.later.shard}: {self.later.describe(origin)}; while "
            f"{self.earlier.describe(origin)} and that grant ran until {self.earlier.tenure.end - origin:+.3f}s"
        )


def overlaps(writes: list[ShardWrite], start: float = 0.0, end: float = float("inf")) -> list[Overlap]:
    """Writes received in [start, end] to a shard another replica was still entitled to write (see the module)."""
    found: list[Overlap] = []
    last: dict[tuple[int, str], ShardWrite] = {}  # (shard, writer) -> its covered write whose tenure ends last
    for w in writes:
        if start <= w.write.received <= end:
            for (shard, who), earlier in last.items():
                current = earlier.tenure is not None and earlier.tenure.end > w.write.received
                if shard == w.shard and who != w.writer and current:
                    found.append(Overlap(w, earlier))
        if w.tenure is not None:
            known = last.get((w.shard, w.writer))
            if known is None or known.tenure is None or w.tenure.end >= known.tenure.end:
                last[(w.shard, w.writer)] = w
    return found


def held_at(found: dict[int, list[Tenure]], at: float) -> dict[int, Tenure]:
    """The tenure of each shard that was current at ``at`` (granted before, not yet ended).

    Shards held by nobody are left out. Where two tenures seem current, the latest grant wins.
    """
    held = {}
    for shard, ts in found.items():
        current = [t for t in ts if t.grant.completed <= at < t.end]
        if current:
            held[shard] = current[-1]
    return held


@dataclass(frozen=True)
class Takeover:
    shard: int
    delay: float | None  # seconds from the fault's start to another slot's first grant; None: none in the window
    by: str  # that grant's holder


def takeovers(found: dict[int, list[Tenure]], *, victim: str, at: float, until: float) -> list[Takeover]:
    """For each shard ``victim`` (a user: the slot) held at ``at``, when another slot was first granted it."""
    out = []
    for shard, tenure in sorted(held_at(found, at).items()):
        if tenure.grant.user != victim:
            continue
        after = [t for t in found[shard] if t.grant.user != victim and at <= t.grant.completed <= until]
        first = min(after, key=lambda t: t.grant.completed, default=None)
        out.append(
            Takeover(shard, None, "")
            if first is None
            else Takeover(shard, first.grant.completed - at, first.grant.holder)
        )
    return out


def handovers(found: dict[int, list[Tenure]], start: float, end: float) -> list[str]:
    """Each change of a shard's writer in [start, end]: ``shard 3: op-b_1f2e from +4.2s``."""
    out: list[tuple[float, str]] = []
    for shard, ts in found.items():
        previous = ""
        for t in ts:
            if t.writer != previous and start <= t.grant.completed <= end:
                text = f"shard {shard}: {t.grant.holder} from {t.grant.completed - start:+.1f}s"
                out.append((t.grant.completed, text))
            previous = t.writer
    return [text for _, text in sorted(out)]


@dataclass(frozen=True)
class LeaseView:
    """A shard Lease as read from the API server."""

    shard: int
    holder: str
    renew_time: float | None
    duration: float | None


def ownership(leases: list[LeaseView], *, shards: int, live: set[str], now: float) -> tuple[bool, str]:
    """Every shard held by one live replica renewing it, shares within one: (settled, what the Leases say)."""
    by_shard = {v.shard: v for v in leases}
    problems = []
    shares: Counter[str] = Counter(dict.fromkeys(live, 0))
    for shard in range(shards):
        v = by_shard.get(shard)
        if v is None:
            problems.append(f"shard {shard}: no Lease")
        elif not v.holder:
            problems.append(f"shard {shard}: no holder")
        elif slot_of_holder(v.holder) not in live:
            problems.append(f"shard {shard}: held by {v.holder}, not a running replica")
        elif v.renew_time is None or v.duration is None or v.renew_time + v.duration < now:
            problems.append(f"shard {shard}: {v.holder}'s grant expired")
        else:
            shares[slot_of_holder(v.holder)] += 1
    spread = max(shares.values(), default=0) - min(shares.values(), default=0)
    if spread > 1:
        problems.append(f"shares differ by {spread}")
    text = ", ".join(f"{slot} {n}" for slot, n in sorted(shares.items()))
    return not problems, f"shares {text}" + (f"; {'; '.join(problems)}" if problems else "")


FENCE_RULE = "0 writes for a shard without a current grant of its Lease (0 s slack)"
OVERLAP_RULE = "no shard written by two replicas in one window"
TAKEOVER_RULE = "the dead replica's shards taken over within lease duration + 5 s"
OWNERSHIP_RULE = "every shard held by one live replica, shares within one"


def fence_rule(writes: list[ShardWrite], *, start: float, end: float, origin: float) -> Rule:
    late = unfenced(writes, start, end)
    accepted = [w for w in late if w.write.ok]
    judged = sum(1 for w in writes if start <= w.write.received <= end)
    detail = f"{len(accepted)} accepted, {len(late) - len(accepted)} rejected unfenced writes of {judged} judged"
    if late:
        detail += ": " + "; ".join(w.describe(origin) for w in late[:6])
    return Rule(FENCE_RULE, not late, detail)


def overlap_rule(writes: list[ShardWrite], *, start: float, end: float, origin: float) -> Rule:
    found = overlaps(writes, start, end)
    detail = f"{len(found)} writes while another replica's grant of the shard still ran"
    if found:
        detail += ": " + "; ".join(o.describe(origin) for o in found[:4])
    return Rule(OVERLAP_RULE, not found, detail)


def takeover_rule(taken: list[Takeover], *, victim: str, limit: float) -> Rule:
    slow = [t for t in taken if t.delay is None or t.delay > limit]
    parts = [f"shard {t.shard}: {'never' if t.delay is None else f'{t.delay:.1f}s'}" for t in taken]
    detail = f"{victim} held {len(taken)} shards at the fault's start; taken over after " + (", ".join(parts) or "-")
    detail += f" (limit {limit:g}s)"
    if not taken:
        detail += "; nothing to judge: the replica held no shard"
    return Rule(TAKEOVER_RULE, bool(taken) and not slow, detail)
