"""One benchmark: for each N, rounds of every system on its own fresh cluster, in alternating order.

Why alternating: the machine is shared and drifts (other work, thermal state, page cache); running the systems in
the order raw, ours, go, kopf in even rounds and the reverse in odd rounds spreads that drift over all of them, and
the report takes medians over rounds. In the first round the raw driver runs once per concurrency level; the best
one is the raw limit and is used in later rounds.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cluster import KCM_API_QPS, BenchCluster, node_port_range_for, nodes_for
from bench.progress import say
from bench.raw import raw_run
from bench.scenarios import SCENARIOS, Config, open_context, operator_run
from bench.systems import OPERATORS, operator_spec
from bench.workload import NAMESPACE

Result = dict[str, Any]


@dataclass
class Plan:
    sizes: list[tuple[int, int]]  # (N, replicas per WebServer)
    rounds: int
    systems: list[str]
    raw_concurrency: list[int]
    repairs: int = 100
    steady_seconds: float = 60.0
    scenarios: tuple[str, ...] = SCENARIOS
    log_dir: Path = field(default_factory=lambda: Path("bench/results/logs"))
    partial: Path | None = None  # runs so far are written here after each run (a crash keeps what was measured)
    event_loop: str | None = None  # this operator's --event-loop; None: its default (asyncio since issue 33)


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def machine() -> Result:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "note": "2 cores shared with other work: compare medians and ratios measured in the same run",
    }


async def one_run(
    system: str, config: Config, *, label: str, log_dir: Path, concurrency: int = 0, event_loop: str | None = None
) -> Result:
    """Fresh cluster, one system, all its scenarios; the cluster is deleted afterwards."""
    cluster = BenchCluster(nodes=nodes_for(config.n, config.replicas), node_port_range=node_port_range_for(config.n))
    say(f"{label}: fresh cluster with {cluster.nodes} kwok node(s)")
    started = time.time()
    result: Result = {"system": system, "n": config.n, "replicas": config.replicas, "loadavg_before": loadavg()}
    try:
        cluster.up(NAMESPACE)
        async with open_context(cluster, config, label=label, log_dir=log_dir) as ctx:
            if system == "raw":
                result.update(await raw_run(ctx, concurrency))
            else:
                result.update(await operator_run(ctx, operator_spec(system, cluster.kubeconfig, event_loop=event_loop)))
    except Exception as err:  # a failed run is recorded, the benchmark goes on
        result["error"] = f"{type(err).__name__}: {err}"
        say(f"{label}: FAILED: {result['error']}")
    finally:
        result["loadavg_after"] = loadavg()
        result["wall_s"] = round(time.time() - started, 1)
        cluster.down()
    return result


def order(systems: list[str], round_index: int) -> list[str]:
    return list(systems) if round_index % 2 == 0 else list(reversed(systems))


async def run_plan(plan: Plan) -> Result:
    plan.log_dir.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    runs: list[Result] = []
    best_concurrency: dict[int, int] = {}

    def record(result: Result) -> None:
        runs.append(result)
        if plan.partial is not None:
            plan.partial.write_text(json.dumps(runs, indent=1) + "\n")

    for n, replicas in plan.sizes:
        config = Config(
            n=n, replicas=replicas, repairs=plan.repairs, steady_seconds=plan.steady_seconds, scenarios=plan.scenarios
        )
        for r in range(plan.rounds):
            for system in order(plan.systems, r):
                base = f"N={n} r{replicas} round {r + 1}/{plan.rounds} {system}"
                if system == "raw":
                    levels = plan.raw_concurrency if n not in best_concurrency else [best_concurrency[n]]
                    sweep = []
                    for c in levels:
                        result = await one_run(
                            "raw", config, label=f"{base} c={c}", log_dir=plan.log_dir, concurrency=c
                        )
                        result["round"] = r
                        record(result)
                        sweep.append(result)
                    timed = [
                        (res["bulk_create"]["children_all_s"], res["bulk_create"]["concurrency"])
                        for res in sweep
                        if (res.get("bulk_create") or {}).get("children_all_s") is not None
                    ]
                    if timed and n not in best_concurrency:
                        best_concurrency[n] = min(timed)[1]
                        say(f"N={n}: raw limit at {best_concurrency[n]} requests in flight")
                elif system in OPERATORS:
                    result = await one_run(system, config, label=base, log_dir=plan.log_dir, event_loop=plan.event_loop)
                    result["round"] = r
                    record(result)
    return {
        "started": started,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "plan": {
            "sizes": plan.sizes,
            "rounds": plan.rounds,
            "systems": plan.systems,
            "raw_concurrency": plan.raw_concurrency,
            "repairs": plan.repairs,
            "steady_seconds": plan.steady_seconds,
            "scenarios": plan.scenarios,
            "workers": 4,
            "kcm_api_qps": KCM_API_QPS,
            "ours_event_loop": plan.event_loop or "auto",
        },
        "raw_best_concurrency": {str(k): v for k, v in best_concurrency.items()},
        "runs": runs,
    }
