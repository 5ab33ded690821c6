"""The scenarios every operator goes through, in order, on one fresh cluster.

1. start: one WebServer exists; the operator process starts; time to its first child (first reconcile) and Ready;
   resident memory once idle.
2. bulk create: N WebServers created at 50 in flight; per object and overall, time until both children exist and
   until Ready at its generation; status lag (Deployment available -> WebServer Ready).
3. repair: child deletions, then drift edits (Deployment replicas, Service selector), one at a time on distinct
   WebServers; latency from the harmful event to the repaired object, as seen on the benchmark's own watch.
4. image: a new image on all N; time until every Deployment has it and until every WebServer is Ready again.
5. steady: 60 s of nothing; the operator's requests by verb (audit log) and the API server's counter.
6. restart: SIGTERM, start again over N converged WebServers; writes and time until the operator goes quiet.

Each scenario records the operator's CPU seconds and RSS (end and peak) and the control plane's CPU, plus the
operator's requests from the audit log. A scenario that times out keeps what it measured and says so in ``error``;
the run goes on, so one slow system does not cost the whole benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import apimetrics, checks, fleetmetrics
from bench.cluster import BenchCluster, admin_api
from bench.procstat import Meter, Usage, cpu_seconds, rss_mb
from bench.progress import reporting, say
from bench.stats import spread
from bench.systems import OperatorSpec, start_system
from bench.tracker import Milestone, Sequence, Tracker, wait_all
from bench.workload import IMAGE_V2, MERGE, NAMESPACE, PROBE, create_webservers, patch_webservers, path, webserver
from harness import audit
from harness.audit import AuditLog
from harness.kubeapi import KubeApi
from harness.process import Process

Result = dict[str, Any]
CREATE_CONCURRENCY = 50
QUIET_SECONDS = 5.0
SCENARIOS = ("bulk_create", "repair_delete", "repair_drift", "image", "steady", "restart")


@dataclass
class Config:
    n: int
    replicas: int
    repairs: int = 100
    steady_seconds: float = 60.0
    timeout_base: float = 120.0
    timeout_per_object: float = 1.0  # a loaded 2-core machine rolls out about 3 pods a second
    scenarios: tuple[str, ...] = SCENARIOS

    def timeout(self) -> float:
        return self.timeout_base + self.timeout_per_object * self.n

    @property
    def names(self) -> list[str]:
        return [f"ws-{i:05d}" for i in range(self.n)]


@dataclass
class Context:
    api: KubeApi
    tracker: Tracker
    cluster: BenchCluster
    audit: AuditLog
    control_plane: dict[str, int]
    config: Config
    label: str
    log_dir: Path


@contextlib.asynccontextmanager
async def open_context(cluster: BenchCluster, config: Config, *, label: str, log_dir: Path) -> AsyncIterator[Context]:
    """The started cluster's client, tracker (list + watch running) and audit reader, for one system's run."""
    async with admin_api(cluster.kubeconfig) as api:
        tracker = Tracker(api, NAMESPACE)
        await tracker.start()
        try:
            yield Context(
                api=api,
                tracker=tracker,
                cluster=cluster,
                audit=AuditLog(cluster.audit_log, keep=False),
                control_plane=cluster.control_plane(),
                config=config,
                label=label,
                log_dir=log_dir,
            )
        finally:
            await tracker.stop()


def slug(label: str) -> str:
    """A file name for ``label`` (``N=100 r1 round 1/3 ours`` -> ``N100-r1-round1of3-ours``)."""
    return "-".join(label.replace("=", "").replace("/", "of").replace("round ", "round").split())


def usage_dict(usage: Usage | None, n: int | None = None) -> Result:
    if usage is None:
        return {}
    out: Result = {
        "cpu_s": usage.cpu_s,
        "cpu_user_s": usage.user_s,
        "cpu_system_s": usage.system_s,
        "rss_end_mb": usage.rss_end_mb,
        "rss_peak_mb": usage.rss_peak_mb,
        "control_plane_cpu_s": usage.control_plane_cpu_s,
    }
    if n:
        out["cpu_per_ws_ms"] = round(usage.cpu_s * 1000 / n, 2)
    return out


async def reconciles(spec: OperatorSpec) -> int | None:
    """The system's ``controller_runtime_reconcile_total`` (all results) now; None when it exports none."""
    if spec.metrics_url is None:
        return None
    url = spec.metrics_url

    def scrape() -> int | None:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (a loopback URL the bench chose)
                return fleetmetrics.parse(answer.read().decode()).reconciles
        except OSError:
            return None

    return await asyncio.to_thread(scrape)


