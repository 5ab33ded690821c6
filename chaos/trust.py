"""The faults of the trust issue (16), each with a zero-tolerance verdict of its own on top of the common rules.

- ``leader-freeze``: the leader is frozen (SIGSTOP) for longer than the lease while the standby takes over, then
  resumed (SIGCONT). A frozen process is the sharpest test of fencing: it wakes up with requests already prepared and
  a belief that it leads, and nothing but a clock check right before the wire can stop them. Verdict: no write from
  the frozen replica once its Lease had expired, with 0 s slack (``fencing`` defines "expired" precisely).
- ``slow-api``: 3-6 s per API call (toxiproxy latency with jitter on both replicas' connections, both directions)
  for 60 s. A slow API is not a dead one: a replica that exits, or gets restarted, because calls are slow turns a
  brownout into an outage. Verdict: no replica exits or restarts in the window (0 tolerated), and the common
  "recovered" rule (canary and backlog) for convergence after it.

Why a module apart from ``faults``: these two come with their own verdicts (``judge``), computed from the audit log
after the run like the common rules, and the rules are the point of the issue. The table ``faults.FAULTS`` lists
them with the others.

Used by ``faults`` (the table) and, through it, ``scenario``.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from chaos import fencing, identity
from chaos.harness import SLOTS, Harness, other_slot
from chaos.verdicts import Rule, Window
from harness.audit import Request

FREEZE_RULE = "no write from the frozen replica after its Lease expired (0 s slack)"
CRASH_RULE = "no crash loop: no replica exited or restarted (0 tolerated)"


async def leader_freeze(h: Harness, w: Window, *, at_least: float = 1.5, at_most: float = 4.0) -> None:
    """SIGSTOP the leader; SIGCONT once the standby holds the Lease and ``at_least`` lease durations have passed.

    Never longer than ``at_most`` lease durations: if the standby has not taken over by then the note says so and
    the verdict still judges every write the frozen replica made.
    """
    slot = await h.leader_before_fault(w)
    standby = other_slot(slot)
    replica = h.replicas[slot]
    lease = h.cfg.lease_duration
    w.step(f"freeze the leader {slot} (SIGSTOP)")
    pid = replica.freeze()
    if pid is None:
        raise RuntimeError(f"the leader {slot} had no running process to freeze; its logs are in {replica.workdir}")
    frozen = w.marks["frozen"] = time.time()
    w.extra["frozen replica"] = slot
    took_over: float | None = None
    try:
        w.step(f"wait for {standby} to take the Lease ({at_least:g}-{at_most:g} lease durations)")
        while time.time() - frozen < at_most * lease:
            if took_over is None and await h.leader_now() == standby:
                took_over = time.time()
            if took_over is not None and time.time() - frozen >= at_least * lease:
                break
            await asyncio.sleep(0.25)
    finally:
        w.step(f"thaw {slot} (SIGCONT)")
        replica.thaw()
    w.healed = w.marks["thawed"] = time.time()
    held = w.healed - frozen
    w.notes.append(
        f"the leader {slot} (pid {pid}) frozen with SIGSTOP for {held:.1f}s ({held / lease:.1f}x the {lease:g}s "
        "lease), then SIGCONT; "
        + (
            f"{standby} took the Lease {took_over - frozen:.1f}s after the SIGSTOP"
            if took_over is not None
            else f"{standby} had not taken the Lease when it was resumed"
        )
    )


def judge_leader_freeze(h: Harness, w: Window, *, requests: list[Request], timeline: list[Request]) -> list[Rule]:
    slot = w.extra.get("frozen replica", "")
    if slot not in SLOTS or "frozen" not in w.marks:
        return [Rule(FREEZE_RULE, False, "not judged: the fault recorded no frozen replica")]
    user = identity.username(h.serviceaccount(slot))
    frozen = w.marks["frozen"]
    last = fencing.covering(fencing.grants(timeline), user=user, at=frozen)
    if last is not None:
        w.extra[f"{slot}: last Lease renewal before the freeze (renewTime)"] = (
            f"{_clock(last.renew_time)} ({last.renew_time - frozen:+.3f}s), held as {last.holder}"
        )
        w.extra[f"{slot}: its Lease expired at (renewTime + {last.duration:g}s)"] = (
            f"{_clock(last.expires)} ({last.expires - frozen:+.3f}s)"
        )
    standby = [g for g in fencing.grants(timeline) if g.user != user and frozen <= g.completed <= w.end]
    if standby:
        w.extra["the standby's first Lease write after the freeze"] = (
            f"{_clock(standby[0].completed)} ({standby[0].completed - frozen:+.3f}s), as {standby[0].holder}"
        )
    thawed = w.marks.get("thawed", w.end)
    resumed = [r for r in requests if r.user == user and thawed <= r.received <= w.end]
    first = ""
    if resumed:
        first = f"; first: {resumed[0].verb} {resumed[0].resource} at {resumed[0].received - frozen:+.3f}s"
    writes = sum(1 for r in resumed if r.is_write and r.resource != "leases")
    w.extra[f"{slot}: requests after the SIGCONT"] = f"{len(resumed)}, {writes} of them writes (Leases aside){first}"
    accepted, rejected = fencing.late_writes(requests, timeline, user=user, start=frozen, end=w.end)
    detail = f"{len(accepted)} accepted, {len(rejected)} rejected writes from {slot} after its Lease expired"
    if accepted or rejected:
        detail += ": " + "; ".join(late.describe(frozen) for late in (accepted + rejected)[:6])
    elif last is None:
        detail += f" (no Lease renewal by {slot} found before the freeze)"
    return [Rule(FREEZE_RULE, not accepted and not rejected, detail)]


async def slow_api(h: Harness, w: Window, *, ms: int = 2250, jitter: int = 750, hold: float = 60.0) -> None:
    """``ms`` ± ``jitter`` each way on both replicas' connections, for ``hold`` seconds.

    A call on an open connection then takes ``2 * (ms - jitter)`` to ``2 * (ms + jitter)`` ms: 3-6 s by default.
    """
    w.step(f"inject {ms}±{jitter} ms each way on both replicas")
    for slot in SLOTS:
        await h.toxi.latency(slot, ms=ms, jitter=jitter)
    h.slack_at.append((time.time(), time.time() + hold + 10, (ms + jitter) / 1000))
    w.notes.append(
        f"{ms}±{jitter} ms each way on both replicas' connections for {hold:.0f}s: "
        f"{2 * (ms - jitter) / 1000:g}-{2 * (ms + jitter) / 1000:g}s per API call on an open connection"
    )
    w.step(f"hold {hold:.0f}s")
    await asyncio.sleep(hold)
    w.step("heal: recreate both proxies")
    await h.toxi.heal_all()
    w.healed = time.time()


def judge_slow_api(h: Harness, w: Window, *, requests: list[Request], timeline: list[Request]) -> list[Rule]:
    del requests, timeline  # judged from the supervised processes, not the audit log
    exits = [i for i in h.incidents() if i.kind == "exited" and w.start <= i.time <= w.end]
    detail = f"{len(exits)} replica exits in the window"
    if exits:
        detail += ": " + "; ".join(f"{i.slot}: {i.detail} at {i.time - w.start:+.1f}s" for i in exits[:6])
    return [Rule(CRASH_RULE, not exits, detail)]


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%H:%M:%S.%f UTC")
