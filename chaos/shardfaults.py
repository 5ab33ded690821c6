"""The faults of a sharded run (issue 18), each judged with zero tolerance by ``shardverdicts``.

Three replicas with ``--shards 8`` under churn, and one fault at a time:

- ``shard-kill``: the replica holding the most shards is killed (-9) and its slot kept down for lease duration + 10 s
  before the supervisor restarts it. A restart after 1 s (the unsharded runs' supervisor) would let the new process
  claim the same shards back as they expire, so "the dead replica's shards are taken over" could not be told from
  "it came back"; held down, the other replicas must take every one of its shards within lease duration + 5 s.
- ``shard-freeze``: the replica holding the most shards is frozen (SIGSTOP) for lease duration + 5 s, then resumed
  (SIGCONT): its shards must be taken over within lease duration + 5 s, and once resumed it must write nothing for
  shards it no longer holds (the fence rule judges every write, at 0 s slack).
- ``shard-scale``: a fourth replica is started and the shares settle (2 each), then two replicas are stopped at once
  with SIGTERM (each drains and releases its shards), and the two left settle at 4 each; the stopped ones must exit 0.
- ``shard-apiserver-restart``: ``faults.apiserver_restart`` with the sharded verdicts.

Every sharded fault is also judged on the rules of every sharded window (``judge_window``): no unfenced write, no
shard written by two replicas in one window, and the shards settled again after the recovery (``settle``, called by
``scenario`` once the canary and the backlog are measured): every shard held by one live replica, shares within one.

Used by ``faults`` (the table) and ``scenario``.
"""

from __future__ import annotations

import asyncio
import math
import time

from chaos import identity, shards
from chaos.fencing import Tenure
from chaos.harness import Harness
from chaos.shardverdicts import (
    OWNERSHIP_RULE,
    TAKEOVER_RULE,
    ShardOf,
    ShardWrite,
    fence_rule,
    handovers,
    incarnation,
    overlap_rule,
    shard_tenures,
    shard_writes,
    takeover_rule,
    takeovers,
)
from chaos.verdicts import Rule, Window
from harness.audit import Request

SPARE = "op-d"
EXIT_RULE = "the replicas stopped with SIGTERM exit 0"


def takeover_limit(h: Harness) -> float:
    return h.cfg.lease_duration + 5.0


async def _busiest(h: Harness, w: Window) -> tuple[str, list[int]]:
    """The live slot holding the most shards now (the fault's target), and its shards."""
    held = {slot: sorted(s) for slot, s in (await h.holders()).items() if slot in h.live_slots()}
    if not held:
        raise RuntimeError(f"no live replica holds a shard Lease ({h.ownership_text}); nothing to fault")
    slot = max(sorted(held), key=lambda s: len(held[s]))
    w.extra["shards held before the fault"] = "; ".join(f"{s}: {held[s]}" for s in sorted(held))
    return slot, held[slot]


async def shard_kill(h: Harness, w: Window) -> None:
    slot, held = await _busiest(h, w)
    replica = h.replicas[slot]
    down = h.cfg.lease_duration + 10.0
    pid = replica.pid
    w.step(f"kill {slot} (-9, holding shards {held}) and keep its slot down {down:.0f}s")
    replica.hold_down(down)
    w.marks["fault"] = time.time()
    h.kill(slot)
    w.extra["killed replica"] = slot
    w.step(f"wait for {slot} to be restarted")
    while replica.pid in (None, pid):
        if time.time() - w.marks["fault"] > down + 30:
            raise RuntimeError(f"{slot} was not restarted within {down + 30:.0f}s of its kill; logs in {h.workdir}")
        await asyncio.sleep(0.25)
    w.healed = time.time()
    w.notes.append(
        f"{slot} (pid {pid}, shards {held}) killed -9; its slot kept down {down:.0f}s (lease duration + 10 s), "
        f"restarted {w.healed - w.marks['fault']:.1f}s after the kill"
    )


async def shard_freeze(h: Harness, w: Window) -> None:
    slot, held = await _busiest(h, w)
    replica = h.replicas[slot]
    hold = h.cfg.lease_duration + 5.0
    w.step(f"freeze {slot} (SIGSTOP, holding shards {held}) for {hold:.0f}s")
    pid = replica.freeze()
    if pid is None:
        raise RuntimeError(f"{slot} had no running process to freeze; its logs are in {replica.workdir}")
    w.marks["fault"] = time.time()
    w.extra["frozen replica"] = slot
    try:
        await asyncio.sleep(hold)
    finally:
        w.step(f"thaw {slot} (SIGCONT)")
        replica.thaw()
    w.healed = time.time()
    w.notes.append(f"{slot} (pid {pid}, shards {held}) frozen with SIGSTOP for {w.healed - w.marks['fault']:.1f}s")


