"""The faults: each injects one failure into the real control plane, the network or the operator, then heals it.

Every fault is an ``async def (harness, window)`` that returns once the fault is healed and sets ``window.healed`` to
the moment the failure ended (the component answers again, the proxy is back without toxics, the replacement
started): recovery is measured from there. The churn keeps running through every fault, so a fault never blocks the
event loop: everything slow is awaited (the toxiproxy client is asyncio, process waits run in threads). A fault
announces its steps (``window.step``) so that a harness failure names where it happened, and what it froze it thaws
in a ``finally``. Facts a fault learns on the way (a PID, how long a drain took, which replica was cut off) go to
``window.notes`` and ``window.extra`` for the report.

A toxiproxy fault heals by recreating the proxy (see ``toxiproxy``): the faulted connections are dropped, as after
a real network recovery, and the operator reconnects. The fault still means what it says (latency on the leader's
connections while it is SIGTERMed, and so on); only its end is abrupt.

Why the compaction fault restarts the API server: while the API server's watch cache still holds the history a
watcher resumes from, compacting etcd does not reach that watcher at all. Restarting it during the gap drops that
cache, so the frozen replica's resume point is older than anything the server still has and its watches are answered
410 Gone, which is the path under test (relist, then resume).

Used by ``scenario``; the table ``FAULTS`` names them.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from chaos import identity, shardfaults, trust
from chaos.harness import SLOTS, Harness, other_slot
from chaos.verdicts import Rule, Window
from harness.audit import Request

FaultFn = Callable[[Harness, Window], Awaitable[None]]


class Judge(Protocol):
    """A fault's own verdicts, from the finished window, the audited requests and the Lease timeline."""

    def __call__(self, h: Harness, w: Window, *, requests: list[Request], timeline: list[Request]) -> list[Rule]: ...


async def etcd_freeze(h: Harness, w: Window) -> None:
    w.step("etcd frozen (SIGSTOP)")
    pid = h.cp.send("etcd", signal.SIGSTOP)
    w.notes.append(f"etcd pid {pid}: SIGSTOP, SIGCONT {h.cfg.etcd_freeze:.0f}s later")
    try:
        await asyncio.sleep(h.cfg.etcd_freeze)
    finally:
        h.cp.send("etcd", signal.SIGCONT)
    w.healed = time.time()


async def etcd_kill(h: Harness, w: Window) -> None:
    pid = h.cp.pid("etcd")
    w.step("kill etcd (-9) and start it again 3s later")
    await asyncio.to_thread(h.cp.stop, "etcd", signal.SIGKILL)
    await asyncio.sleep(3)
    new = await asyncio.to_thread(h.cp.start, "etcd", why="restarted after kill -9 (fault)")
    w.notes.append(f"etcd pid {pid}: SIGKILL; restarted 3s later as pid {new} with its recorded command line")
    w.healed = time.time()


async def apiserver_restart(h: Harness, w: Window) -> None:
    pid = h.cp.pid("kube-apiserver")
    stopped = time.time()
    w.step("restart kube-apiserver and wait for /readyz")
    # kube-apiserver stops listening at once on SIGTERM but its process can linger for its request timeout; a
    # supervisor restarting it would not wait for that, so after 5s it is killed.
    await asyncio.to_thread(h.cp.stop, "kube-apiserver", signal.SIGTERM, timeout=5.0)
    new = await asyncio.to_thread(h.cp.start, "kube-apiserver", why="restarted (fault)")
    await h.api_ready(90)
    w.healed = time.time()
    w.notes.append(f"kube-apiserver pid {pid}: SIGTERM; started again as pid {new}")
    w.extra["API server unavailable (s)"] = f"{w.healed - stopped:.1f}"


