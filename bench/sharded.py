"""``python -m bench sharded``: N WebServers under 1, 2 and 4 sharded replicas, each fleet on its own fresh cluster.

Why: issue 18's measured scale. One replica holds and decodes every object; with S shards split over R replicas, each
replica should receive, cache and reconcile about 1/R of them where the API server filters (the ShardedListAndWatch
gate), and reconcile 1/R while still receiving everything where it does not (the client-side fallback). This runs
both and says how close each replica comes to 1/R of the single replica's figures, and what the fleet-wide times
do, which stay bound by the one API server.

Per configuration (``bench.sharded_plan.configurations``), on a fresh bench cluster (``bench.cluster``: nodePort
range widened for N NodePort Services, kube-controller-manager at the bench's QPS; ``SHARDED_LIST_WATCH=0`` for the
client-side path):
1. namespaces with random names, as many in every shard; the fleet starts (``bench.fleet``) and splits the shards;
2. bulk create: N WebServers with ``replicas: 0`` at 50 in flight, round-robin over the namespaces; the fleet-wide
   time until every child exists and until every WebServer is Ready at its generation;
3. image fan-out: every WebServer patched to a new image; the time until every Deployment has it and until every
   WebServer is Ready at its new generation.
Per replica and phase: CPU user + system (/proc, ``bench.procstat``) from the phase's first request until every
WebServer is Ready (or the phase's timeout), watch events received, events dropped by the client-side filter and
reconciles (its /metrics, ``bench.fleetmetrics``); RSS once split (idle) and at the end. All timings come from the
benchmark's own watch of every namespace (``bench.tracker``), as in ``python -m bench run``.

Writes bench/results/<stamp>-sharded.json, .md (``bench.sharded_report``) and .png (``bench.sharded_charts``);
replica logs go to bench/results/logs/<stamp>-sharded/.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import checks, sharded_charts, sharded_report
from bench.cluster import KCM_API_QPS, BenchCluster, admin_api, node_port_range_for, nodes_for
from bench.fleet import Fleet
from bench.fleetmetrics import ReplicaMetrics, delta
from bench.procstat import Meter, rss_mb
from bench.progress import reporting, say
from bench.runner import loadavg, machine
from bench.scenarios import usage_dict
from bench.sharded_plan import (
    SERVER,
    Configuration,
    PlanError,
    assign,
    balanced_namespaces,
    configurations,
    parse_replicas,
    per_shard,
)
from bench.tracker import Milestone, Tracker, wait_all
from bench.workload import IMAGE_V2, MERGE, NAMESPACE, Fanout, fan_out, path, webserver, ws_name
from harness.kubeapi import KubeApi

Result = dict[str, Any]
CREATE_CONCURRENCY = 50
GROUP = "bench-fleet"
NAMESPACE_PREFIX = "sb-"


@dataclass
class GateCluster(BenchCluster):
    """The bench cluster with the ShardedListAndWatch gate on (the server filters) or off (the client-side path)."""

    sharded_list_watch: bool = True

    def _env(self) -> dict[str, str]:
        env = super()._env()
        env["SHARDED_LIST_WATCH"] = "1" if self.sharded_list_watch else "0"
        return env


@dataclass
class ShardedPlan:
    n: int
    shards: int
    configurations: list[Configuration]
    namespaces: int
    log_dir: Path
    workers: int = 4
    timeout_base: float = 300.0
    timeout_per_object: float = 0.5
    partial: Path | None = None
    names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.names = [ws_name(i) for i in range(self.n)]

    def timeout(self) -> float:
        return self.timeout_base + self.timeout_per_object * self.n


def last_reached(milestone: Milestone, t0: float) -> float | None:
    """Seconds from ``t0`` to the last name's event, when every name got there."""
    return round(max(milestone.reached.values()) - t0, 3) if milestone.reached and not milestone.pending else None


async def create_namespaces(api: KubeApi, namespaces: list[str]) -> Fanout:
    return await fan_out(
        api,
        namespaces,
        lambda ns: api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}}),
        concurrency=20,
    )


@dataclass
class Phase:
    """One measured phase: what it sends, what it waits for (fleet-wide), and under which name it is reported."""

    name: str
    send: Callable[[], Awaitable[Fanout]]
    milestones: dict[str, Milestone]


async def measure(phase: Phase, fleet: Fleet, control_plane: dict[str, int], *, n: int, seconds: float) -> Result:
    """Run ``phase`` with every replica metered; fleet-wide times, then each replica's CPU, events and reconciles."""
    before = await fleet.scrape()
    meters = [Meter(pid, control_plane if i == 0 else {}) for i, pid in enumerate(fleet.pids())]
    async with contextlib.AsyncExitStack() as stack:
        for meter in meters:
            await stack.enter_async_context(meter)
        await stack.enter_async_context(reporting(phase.name, phase.milestones, n))
        t0 = time.time()
        fanout = await phase.send()
        sent_s = time.time() - t0
        ok = await wait_all(phase.milestones.values(), seconds=seconds)
    after = await fleet.scrape()
    result: Result = {
        "requests_s": round(sent_s, 3),
        "request_retries": fanout.retries,
        **{f"{key}_all_s": last_reached(m, t0) for key, m in phase.milestones.items()},
        "reached": {key: m.count for key, m in phase.milestones.items()},
        "control_plane_cpu_s": meters[0].usage.control_plane_cpu_s if meters[0].usage else {},
        "replicas": [
            {**usage_dict(meter.usage), **delta(b, a)} for meter, b, a in zip(meters, before, after, strict=True)
        ],
    }
    if not ok:
        result["error"] = f"not converged within {seconds:.0f} s: {result['reached']} of {n}"
    return result