async def shard_scale(h: Harness, w: Window) -> None:
    w.step(f"start a fourth replica ({SPARE})")
    replica = await h.start_spare(SPARE)
    if not await asyncio.to_thread(replica.wait_ready, 60):
        raise RuntimeError(f"{SPARE} not ready within 60s; its logs are in {replica.workdir}")
    w.step("wait for the shares to settle over four replicas")
    settled = await h.wait_settled(h.cfg.cap)
    w.extra["3 -> 4: settled after the fourth replica started"] = (
        f"{settled:.1f}s ({h.ownership_text})" if settled is not None else f"not within {h.cfg.cap:.0f}s"
    )
    held = await h.holders()
    stop = sorted(h.live_slots() - {SPARE}, key=lambda s: (-len(held.get(s, [])), s))[:2]
    w.step(f"SIGTERM {', '.join(stop)} at once")
    w.marks["scaled down"] = time.time()
    codes = await asyncio.gather(*(h.retire(slot) for slot in stop))
    w.healed = time.time()
    for slot, code in zip(stop, codes, strict=True):
        w.marks[f"exit:{slot}"] = float("nan") if code is None else float(code)
    w.extra["4 -> 2: stopped with SIGTERM"] = ", ".join(
        f"{slot} (shards {sorted(held.get(slot, []))}) exit {code}" for slot, code in zip(stop, codes, strict=True)
    )
    w.extra["4 -> 2: drain and exit took"] = f"{w.healed - w.marks['scaled down']:.1f}s"
    w.notes.append(f"{SPARE} started, then {' and '.join(stop)} stopped with SIGTERM at once")


async def settle(h: Harness, w: Window) -> None:
    """After the recovery: wait (up to the window's cap) for every shard to be held once, shares within one."""
    w.step("wait for the shards to settle")
    took = await h.wait_settled(w.cap)
    if took is not None:
        w.marks["settled"] = took
    w.extra["shards settled after the recovery"] = (
        f"{took:.1f}s ({h.ownership_text})" if took is not None else f"not within {w.cap:.0f}s: {h.ownership_text}"
    )
    w.end = time.time()


# -- verdicts -------------------------------------------------------------------------------------------------------


def shard_of(h: Harness) -> ShardOf:
    return lambda ns: None if ns == identity.AUDITED_NAMESPACE else shards.shard_of(ns, h.cfg.shards)


def audited(h: Harness, requests: list[Request]) -> tuple[dict[int, list[Tenure]], list[ShardWrite]]:
    """Every shard's tenures and every write to a shard's objects, from the audited requests of the whole run."""
    writer = incarnation(h.starts())
    found = shard_tenures(requests, group=h.lease, shards=h.cfg.shards, writer=writer)
    return found, shard_writes(requests, found, shard_of=shard_of(h), writer=writer)


def judge_window(h: Harness, w: Window, *, requests: list[Request], timeline: list[Request]) -> list[Rule]:
    """The rules of every sharded window: fenced writes, one writer per shard, settled after the recovery."""
    del timeline  # the leader Lease's: a sharded run has none
    found, writes = audited(h, requests)
    w.extra["shard handovers in the window"] = str(len(handovers(found, w.start, w.end)))
    settled = w.extra.get("shards settled after the recovery", "not checked: the window ended before the recovery")
    return [
        fence_rule(writes, start=w.start, end=w.end, origin=w.start),
        overlap_rule(writes, start=w.start, end=w.end, origin=w.start),
        Rule(f"{OWNERSHIP_RULE} (after the recovery)", "settled" in w.marks, settled),
    ]


def _dead_rules(h: Harness, w: Window, requests: list[Request], slot: str) -> list[Rule]:
    if not slot or "fault" not in w.marks:
        return [Rule(TAKEOVER_RULE, False, "not judged: the fault recorded no faulted replica")]
    found, _ = audited(h, requests)
    victim = identity.username(h.serviceaccount(slot))
    taken = takeovers(found, victim=victim, at=w.marks["fault"], until=w.end)
    return [takeover_rule(taken, victim=slot, limit=takeover_limit(h))]


def judge_kill(h: Harness, w: Window, *, requests: list[Request], timeline: list[Request]) -> list[Rule]:
    own = _dead_rules(h, w, requests, w.extra.get("killed replica", ""))
    return judge_window(h, w, requests=requests, timeline=timeline) + own


def judge_freeze(h: Harness, w: Window, *, requests: list[Request], timeline: list[Request]) -> list[Rule]:
    own = _dead_rules(h, w, requests, w.extra.get("frozen replica", ""))
    return judge_window(h, w, requests=requests, timeline=timeline) + own


def judge_scale(h: Harness, w: Window, *, requests: list[Request], timeline: list[Request]) -> list[Rule]:
    codes = {k.removeprefix("exit:"): v for k, v in w.marks.items() if k.startswith("exit:")}
    detail = ", ".join(f"{slot}: {'not running' if math.isnan(code) else f'{code:g}'}" for slot, code in codes.items())
    own = Rule(EXIT_RULE, bool(codes) and all(code == 0 for code in codes.values()), detail or "nothing was stopped")
    return [*judge_window(h, w, requests=requests, timeline=timeline), own]