async def compaction_gap(h: Harness, w: Window) -> None:
    leader = await h.leader_before_fault(w)
    frozen = other_slot(leader)
    w.step(f"cut {frozen} off (half-open)")
    await h.toxi.half_open(frozen)
    w.extra["replica cut off during the gap"] = frozen
    await asyncio.sleep(2)
    w.step("write a burst and delete WebServers during the gap")
    changed = await h.churn.burst(min(100, len(h.slots) // 2))
    deleted = 0
    for slot in h.rng.sample([s for s in h.slots if s.exists and not s.busy], min(10, len(h.slots) // 10)):
        slot.busy = True
        try:
            await h.churn.delete(slot)
            deleted += 1
        finally:
            slot.busy = False
    w.step("compact etcd and restart kube-apiserver")
    revision = await asyncio.to_thread(h.cp.compact)
    await asyncio.to_thread(
        h.cp.restart, "kube-apiserver", signal.SIGTERM, why="restarted to drop its watch cache", grace=5.0
    )
    await h.api_ready(90)
    w.step(f"heal: recreate proxy {frozen}")
    await h.toxi.heal(frozen)
    w.healed = time.time()
    w.extra["written during the gap"] = f"{changed} spec changes, {deleted} deletes"
    w.extra["etcd compacted at revision"] = str(revision)
    w.step("make the relisted replica lead")
    await asyncio.sleep(3)
    # The relisted replica must now lead: its cache is what every later reconcile trusts.
    current = await h.wait_leader(30)
    if current is not None and current != frozen:
        h.kill(current)
        w.notes.append(f"{current} killed (-9) 3s after the heal so that {frozen}, the relisted replica, takes over")


def _after_compaction_gap(h: Harness, w: Window) -> None:
    slot = w.extra.get("replica cut off during the gap", "")
    if slot not in SLOTS:
        return
    user = identity.username(h.serviceaccount(slot))
    after = [r for r in h.audit.requests(w.healed, w.end) if r.user == user]
    lists = [r for r in after if r.verb == "list"]
    w.extra[f"{slot}: LISTs after the heal (relists)"] = str(len(lists))
    watches = [r for r in after if r.verb == "watch"]
    if watches:
        rv = parse_qs(urlsplit(watches[0].uri).query).get("resourceVersion", ["(none)"])[0]
        w.extra[f"{slot}: first watch after the heal resumed from resourceVersion"] = (
            f"{rv} (etcd compacted at {w.extra.get('etcd compacted at revision', '?')})"
        )


def _after_token_rotation(h: Harness, w: Window) -> None:
    for slot in SLOTS:
        user = identity.username(h.serviceaccount(slot))
        ok = [r for r in h.audit.requests(w.healed, w.end) if r.user == user and r.ok]
        w.extra[f"{slot}: first accepted request after the old token was revoked"] = (
            f"{ok[0].received - w.healed:.1f}s later" if ok else "none in the window"
        )


async def apf_starvation(h: Harness, w: Window, *, hold: float = 30.0) -> None:
    w.step(f"starve the operators' ServiceAccounts for {hold:.0f}s")
    await identity.starve(h.api, [h.serviceaccount(s) for s in SLOTS])
    w.notes.append(
        f"FlowSchema + PriorityLevelConfiguration {identity.STARVED} (0 shares, no borrowing, Reject) for {hold:.0f}s"
    )
    await asyncio.sleep(hold)
    w.step("heal: remove the starving FlowSchema")
    await identity.unstarve(h.api)
    w.healed = time.time()


async def latency(h: Harness, w: Window, *, ms: int = 800, jitter: int = 400, hold: float = 20.0) -> None:
    w.step("inject latency on both replicas")
    for slot in SLOTS:
        await h.toxi.latency(slot, ms=ms, jitter=jitter)
    h.slack_at.append((time.time(), time.time() + hold + 5, (ms + jitter) / 1000))
    w.notes.append(f"{ms}±{jitter} ms each way on both replicas' connections for {hold:.0f}s")
    w.step(f"hold {hold:.0f}s")
    await asyncio.sleep(hold)
    w.step("heal: recreate both proxies")
    await h.toxi.heal_all()
    w.healed = time.time()


async def reset(h: Harness, w: Window, *, slots: tuple[str, ...] = SLOTS, hold: float = 2.0) -> None:
    w.step(f"reset every connection of {', '.join(slots)}")
    for slot in slots:
        await h.toxi.reset(slot)
    w.notes.append(f"every connection of {', '.join(slots)} reset (RST), new ones too, for {hold:.0f}s")
    await asyncio.sleep(hold)
    w.step(f"heal: recreate proxy {', '.join(slots)}")
    for slot in slots:
        await h.toxi.heal(slot)
    w.healed = time.time()


async def reset_leader(h: Harness, w: Window) -> None:
    await reset(h, w, slots=(await h.leader_before_fault(w),), hold=1.0)


async def half_open(h: Harness, w: Window, *, hold: float = 15.0) -> None:
    w.step("make both replicas' connections half-open")
    for slot in SLOTS:
        await h.toxi.half_open(slot)
    w.notes.append(f"both replicas' connections half-open (data dropped, no FIN) for {hold:.0f}s")
    await asyncio.sleep(hold)
    w.step("heal: recreate both proxies")
    await h.toxi.heal_all()
    w.healed = time.time()


async def api_outage(h: Harness, w: Window) -> None:
    hold = 2 * h.cfg.watch_stall_timeout + 15
    w.step("disable both proxies")
    for slot in SLOTS:
        await h.toxi.set_enabled(slot, False)
    w.notes.append(
        f"the API server unreachable for both replicas for {hold:.0f}s (proxies disabled: connections closed, "
        f"new ones refused); twice the watch stall timeout ({h.cfg.watch_stall_timeout:.0f}s) is where a "
        "liveness check based on watch progress would fail"
    )
    await asyncio.sleep(hold)
    w.step("heal: recreate both proxies")
    await h.toxi.heal_all()
    w.healed = time.time()


async def kill_during_bulk_create(h: Harness, w: Window) -> None:
    w.step(f"create {len(h.bulk_slots)} WebServers while killing the leader 3 times")
    creating = asyncio.create_task(h.churn.bulk_create(h.bulk_slots, concurrency=4))
    started = time.time()
    kills = []
    for at in sorted(h.rng.uniform(0.5, 12.0) for _ in range(3)):
        await asyncio.sleep(max(0.0, started + at - time.time()))
        slot = await h.leader()
        if slot is not None and h.kill(slot):
            kills.append(f"{slot} at {time.time() - started:.1f}s")
    took = await creating
    w.notes.append(f"{len(h.bulk_slots)} WebServers created (concurrency 4) in {took:.1f}s; leader killed -9: {kills}")
    w.healed = time.time()


async def leader_kill(h: Harness, w: Window) -> None:
    slot = await h.leader_before_fault(w)
    w.step(f"kill {slot} (-9)")
    h.kill(slot)
    w.notes.append(f"{slot} (leader) killed -9")
    w.healed = time.time()


async def sigterm_in_brownout(h: Harness, w: Window, *, ms: int = 3000) -> None:
    slot = await h.leader_before_fault(w)
    w.step(f"inject {ms} ms latency on {slot}")
    await h.toxi.latency(slot, ms=ms)
    h.slack_at.append((time.time(), time.time() + 60, ms / 1000))
    await asyncio.sleep(2)
    replica = h.replicas[slot]
    pid = replica.pid
    sent = time.time()
    w.step(f"SIGTERM {slot} (pid {pid}) and wait up to 45s for its drain")
    replica.send(signal.SIGTERM)
    for _ in range(225):  # up to 45s for the drain
        if replica.pid != pid:
            break
        await asyncio.sleep(0.2)
    w.notes.append(
        f"{ms} ms each way on the leader {slot}'s connections; SIGTERM 2s later; it exited "
        f"{time.time() - sent:.1f}s after the SIGTERM"
    )
    w.step(f"heal: recreate proxy {slot}")
    await h.toxi.heal(slot)
    w.healed = time.time()


async def leader_cut_off(h: Harness, w: Window) -> None:
    slot = await h.leader_before_fault(w)
    hold = 2.5 * h.cfg.lease_duration
    w.step(f"cut {slot} off (half-open)")
    await h.toxi.half_open(slot)
    w.notes.append(
        f"the leader {slot}'s connections half-open for {hold:.0f}s ({hold / h.cfg.lease_duration:.1f}x the lease)"
    )
    await asyncio.sleep(hold)
    w.step(f"heal: recreate proxy {slot}")
    await h.toxi.heal(slot)
    w.healed = time.time()


async def token_rotation(h: Harness, w: Window) -> None:
    if not h.cfg.in_cluster:
        raise RuntimeError("token rotation needs the in-cluster configuration (RunConfig.in_cluster)")
    rotated = time.time()
    w.step("write new tokens to both replicas' token files")
    old = dict(h.tokens)
    for slot in SLOTS:
        sa = h.serviceaccount(slot)
        new = await identity.issue_token(h.api, sa, secret=f"{sa}-2")
        h.sa_dirs[slot].rotate(new.value)
        h.tokens[slot] = new
    grace = 62.0
    w.notes.append(
        f"new tokens written to both replicas' token files; old tokens invalidated (bound Secret deleted) {grace:.0f}s "
        "later, after the client's one-minute token refresh"
    )
    await asyncio.sleep(grace)
    w.step("invalidate the old tokens")
    for token in old.values():
        await identity.invalidate(h.api, token)
    w.healed = time.time()
    for slot in SLOTS:
        user = identity.username(h.serviceaccount(slot))
        seen = [r for r in h.audit.requests(rotated) if r.user == user and r.jti == h.tokens[slot].jti]
        w.extra[f"{slot}: first request with the new token"] = (
            f"{seen[0].received - rotated:.1f}s after the rotation" if seen else "none before the old one was revoked"
        )


async def many_namespaces(h: Harness, w: Window) -> None:
    names = ",".join(h.namespaces)
    args = [a for a in h.cfg.operator_args(h.lease, h.namespaces) if not a.startswith("--namespaces")]
    args.append(f"--namespaces={names}")
    w.step(f"restart both replicas watching {len(h.namespaces)} namespaces")
    codes = await asyncio.to_thread(h.replace_replicas, args)
    w.notes.append(
        f"both replicas restarted with --namespaces listing {len(h.namespaces)} namespaces "
        f"({3 * len(h.namespaces)} watches each); previous replicas exited {codes}"
    )
    w.healed = time.time()
    for slot, replica in h.replicas.items():
        ready = await asyncio.to_thread(replica.wait_ready, 60)
        w.extra[f"{slot} ready"] = f"{time.time() - w.healed:.1f}s" if ready else "not within 60s"


async def restore_all_namespaces(h: Harness) -> None:
    await asyncio.to_thread(h.replace_replicas, h.cfg.operator_args(h.lease, h.namespaces))


async def combined(h: Harness, w: Window) -> None:
    slot = await h.leader_before_fault(w)
    w.step("APF starvation and latency on both replicas")
    await identity.starve(h.api, [h.serviceaccount(s) for s in SLOTS])
    for s in SLOTS:
        await h.toxi.latency(s, ms=300, jitter=200)
    h.slack_at.append((time.time(), time.time() + 40, 0.5))
    w.step("etcd frozen for 6s")
    h.cp.send("etcd", signal.SIGSTOP)
    try:
        await asyncio.sleep(6)
    finally:
        h.cp.send("etcd", signal.SIGCONT)
    w.step(f"reset {slot}'s connections, then latency again and kill -9")
    await h.toxi.reset(slot)
    await asyncio.sleep(1)
    await h.toxi.heal(slot)
    await h.toxi.latency(slot, ms=300, jitter=200)
    h.kill(slot)
    await asyncio.sleep(8)
    w.step("heal: APF restored, both proxies recreated")
    await identity.unstarve(h.api)
    await h.toxi.heal_all()
    w.notes.append(
        f"together: APF starvation 0-15s, 300±200 ms latency on both replicas 0-15s, etcd SIGSTOP 0-6s, "
        f"leader {slot}'s connections reset at 6s, leader killed -9 at 7s"
    )
    w.healed = time.time()


@dataclass(frozen=True)
class Fault:
    name: str
    title: str
    run: FaultFn
    after: Callable[[Harness, Window], None] | None = None  # figures that need the finished window
    judge: Judge | None = None  # rules of this fault only, judged with the common ones
    sharded: bool = False  # runs only in a sharded run (``--shards``; the ``sharded`` preset), and only it runs there


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("etcd-freeze", "etcd frozen (SIGSTOP), then SIGCONT", etcd_freeze),
        Fault("etcd-kill", "etcd killed (-9) and restarted", etcd_kill),
        Fault("apiserver-restart", "kube-apiserver restarted", apiserver_restart),
        Fault(
            "compaction-gap",
            "etcd compacted during a watch gap (410 on resume, relist)",
            compaction_gap,
            _after_compaction_gap,
        ),
        Fault(
            "apf-starvation", "API Priority and Fairness starves the operators' ServiceAccounts (429)", apf_starvation
        ),
        Fault("latency", "proxy: latency on every connection", latency),
        Fault("reset", "proxy: every connection reset", reset),
        Fault("reset-leader", "proxy: the leader's connections reset", reset_leader),
        Fault("half-open", "proxy: half-open connections (no data, no FIN)", half_open),
        Fault("api-outage", "API unreachable for longer than twice the watch stall timeout", api_outage),
        Fault("kill-bulk-create", "leader killed (-9) at random points of a bulk create", kill_during_bulk_create),
        Fault("leader-kill", "leader killed (-9)", leader_kill),
        Fault("sigterm-brownout", "leader SIGTERMed during an API brownout", sigterm_in_brownout),
        Fault("leader-cut-off", "leader cut off from the API for longer than the lease", leader_cut_off),
        Fault(
            "leader-freeze",
            "leader frozen (SIGSTOP) for longer than the lease while the standby takes over, then SIGCONT",
            trust.leader_freeze,
            judge=trust.judge_leader_freeze,
        ),
        Fault(
            "slow-api",
            "proxy: 3-6 s per API call on both replicas for 60 s",
            trust.slow_api,
            judge=trust.judge_slow_api,
        ),
        Fault(
            "token-rotation",
            "ServiceAccount token rotated (in-cluster configuration)",
            token_rotation,
            after=_after_token_rotation,
        ),
        Fault("40-namespaces", "40 watched namespaces (--namespaces)", many_namespaces),
        Fault("combined", "combined: APF + latency + etcd freeze + reset + leader kill", combined),
        Fault(
            "shard-kill",
            "sharded: the replica holding the most shards killed (-9), its slot kept down past its Leases",
            shardfaults.shard_kill,
            judge=shardfaults.judge_kill,
            sharded=True,
        ),
        Fault(
            "shard-freeze",
            "sharded: the replica holding the most shards frozen (SIGSTOP) past its Leases, then SIGCONT",
            shardfaults.shard_freeze,
            judge=shardfaults.judge_freeze,
            sharded=True,
        ),
        Fault(
            "shard-apiserver-restart",
            "sharded: kube-apiserver restarted",
            apiserver_restart,
            judge=shardfaults.judge_window,
            sharded=True,
        ),
        Fault(
            "shard-scale",
            "sharded: scale 3 -> 4 -> 2 (a fourth replica started, then two stopped with SIGTERM at once)",
            shardfaults.shard_scale,
            judge=shardfaults.judge_scale,
            sharded=True,
        ),
    )
}