def _image_phase(api: KubeApi, tracker: Tracker, plan: ShardedPlan, placement: dict[str, str]) -> Phase:
    generations = {
        name: (tracker.state.get("ws", name) or {}).get("metadata", {}).get("generation", 1) for name in plan.names
    }

    def ready_next(state: Any, name: str) -> bool:
        return checks.ready_at_least(generations[name] + 1)(state, name)

    return Phase(
        "image fan-out",
        lambda: fan_out(
            api,
            plan.names,
            lambda name: api.request(
                "PATCH",
                path("ws", name, namespace=placement[name]),
                body={"spec": {"image": IMAGE_V2}},
                content_type=MERGE,
            ),
            concurrency=CREATE_CONCURRENCY,
        ),
        {
            "deployments_updated": tracker.milestone(checks.image_is(IMAGE_V2), plan.names),
            "ready": tracker.milestone(ready_next, plan.names),
        },
    )


def _bulk_phase(api: KubeApi, tracker: Tracker, plan: ShardedPlan, placement: dict[str, str]) -> Phase:
    return Phase(
        "bulk create",
        lambda: fan_out(
            api,
            plan.names,
            lambda name: api.request("POST", path("ws", namespace=placement[name]), body=webserver(name, replicas=0)),
            concurrency=CREATE_CONCURRENCY,
        ),
        {
            "children": tracker.milestone(checks.children_exist, plan.names),
            "ready": tracker.milestone(checks.ready, plan.names),
        },
    )


def _replica_rows(fleet: Fleet, idle: list[float], end: list[ReplicaMetrics]) -> list[Result]:
    return [
        {
            "index": i,
            "identity": fleet.identity(replica),
            "shards": metrics.held,
            "filtering": "client" if metrics.client_side else "server",
            "cached_objects_end": metrics.cached_objects,
            "rss_idle_mb": idle[i],
            "rss_end_mb": round(rss_mb(replica.proc.pid), 1),
            "log": str(replica.process.log_path),
        }
        for i, (replica, metrics) in enumerate(zip(fleet.replicas, end, strict=True))
    ]


async def run_configuration(plan: ShardedPlan, config: Configuration, namespaces: list[str]) -> Result:
    """One fleet on a fresh cluster: start, split, bulk create, image fan-out; the cluster is deleted afterwards."""
    cluster = GateCluster(
        nodes=nodes_for(plan.n, 0),
        node_port_range=node_port_range_for(plan.n),
        sharded_list_watch=config.path == SERVER,
    )
    label = f"N={plan.n} {config.label}"
    result: Result = {"path": config.path, "replicas": config.replicas, "label": config.label}
    result["loadavg_before"] = loadavg()
    started = time.time()
    placement = assign(plan.names, namespaces)
    say(f"{label}: fresh cluster (ShardedListAndWatch {'on' if cluster.sharded_list_watch else 'off'})")
    try:
        cluster.up(NAMESPACE)
        async with admin_api(cluster.kubeconfig) as api:
            made = await create_namespaces(api, namespaces)
            result["namespace_retries"] = made.retries
            tracker = Tracker(api, None)
            await tracker.start()
            fleet = Fleet(
                cluster.kubeconfig,
                api,
                size=config.replicas,
                shards=plan.shards,
                lease_namespace=NAMESPACE,
                group=GROUP,
                log_prefix=plan.log_dir / config.key,
                workers=plan.workers,
            )
            try:
                await fleet.start()
                result["split_s"] = await fleet.wait_split()
                result["leases"] = {str(s): h for s, h in sorted((await fleet.holders()).items())}
                say(f"{label}: shards split in {result['split_s']} s")
                idle = [round(rss_mb(pid), 1) for pid in fleet.pids()]
                control_plane = cluster.control_plane()
                for phase_of in (_bulk_phase, _image_phase):
                    phase = phase_of(api, tracker, plan, placement)
                    say(f"{label}: {phase.name}")
                    key = "bulk_create" if phase_of is _bulk_phase else "image"
                    result[key] = await measure(phase, fleet, control_plane, n=plan.n, seconds=plan.timeout())
                    for milestone in phase.milestones.values():
                        tracker.drop(milestone)
                    if "error" in result[key]:
                        break
                result["replica_rows"] = _replica_rows(fleet, idle, await fleet.scrape())
            finally:
                problems = fleet.stop()
                if problems:
                    result["stop_problems"] = problems
                await tracker.stop()
    except Exception as err:  # a failed configuration is recorded, the benchmark goes on
        result["error"] = f"{type(err).__name__}: {err}"
        say(f"{label}: FAILED: {result['error'][:2000]}")
    finally:
        result["loadavg_after"] = loadavg()
        result["wall_s"] = round(time.time() - started, 1)
        cluster.down()
    return result


