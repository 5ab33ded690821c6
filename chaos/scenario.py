"""The run: setup, a no-fault baseline, each fault in turn with its recovery, the final convergence, the verdicts.

Two presets. ``FULL`` (``make chaos``): 200 WebServers in 40 namespaces on a dedicated local cluster, every fault
one at a time then combined, replicas in the in-cluster configuration watching all namespaces. ``SHORT`` (inside
``make test``): 20 WebServers in one namespace of the shared test cluster, etcd frozen for a few seconds, the API
server restarted and the leader's connections reset, replicas with token kubeconfigs watching only that namespace.
The verdicts are the same in both. ``SHARDED`` (``make chaos CHAOS_ARGS="--preset sharded"``, issue 18): 80 WebServers
in 16 randomly named namespaces, three replicas (a fourth slot ready for the scale fault) with ``--shards 8`` and no
leader, under the four sharded faults of ``shardfaults``; there the leader rules give way to the per-shard ones of
``shardverdicts``, for each window and for the whole run.

Between faults the harness waits for calm (every component and replica running, a leader elected): a fault must
start from a working system or its figures mean nothing. A harness failure (a fault that cannot be injected or
healed, a phase past its limit, an error in setup) stops the run where it happened: the world is restored as far as
possible, torn down, and every window that ran is still measured; ``Result.aborted`` says where (``failure``).
The churn never stops until the final phase, which stops it, waits for convergence, then watches a quiet window in
which a converged operator must write nothing.

Called by ``chaos.__main__`` and ``tests/integration/test_chaos_short.py``; hands a ``Result`` to ``report``.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from chaos import shardfaults
from chaos.failure import HarnessFailure, Phase
from chaos.faults import FAULTS, restore_all_namespaces
from chaos.fencing import Tenure
from chaos.harness import FOREIGN_NAMES, Harness, RunConfig
from chaos.observe import Leftover, duplicates, leftovers, read_state, ready
from chaos.shardverdicts import (
    FENCE_RULE,
    OVERLAP_RULE,
    OWNERSHIP_RULE,
    ShardWrite,
    handovers,
    overlaps,
    unfenced,
)
from chaos.verdicts import Figures, Rule, Window, deposed_writes, describe, figures, lease_timeline, rules
from harness.audit import AuditLog, Request
from harness.kubeapi import ws_path

FULL = RunConfig(
    name="full",
    webservers=200,
    namespaces=40,
    rate=4.0,
    # "reset" resets every replica's connections; the sharded faults need the sharded preset
    faults=[name for name, fault in FAULTS.items() if name != "reset-leader" and not fault.sharded],
    watch_all=True,
    in_cluster=True,
    cap=90.0,
    baseline=20.0,
)
# One fault's limit: calm before it (up to 3 min), injection, heal and recovery (each measure capped by ``cap``).
#: The informers of one operator process (one set per watched namespace): WebServers, Deployments, Services and
#: PodDisruptionBudgets (reconcile/setup.py). The LIST allowance of each window is two per informer per process.
INFORMERS = 4
FAULT_LIMIT = 420.0
#: How long convergence must hold before the final quiet window starts: longer than the operator's 2 s hold-back of a
#: status change that only updates a rollout's details, so a write that answers the churn's last change is not taken
#: for a write at rest.
SETTLE_SECONDS = 3.0

SHORT = RunConfig(
    name="short",
    webservers=20,
    namespaces=1,
    rate=2.0,
    faults=["etcd-freeze", "apiserver-restart", "reset-leader"],
    watch_all=False,
    in_cluster=False,
    baseline=8.0,
    cap=30.0,
    converge_timeout=60.0,
    quiet_window=8.0,
    etcd_freeze=3.0,
)


SHARDED = RunConfig(
    name="sharded",
    webservers=80,
    namespaces=16,
    rate=3.0,
    faults=[name for name, fault in FAULTS.items() if fault.sharded],  # shard-scale last: it leaves two replicas
    watch_all=True,
    in_cluster=True,
    cap=90.0,
    baseline=20.0,
    slots=("op-a", "op-b", "op-c"),
    spare_slots=(shardfaults.SPARE,),
    shards=8,
)


@dataclass
class Measured:
    window: Window
    figures: Figures
    rules: list[Rule]


@dataclass
class Result:
    config: RunConfig
    started: float
    finished: float = 0.0
    setup: dict[str, str] = field(default_factory=dict)
    baseline: Measured | None = None
    faults: list[Measured] = field(default_factory=list)
    final: list[Rule] = field(default_factory=list)
    final_figures: dict[str, str] = field(default_factory=dict)
    churn: dict[str, int] = field(default_factory=dict)
    churn_failures: dict[str, int] = field(default_factory=dict)
    control_plane_restarts: list[str] = field(default_factory=list)
    aborted: HarnessFailure | None = None  # the harness failed: the run stopped there (not an operator verdict)

    @property
    def passed(self) -> bool:
        verdicts = all(r.passed for r in self.final) and all(r.passed for m in self.faults for r in m.rules)
        return self.aborted is None and verdicts

    def failures(self) -> list[str]:
        found = [f"ABORTED: {self.aborted.describe()}"] if self.aborted is not None else []
        found += [f"final: {r.name}: {r.detail}" for r in self.final if not r.passed]
        for m in self.faults:
            found += [f"{m.window.name}: {r.name}: {r.detail}" for r in m.rules if not r.passed]
        return found


Progress = Callable[[str], None]


async def run(
    config: RunConfig, *, cluster_dir: Path, kubeconfig: Path, bin_dir: Path, workdir: Path, progress: Progress
) -> Result:
    """The whole run. Never raises for a harness failure: that ends up in ``Result.aborted`` (see ``failure``)."""
    result = Result(config=config, started=time.time())
    h = Harness(config, cluster_dir=cluster_dir, kubeconfig=kubeconfig, bin_dir=bin_dir, workdir=workdir)
    windows: list[Window] = []
    baseline = Window("baseline", "no fault (churn only)", start=0.0)
    async with Phase("setup and baseline", traceback_dir=workdir) as phase:
        shards = f", --shards {config.shards}" if config.sharded else ""
        progress(
            f"setup: {config.webservers} WebServers in {config.namespaces} namespace(s), "
            f"{len(config.slots)} replicas{shards}"
        )
        await h.setup()
        result.setup = dict(h.setup_figures)
        progress(f"setup done: {h.setup_figures}")
        h.start_churn()
        baseline.start = time.time()
        await asyncio.sleep(config.baseline)
        baseline.end = baseline.healed = time.time()
        progress(f"baseline: {config.baseline:.0f}s of churn at {config.rate}/s without faults")
    result.aborted = phase.failure
    if result.aborted is None:
        result.aborted = await _faults(h, windows, progress)
    if result.aborted is None:
        async with Phase("final: convergence and the quiet window", traceback_dir=workdir) as phase:
            progress("final: churn stopped, waiting for every WebServer to converge")
            await h.halt_churn()
            await _final(h, result)
        result.aborted = phase.failure
    if result.aborted is not None:
        progress(f"ABORTED, {result.aborted.describe()}")
        progress("restoring what the fault may have left (SIGCONT, proxies recreated, APF restored)")
        problems = await h.restore()
        result.final_figures["clean-up after the harness failure"] = "; ".join(problems) or "done, nothing failed"
    progress("teardown: stopping the replicas (SIGTERM) and removing the run's objects")
    async with Phase("teardown", traceback_dir=workdir) as phase:
        for name in await asyncio.to_thread(h.cp.ensure_running):
            progress(f"  {name} was not running: restarted")
        codes = await h.teardown()
        result.final.append(
            Rule(
                "replicas exit 0 on SIGTERM at the end",
                all(code == 0 for code in codes.values()),
                ", ".join(f"{slot}: {code}" for slot, code in codes.items()),
            )
        )
    result.aborted = result.aborted or phase.failure
    result.finished = time.time()
    result.churn = dict(h.churn.counts)
    result.churn_failures = dict(h.churn.failures)
    result.control_plane_restarts = [f"{c} ({why})" for _, c, why in h.cp.restarts]
    async with Phase("measuring the windows from the audit log", traceback_dir=workdir) as phase:
        _measure(h, result, baseline, windows)
    result.aborted = result.aborted or phase.failure
    return result


async def _faults(h: Harness, windows: list[Window], progress: Progress) -> HarnessFailure | None:
    """Each fault in turn, with its recovery; stops at the first harness failure and returns it."""
    faults = h.cfg.faults
    for number, name in enumerate(faults, 1):
        fault = FAULTS[name]
        label = f"fault {number}/{len(faults)} {name}"
        window = Window(name, fault.title, start=time.time(), cap=h.cfg.cap, on_step=lambda s: progress(f"  - {s}"))
        async with Phase(label, traceback_dir=h.workdir, window=window, limit=FAULT_LIMIT) as phase:
            calm = "every shard held once, shares within one" if h.cfg.sharded else "a leader elected"
            window.step(f"wait for calm: every component and replica running, {calm}")
            fixed = await h.steady()
            window.start = time.time()
            window.notes += [f"before the fault: {f}" for f in fixed]
            progress(f"{label}: {fault.title}")
            await fault.run(h, window)
            progress(
                f"  healed after {window.healed - window.start:.1f}s; measuring recovery (limit {window.cap:.0f}s)"
            )
            window.step("measure the recovery (canary and backlog)")
            await h.recover(window)
            if h.cfg.sharded:
                await shardfaults.settle(h, window)
                progress(f"  {window.extra.get('shards settled after the recovery', '')}")
            if fault.after is not None:
                fault.after(h, window)
            progress(f"  recovery: canary {_s(window.canary)}, backlog {_s(window.backlog)}")
            if name == "40-namespaces":
                window.step("restart both replicas watching all namespaces again")
                await restore_all_namespaces(h)
            await asyncio.sleep(2)
        windows.append(window)
        if phase.failure is not None:
            if not window.end:  # recovery not measured: the window is the aborted one, not judged
                window.aborted = True
                window.end = phase.failure.at
            return phase.failure
    return None


async def _final(h: Harness, result: Result) -> None:
    cfg = h.cfg
    started = time.time()
    remaining = await h.wait_converged(cfg.converge_timeout)
    took = time.time() - started
    state = await read_state(h.api, run_label=h.run_label, namespaces=set(h.namespaces))
    dups, left = duplicates(state), leftovers(state)
    made_late, not_collected = _attribute(h, left, since=result.started)
    lost = {k: v for k, v in remaining.items() if k[0] != "child"}
    blocked = {k: v for k, v in lost.items() if any((lo.namespace, lo.name) == k for lo in not_collected)}
    lost = {k: v for k, v in lost.items() if k not in blocked}
    result.final_figures["WebServers at the end"] = str(len(state.webservers))
    result.final_figures["converged after the churn stopped"] = f"{took:.1f}s" if not remaining else "no"
    result.final_figures["children of deleted WebServers not collected by the garbage collector"] = (
        "; ".join(str(lo) for lo in not_collected) or "none"
    )
    result.final_figures["WebServers waiting for the garbage collector (not counted as lost)"] = (
        "; ".join(f"{k[0]}/{k[1]}: {v}" for k, v in sorted(blocked.items())) or "none"
    )
    result.final.append(
        Rule(
            "every WebServer converges to its last spec (0 lost updates)",
            not lost,
            f"{len(lost)} not converged {cfg.converge_timeout:.0f}s after the churn stopped"
            + (": " + "; ".join(f"{k[0]}/{k[1]}: {v}" for k, v in sorted(lost.items())[:8]) if lost else ""),
        )
    )
    result.final.append(
        Rule(
            "0 duplicate children",
            not dups and not made_late,
            f"{len(dups)} duplicates, {len(made_late)} children created for an already deleted WebServer"
            + (": " + "; ".join(dups + made_late)[:2000] if dups or made_late else ""),
        )
    )
    adopted = [v for v in [await f.verdict(h.api) for f in h.foreign] if v]
    targets = {(f.resource, f.namespace, f.name) for f in h.foreign}
    adopted += [
        f"operator write: {describe(r, result.started)}"
        for r in h.audit.requests()
        if r.is_write and r.ok and (r.resource.split("/")[0], r.namespace, r.name) in targets
    ]
    conflicts = []
    for f, name in zip(h.foreign, FOREIGN_NAMES, strict=True):
        ns = f.path.split("/")[-3]
        ws = await h.api.get(ws_path(ns, name))
        cond = ready(ws) or {}
        if cond.get("status") != "False" or not str(cond.get("reason", "")).endswith("Conflict"):
            conflicts.append(f"{ns}/{name}: Ready={cond.get('status')} reason={cond.get('reason')}")
    result.final.append(
        Rule(
            "0 adopted foreign objects",
            not adopted and not conflicts,
            f"{len(h.foreign)} planted, {len(adopted)} touched, {len(conflicts)} namesakes without a Conflict condition"
            + (": " + "; ".join(adopted + conflicts) if adopted or conflicts else ""),
        )
    )
    if not remaining:
        # Converged is judged from counts: pods that the churn's last drift made (it may act as the churn stops) can
        # still come and go, and the operator holds a rollout detail of the status back up to 2 s after its previous
        # status write. The quiet window starts once convergence has held past both.
        await asyncio.sleep(SETTLE_SECONDS)
        await h.wait_converged(cfg.converge_timeout)
    quiet_start = time.time()
    await asyncio.sleep(cfg.quiet_window)
    quiet_end = time.time()
    await asyncio.sleep(1.0)  # let the last audit events be written
    attempts = [r for r in h.audit.requests(quiet_start, quiet_end) if r.is_write and r.resource != "leases"]
    writes = [r for r in attempts if r.ok]
    rejected = [r for r in attempts if not r.ok]
    result.final_figures[f"write attempts rejected in the {cfg.quiet_window:.0f}s quiet window"] = (
        "; ".join(describe(w, quiet_start) for w in rejected[:8]) or "none"
    )
    settled = not lost and not dups and not made_late  # anything else left waits for the garbage collector
    result.final.append(
        quiet_rule(
            writes, rejected, quiet_start=quiet_start, quiet_end=quiet_end, settled=settled, waiting=len(blocked)
        )
    )
    if cfg.sharded:
        owned = await h.check_settled()
        result.final.append(Rule(f"{OWNERSHIP_RULE} (at the end)", owned, h.ownership_text))


def quiet_rule(
    writes: list[Request], rejected: list[Request], *, quiet_start: float, quiet_end: float, settled: bool, waiting: int
) -> Rule:
    """The rule "0 writes once converged", judged only once the operator's part converged (``settled``).

    WebServers still waiting for the garbage collector to remove their predecessor's children (kube-controller-
    manager's job, not counted as lost) do not make the operator "never converged"; the detail says how many.
    """
    seconds = quiet_end - quiet_start
    detail = f"{len(writes)} writes accepted in the {seconds:.0f}s after convergence, {len(rejected)} rejected"
    if writes:
        detail += ": " + "; ".join(describe(w, quiet_start) for w in writes[:8])
    if not settled:
        detail += " (never converged)"
    elif waiting:
        detail += f" ({waiting} WebServer(s) still waiting for the garbage collector)"
    return Rule("0 writes once converged", settled and not writes, detail)


def _attribute(h: Harness, left: list[Leftover], *, since: float) -> tuple[list[str], list[Leftover]]:
    """Split leftovers by cause, from the audit log.

    A child the operator created after its WebServer was deleted is the operator's fault; a child that existed
    before the deletion only waits for the garbage collector (kube-controller-manager).
    """
    if not left:
        return [], []
    everyone = AuditLog(h.cp.audit_log, users_prefix="")
    events = [r for r in everyone.requests(since) if r.ok and r.verb in {"create", "delete"}]
    made_late, not_collected = [], []
    for lo in left:
        creates = [
            r
            for r in events
            if r.verb == "create" and r.resource == lo.resource and (r.namespace, r.name) == (lo.namespace, lo.name)
        ]
        if creates:
            made = creates[-1]
            before = [
                r
                for r in events
                if r.resource == "webservers"
                and (r.namespace, r.name) == (lo.namespace, lo.name)
                and r.received < made.received
            ]
            if before and before[-1].verb == "delete":
                made_late.append(f"{lo} created by {h.slot_of_user(made.user)} after its WebServer was deleted")
                continue
        not_collected.append(lo)
    return made_late, not_collected


def _measure(h: Harness, result: Result, baseline: Window, windows: list[Window]) -> None:
    requests = h.audit.requests()
    timeline = lease_timeline(requests, h.lease)
    sharded = h.cfg.sharded
    found: dict[int, list[Tenure]] = {}
    writes: list[ShardWrite] = []
    late: list[ShardWrite] = []
    if sharded:  # no leader: the writes no current grant of their shard's Lease covered take the deposed ones' place
        found, writes = shardfaults.audited(h, requests)
        late = unfenced(writes)
        deposed = ([w.write for w in late if w.write.ok], [w.write for w in late if not w.write.ok])
    else:
        deposed = deposed_writes(requests, timeline, renew_deadline=h.cfg.renew_deadline, slack_at=h.slack_at)
    incidents = h.incidents()
    informers = INFORMERS if h.cfg.watch_all else INFORMERS * len(h.namespaces)

    webservers = len(h.slots) + len(h.bulk_slots) + 1 + len(h.foreign)
    rate = 0.0

    def measure(w: Window) -> Figures:
        moved: list[str] | None = None
        if sharded:  # a replica's informers list once per shard gained (at most: a round's gains share one)
            moved = handovers(found, w.start, w.end)
            per_process, slots = INFORMERS, h.cfg.shards + len(moved)
        else:
            per_process = INFORMERS * len(h.namespaces) if w.name == "40-namespaces" else informers
            slots = len(h.replicas)
        return figures(
            w,
            requests,
            webservers=webservers,
            baseline_rate=rate,
            timeline=timeline,
            deposed=deposed,
            incidents=incidents,
            informers_per_process=per_process,
            slots=slots,
            handovers=moved,
            shards=h.cfg.shards if sharded else 1,
        )

    if baseline.end:
        base_fig = measure(baseline)
        result.baseline = Measured(baseline, base_fig, [])
        rate = base_fig.other / max(baseline.end - baseline.start, 1.0)
        for w in windows:
            fig = measure(w)
            judge = FAULTS[w.name].judge
            own = judge(h, w, requests=requests, timeline=timeline) if judge is not None and not w.aborted else []
            common = rules(w, fig, leader=not sharded)
            result.faults.append(Measured(w, fig, [] if w.aborted else common + own))
    whole = Window("run", "whole run", start=result.started, end=time.time())
    total = measure(whole)
    accepted, rejected = deposed
    result.final_figures["operator requests (whole run)"] = str(total.requests)
    kinds = Counter(_exception_type(i.detail) for i in total.tracebacks)
    result.final_figures["tracebacks by exception type"] = (
        ", ".join(f"{k} {v}" for k, v in kinds.most_common()) or "none"
    )
    if sharded:
        result.final_figures["shard handovers (whole run)"] = str(len(total.leader_changes))
        both = overlaps(writes)
        result.final_figures["writes to shards judged (whole run)"] = str(len(writes))
        result.final.append(
            Rule(
                f"{FENCE_RULE} (whole run)",
                not late,
                f"{len(accepted)} accepted, {len(rejected)} rejected"
                + (": " + "; ".join(w.describe(result.started) for w in late[:8]) if late else ""),
            )
        )
        result.final.append(
            Rule(
                f"{OVERLAP_RULE} (whole run)",
                not both,
                f"{len(both)} writes"
                + (": " + "; ".join(o.describe(result.started) for o in both[:4]) if both else ""),
            )
        )
    else:
        result.final_figures["leader changes (whole run)"] = str(len(total.leader_changes))
        result.final.append(
            Rule(
                "0 writes from a deposed leader (whole run)",
                not accepted,
                f"{len(accepted)} accepted, {len(rejected)} rejected attempts"
                + (": " + "; ".join(describe(w, result.started) for w in accepted[:8]) if accepted else ""),
            )
        )
    result.final.append(
        Rule(
            "0 unhandled exceptions (whole run)",
            not total.tracebacks,
            f"{len(total.tracebacks)} tracebacks on the replicas' stderr"
            + (": " + "; ".join(f"{i.slot}: {i.detail}" for i in total.tracebacks[:6]) if total.tracebacks else ""),
        )
    )
    result.final.append(
        Rule(
            "liveness never failed (whole run)",
            not total.liveness,
            f"{len(total.liveness)} failed /healthz answers"
            + (": " + "; ".join(f"{i.slot}: {i.detail}" for i in total.liveness[:4]) if total.liveness else ""),
        )
    )


def _exception_type(detail: str) -> str:
    """``Conflict | reconcile ... failed`` -> ``Conflict`` (see ``replica``)."""
    return detail.split(" | ", 1)[0]


def _s(value: float | None) -> str:
    return "not within the limit" if value is None else f"{value:.1f}s"


def with_faults(config: RunConfig, names: list[str]) -> RunConfig:
    """``config`` running only ``names``; sharded faults alone select the sharded preset, mixed ones are refused."""
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise ValueError(f"unknown fault(s) {unknown}: choose from {', '.join(FAULTS)}")
    sharded = [n for n in names if FAULTS[n].sharded]
    if sharded and len(sharded) < len(names):
        raise ValueError(
            f"the sharded faults ({', '.join(sharded)}) run only with --shards and the others only without: "
            "name them in two runs"
        )
    if sharded and not config.sharded:
        config = SHARDED
    elif config.sharded and not sharded:
        raise ValueError(f"the sharded preset runs only the sharded faults: {', '.join(SHARDED.faults)}")
    return replace(config, faults=names)