def reconcile_dict(before: int | None, after: int | None, n: int) -> Result:
    if before is None or after is None:
        return {}
    return {"reconciles": after - before, "reconciles_per_ws": round((after - before) / n, 2)}


def _last(milestone: Milestone, t0: float) -> float | None:
    return round(max(milestone.reached.values()) - t0, 3) if milestone.reached and not milestone.pending else None


def _per_object(milestone: Milestone, sent: dict[str, float]) -> Result:
    return spread([t - sent[name] for name, t in milestone.reached.items() if name in sent])


def _lag(first: Milestone, then: Milestone) -> Result:
    """Per object: ``then`` minus ``first`` in milliseconds (status lag: available -> Ready)."""
    return spread(
        [then.reached[name] - first.reached[name] for name in then.reached if name in first.reached],
        scale=1000,
        digits=1,
    )


def _slowest_lags(first: Milestone, then: Milestone, t0: float, count: int = 12) -> list[list[float | str]]:
    """The ``count`` largest status lags as ``[name, seconds after t0 the Deployment was available, lag in ms]``.

    Where in the scenario the tail lies (during the creates, or later, several at one moment) says what it waits
    behind; the name finds the object in the operator's log.
    """
    lags = [(then.reached[n] - first.reached[n], first.reached[n] - t0, n) for n in then.reached if n in first.reached]
    return [[name, round(at, 2), round(lag * 1000, 1)] for lag, at, name in sorted(lags, reverse=True)[:count]]


async def start_operator(ctx: Context, spec: OperatorSpec, *, log_name: str) -> tuple[Process, Result]:
    """Start the operator with the probe WebServer already there; time to its first child and to Ready."""
    tracker = ctx.tracker
    child = tracker.milestone(lambda s, n: s.get("dep", n) is not None or s.get("svc", n) is not None, [PROBE])
    ready = tracker.milestone(checks.ready, [PROBE])
    ctx.audit.read()
    proc = start_system(spec, kubeconfig=ctx.cluster.kubeconfig, log_path=ctx.log_dir / log_name)
    ok = await wait_all([child, ready], seconds=90)
    result: Result = {
        "first_reconcile_s": round(child.reached[PROBE] - proc.started_at, 3) if PROBE in child.reached else None,
        "probe_ready_s": round(ready.reached[PROBE] - proc.started_at, 3) if PROBE in ready.reached else None,
    }
    requests = audit.by_agent(ctx.audit.read(), spec.user_agents)
    if requests:
        result["first_request_s"] = round(min(r.received for r in requests) - proc.started_at, 3)
    if not ok or not proc.alive():
        result["error"] = f"probe WebServer not Ready within 90 s (operator alive: {proc.alive()}; log {proc.log_path})"
        return proc, result
    await asyncio.sleep(3)
    result["cpu_s"] = round(cpu_seconds(proc.pid), 3)
    result["rss_idle_mb"] = round(rss_mb(proc.pid), 1)
    return proc, result