async def run(plan: ShardedPlan) -> Result:
    plan.log_dir.mkdir(parents=True, exist_ok=True)
    namespaces = balanced_namespaces(plan.namespaces, shards=plan.shards, prefix=NAMESPACE_PREFIX)
    placement = assign(plan.names, namespaces)
    results: Result = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "plan": {
            "n": plan.n,
            "shards": plan.shards,
            "configurations": [{"path": c.path, "replicas": c.replicas} for c in plan.configurations],
            "namespaces": plan.namespaces,
            "webservers_per_shard": {str(k): v for k, v in per_shard(placement, plan.shards).items()},
            "webserver_replicas": 0,
            "workers": plan.workers,
            "create_concurrency": CREATE_CONCURRENCY,
            "kcm_api_qps": KCM_API_QPS,
            "timeout_s": plan.timeout(),
        },
        "configs": [],
    }
    for config in plan.configurations:
        results["configs"].append(await run_configuration(plan, config, namespaces))
        if plan.partial is not None:
            plan.partial.write_text(json.dumps(results, indent=1) + "\n")
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return results


def write_outputs(results: Result, json_path: Path) -> list[Path]:
    """The JSON, the markdown table and the chart next to it; returns the paths written."""
    json_path.write_text(json.dumps(results, indent=1) + "\n")
    md_path = json_path.with_suffix(".md")
    png = sharded_charts.render(results, json_path.with_suffix(".png"))
    picture = f"\n![{png.stem}]({png.name})\n" if png is not None else ""
    md_path.write_text(f"# Sharded replicas {json_path.stem}\n\n{sharded_report.markdown(results)}{picture}")
    return [p for p in (json_path, md_path, png) if p is not None]


def add_parser(sub: Any, results_dir: Path) -> None:
    """Register ``sharded`` (and ``sharded-report``) on ``python -m bench``'s subcommands."""
    cmd = sub.add_parser("sharded", help="WebServers under 1, 2, 4 sharded replicas, server- and client-side filter")
    cmd.add_argument("--n", type=int, default=10000, help="WebServers, all with replicas: 0 (default 10000)")
    cmd.add_argument("--replicas", default="1,2,4", help="fleet sizes on the server-side path (default 1,2,4)")
    cmd.add_argument("--shards", type=int, default=8, help="shards, --shards of every replica (default 8)")
    cmd.add_argument(
        "--client-side-too",
        action="store_true",
        help="also run the largest fleet with the ShardedListAndWatch gate off (every replica filters itself)",
    )
    cmd.add_argument("--namespaces", type=int, default=0, help="namespaces (default: N / 25, at least 4 per shard)")
    cmd.set_defaults(func=lambda args: cmd_sharded(args, results_dir))
    rep = sub.add_parser("sharded-report", help="redraw the table and chart of a <stamp>-sharded.json")
    rep.add_argument("json")
    rep.set_defaults(func=lambda args: cmd_report(Path(args.json)))


def default_namespaces(n: int, shards: int) -> int:
    """25 WebServers per namespace, at least 4 namespaces per shard."""
    return max(4 * shards, n // 25)


def cmd_sharded(args: argparse.Namespace, results_dir: Path) -> int:
    try:
        if args.shards < 2:
            raise PlanError(f"--shards {args.shards}: sharding needs at least 2 shards; pass e.g. 8")
        sizes = parse_replicas(args.replicas, shards=args.shards)
    except PlanError as err:
        say(str(err))
        return 2
    stamp = time.strftime("%Y-%m-%d-%H%M") + "-sharded"
    results_dir.mkdir(parents=True, exist_ok=True)
    plan = ShardedPlan(
        n=args.n,
        shards=args.shards,
        configurations=configurations(sizes, client_side_too=args.client_side_too),
        namespaces=args.namespaces or default_namespaces(args.n, args.shards),
        log_dir=results_dir / "logs" / stamp,
    )
    plan.partial = plan.log_dir / "partial.json"
    say(f"sharded benchmark {stamp}: N={plan.n}, {plan.shards} shards, {[c.label for c in plan.configurations]}")
    results = asyncio.run(run(plan))
    written = write_outputs(results, results_dir / f"{stamp}.json")
    say(f"wrote {', '.join(str(p) for p in written)}")
    return 1 if any(c.get("error") for c in results["configs"]) else 0


def cmd_report(path: Path) -> int:
    results = json.loads(path.read_text())
    written = write_outputs(results, path)
    say(f"wrote {', '.join(str(p) for p in written)}")
    return 0