async def bulk_create(ctx: Context, proc: Process, spec: OperatorSpec) -> Result:
    cfg, tracker = ctx.config, ctx.tracker
    names = cfg.names
    children = tracker.milestone(checks.children_exist, names)
    available = tracker.milestone(checks.available, names)
    ready = tracker.milestone(checks.ready, names)
    ctx.audit.read()
    meter = Meter(proc.pid, ctx.control_plane)
    reconciles_before = await reconciles(spec)
    async with meter, reporting(f"{ctx.label} bulk create", {"children": children, "ready": ready}, cfg.n):
        t0 = time.time()
        fanout = await create_webservers(ctx.api, names, replicas=cfg.replicas, concurrency=CREATE_CONCURRENCY)
        created_s = time.time() - t0
        ok = await wait_all([children, ready, available], seconds=cfg.timeout())
    result: Result = {
        "creates_s": round(created_s, 3),
        "create_retries": fanout.retries,
        "children_all_s": _last(children, t0),
        "ready_all_s": _last(ready, t0),
        "children_per_object_s": _per_object(children, fanout.sent),
        "ready_per_object_s": _per_object(ready, fanout.sent),
        "status_lag_ms": _lag(available, ready),
        "status_lag_slowest": _slowest_lags(available, ready, t0),
        "reached": {"children": children.count, "ready": ready.count, "available": available.count},
        **usage_dict(meter.usage, cfg.n),
        **reconcile_dict(reconciles_before, await reconciles(spec), cfg.n),
        "requests": audit.summary(audit.by_agent(ctx.audit.read(), spec.user_agents)),
    }
    if not ok:
        result["error"] = f"not converged within {cfg.timeout():.0f} s: {result['reached']} of {cfg.n}"
    for m in (children, available, ready):
        tracker.drop(m)
    result["equivalence_problems"] = equivalence(ctx, names)
    return result


def equivalence(ctx: Context, names: list[str], sample: int = 25) -> list[str]:
    """Check a sample of WebServers against the children and status webserver-operator produces."""
    state = ctx.tracker.state
    problems: list[str] = []
    for name in random.Random(0).sample(  # noqa: S311 - a fixed sample, not security
        names, min(sample, len(names))
    ):
        ws = state.get("ws", name)
        if ws is None:
            problems.append(f"{name}: WebServer missing")
            continue
        problems += [
            f"{name}: {p}" for p in checks.equivalence_problems(ws, state.get("dep", name), state.get("svc", name))
        ]
    return problems[:10]


async def _trial(
    ctx: Context, name: str, sequence: Sequence, action: Coroutine[Any, Any, Any], *, seconds: float = 15
) -> float | None:
    """Register ``sequence`` for ``name``, then run ``action``; seconds from its first stage to its last."""
    milestone = ctx.tracker.milestone(sequence, [name])
    await action
    if not await wait_all([milestone], seconds=seconds):
        ctx.tracker.drop(milestone)
        return None
    return sequence.times[-1] - sequence.times[0]


async def _wait_ready(ctx: Context, names: list[str]) -> bool:
    milestone = ctx.tracker.milestone(checks.ready, names)
    ok = await wait_all([milestone], seconds=ctx.config.timeout())
    ctx.tracker.drop(milestone)
    return ok


def _targets(cfg: Config, offset: int) -> list[str]:
    """``repairs`` distinct WebServers spread over all N (every other scenario touches different ones)."""
    trials = min(cfg.repairs, cfg.n)
    step = max(1, cfg.n // trials)
    return [cfg.names[(i * step + offset) % cfg.n] for i in range(trials)]


#: One repair trial on a target (its index and name): the kind of child repaired and the latency, ``None`` when the
#: repair was not seen in time (or the child to break was missing).
RepairTrial = Callable[[int, str], Awaitable[tuple[str, float | None]]]


async def _repair_trials(ctx: Context, proc: Process, targets: list[str], trial: RepairTrial, *, what: str) -> Result:
    """Run ``trial`` on every target under the meter, wait for all to be Ready again, and assemble the result."""
    latencies: dict[str, list[float]] = {"dep": [], "svc": []}
    timeouts = 0
    meter = Meter(proc.pid, ctx.control_plane)
    async with meter:
        for i, name in enumerate(targets):
            kind, latency = await trial(i, name)
            if latency is None:
                timeouts += 1
            else:
                latencies[kind].append(latency)
            if (i + 1) % 25 == 0:
                say(f"  {ctx.label} {what}: {i + 1}/{len(targets)}")
        settled = await _wait_ready(ctx, targets)
    both = latencies["dep"] + latencies["svc"]
    result: Result = {
        "trials": len(targets),
        "timeouts": timeouts,
        "latency_ms": spread(both, scale=1000, digits=1),
        "deployment_ms": spread(latencies["dep"], scale=1000, digits=1),
        "service_ms": spread(latencies["svc"], scale=1000, digits=1),
        **usage_dict(meter.usage),
    }
    if timeouts or not settled:
        result["error"] = f"{timeouts} {what} not seen within 15 s; all Ready again: {settled}"
    return result


async def repair_deletions(ctx: Context, proc: Process) -> Result:
    state = ctx.tracker.state

    async def delete(i: int, name: str) -> tuple[str, float | None]:
        kind = "dep" if i % 2 == 0 else "svc"
        obj = state.get(kind, name)
        if obj is None:
            return kind, None
        uid = obj["metadata"]["uid"]
        seq = Sequence(checks.gone_or_replaced(kind, uid), checks.replaced(kind, uid))
        return kind, await _trial(ctx, name, seq, ctx.api.request("DELETE", path(kind, name)))

    return await _repair_trials(ctx, proc, _targets(ctx.config, 0), delete, what="repairs of deletions")


async def repair_drift(ctx: Context, proc: Process) -> Result:
    cfg = ctx.config
    drifted_replicas = cfg.replicas + 1

    async def drift(i: int, name: str) -> tuple[str, float | None]:
        if i % 2 == 0:
            kind = "dep"
            seq = Sequence(
                checks.field_is("dep", ("spec", "replicas"), drifted_replicas),
                checks.field_is("dep", ("spec", "replicas"), cfg.replicas),
            )
            body: dict[str, Any] = {"spec": {"replicas": drifted_replicas}}
        else:
            kind = "svc"
            selector = {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": name}
            seq = Sequence(
                checks.field_is("svc", ("spec", "selector", "app.kubernetes.io/instance"), "drifted"),
                checks.field_is("svc", ("spec", "selector"), selector),
            )
            body = {"spec": {"selector": {"app.kubernetes.io/instance": "drifted"}}}
        patch = ctx.api.request("PATCH", path(kind, name), body=body, content_type=MERGE)
        return kind, await _trial(ctx, name, seq, patch)

    return await _repair_trials(ctx, proc, _targets(cfg, 1), drift, what="drift repairs")


async def new_image(ctx: Context, proc: Process, spec: OperatorSpec) -> Result:
    cfg, tracker = ctx.config, ctx.tracker
    names = cfg.names
    generations = {n: (tracker.state.get("ws", n) or {}).get("metadata", {}).get("generation", 1) for n in names}

    def ready_next(state: Any, name: str) -> bool:
        return checks.ready_at_least(generations[name] + 1)(state, name)

    updated = tracker.milestone(checks.image_is(IMAGE_V2), names)
    available = tracker.milestone(checks.available_with_image(IMAGE_V2), names)
    ready = tracker.milestone(ready_next, names)
    ctx.audit.read()
    meter = Meter(proc.pid, ctx.control_plane)
    reconciles_before = await reconciles(spec)
    async with meter, reporting(f"{ctx.label} new image", {"updated": updated, "ready": ready}, cfg.n):
        t0 = time.time()
        fanout = await patch_webservers(ctx.api, names, {"spec": {"image": IMAGE_V2}}, concurrency=CREATE_CONCURRENCY)
        ok = await wait_all([updated, available, ready], seconds=cfg.timeout())
    result: Result = {
        "patches_s": round(max(fanout.sent.values()) - t0, 3) if fanout.sent else None,
        "deployments_updated_s": _last(updated, t0),
        "ready_all_s": _last(ready, t0),
        "updated_per_object_s": _per_object(updated, fanout.sent),
        "ready_per_object_s": _per_object(ready, fanout.sent),
        "status_lag_ms": _lag(available, ready),
        "reached": {"updated": updated.count, "ready": ready.count, "available": available.count},
        **usage_dict(meter.usage, cfg.n),
        **reconcile_dict(reconciles_before, await reconciles(spec), cfg.n),
        "requests": audit.summary(audit.by_agent(ctx.audit.read(), spec.user_agents)),
    }
    for m in (updated, available, ready):
        tracker.drop(m)
    if not ok:
        result["error"] = f"not converged within {cfg.timeout():.0f} s: {result['reached']} of {cfg.n}"
    return result


async def steady_state(ctx: Context, proc: Process, spec: OperatorSpec) -> Result:
    cfg = ctx.config
    await asyncio.sleep(QUIET_SECONDS)
    ctx.audit.read()
    before = await apimetrics.snapshot(ctx.api)
    meter = Meter(proc.pid, ctx.control_plane)
    say(f"  {ctx.label} steady state: {cfg.steady_seconds:.0f} s")
    async with meter:
        await asyncio.sleep(cfg.steady_seconds)
    requests = audit.by_agent(ctx.audit.read(), spec.user_agents)
    after = await apimetrics.snapshot(ctx.api)
    return {
        "seconds": cfg.steady_seconds,
        "requests": audit.summary(requests),
        "events_created": sum(1 for r in requests if r.verb in ("create", "patch") and r.resource == "events"),
        "apiserver_request_total_delta": apimetrics.delta(before, after),
        **usage_dict(meter.usage),
    }


async def restart(ctx: Context, proc: Process, spec: OperatorSpec, *, log_name: str) -> tuple[Process, Result]:
    """Stop the operator and start it again over N converged WebServers; writes and time until it goes quiet."""
    code = proc.stop()
    ctx.audit.read()
    new = start_system(spec, kubeconfig=ctx.cluster.kubeconfig, log_path=ctx.log_dir / log_name)
    requests: list[audit.Request] = []
    deadline = new.started_at + ctx.config.timeout()
    last = new.started_at
    peak = 0.0
    while time.time() < deadline:
        await asyncio.sleep(0.5)
        peak = max(peak, rss_mb(new.pid))
        fresh = audit.by_agent(ctx.audit.read(), spec.user_agents)
        requests += fresh
        if fresh:
            last = max(last, *(r.received for r in fresh))
        if requests and time.time() - last >= QUIET_SECONDS:
            break
    quiet = bool(requests) and time.time() - last >= QUIET_SECONDS
    result: Result = {
        "exit_code": code,
        "idle_s": round(last - new.started_at, 3),
        "requests": audit.summary(requests),
        "writes": sum(1 for r in requests if r.is_write),
        "cpu_s": round(cpu_seconds(new.pid), 3),
        "rss_end_mb": round(rss_mb(new.pid), 1),
        "rss_peak_mb": round(peak, 1),
    }
    if requests:
        result["first_request_s"] = round(min(r.received for r in requests) - new.started_at, 3)
    if not quiet:
        result["error"] = f"operator not quiet for {QUIET_SECONDS:.0f} s within {ctx.config.timeout():.0f} s"
    return new, result


async def operator_run(ctx: Context, spec: OperatorSpec) -> Result:
    """All scenarios for one operator on the current (fresh) cluster."""
    await ctx.api.request("POST", path("ws"), body=webserver(PROBE, replicas=ctx.config.replicas))
    say(f"{ctx.label}: start")
    proc, result = await start_operator(ctx, spec, log_name=f"{slug(ctx.label)}.log")
    out: Result = {"start": result}
    try:
        if "error" in result:
            return out
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("bulk_create", lambda: bulk_create(ctx, proc, spec)),
            ("repair_delete", lambda: repair_deletions(ctx, proc)),
            ("repair_drift", lambda: repair_drift(ctx, proc)),
            ("image", lambda: new_image(ctx, proc, spec)),
            ("steady", lambda: steady_state(ctx, proc, spec)),
        ]
        for key, step in steps:
            if key not in ctx.config.scenarios:
                continue
            say(f"{ctx.label}: {key.replace('_', ' ')}")
            out[key] = await step()
            if not proc.alive():
                out[key]["error"] = f"operator exited with {proc.proc.returncode}; log {proc.log_path}"
                return out
        if "restart" not in ctx.config.scenarios:
            return out
        say(f"{ctx.label}: restart")
        proc, out["restart"] = await restart(ctx, proc, spec, log_name=f"{slug(ctx.label)}-restart.log")
    finally:
        proc.stop()
    return out
