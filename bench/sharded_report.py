"""From the sharded benchmark's results to tables: per replica per configuration, one summary, the issue's targets.

Why pure: what a ratio is taken against and what "per replica" means decide whether a target is met, so both are
unit-tested on hand-made results. Every ratio is against the one replica on the server-side path measured in the same
run (``bench.sharded_plan.baseline``); "per replica" in the summary is the worst replica of the fleet (the largest
value), since the issue's targets hold for every replica, not on average.

Figures per replica: RSS at the end (and its growth over the replica's idle RSS once the shards were split, which
leaves out the interpreter's fixed ~60 MB), watch events received in both phases, events dropped by the client-side
filter, reconciles, and CPU (user + system) of the bulk create and of the image fan-out. ``bench.sharded`` writes the
markdown next to the JSON; ``bench.sharded_charts`` draws the same summary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Result = dict[str, Any]
PHASES = ("bulk_create", "image")
TARGET = 0.3


def replica_figures(config: Result) -> list[Result]:
    """Per replica: RSS end / growth, events received and dropped, reconciles and CPU over both phases."""
    rows: list[Result] = []
    for i, row in enumerate(config.get("replica_rows") or []):
        phases = [((config.get(p) or {}).get("replicas") or [{}] * (i + 1))[i] for p in PHASES]
        rows.append(
            {
                "index": i,
                "shards": row.get("shards", []),
                "filtering": row.get("filtering"),
                "cached_objects": row.get("cached_objects_end"),
                "rss_end_mb": row.get("rss_end_mb"),
                "rss_growth_mb": _minus(row.get("rss_end_mb"), row.get("rss_idle_mb")),
                "events": _sum(p.get("events") for p in phases),
                "dropped": _sum(p.get("dropped") for p in phases),
                "reconciles": _sum(p.get("reconciles") for p in phases),
                "cpu_bulk_s": phases[0].get("cpu_s"),
                "cpu_image_s": phases[1].get("cpu_s"),
                "cpu_s": _sum(p.get("cpu_s") for p in phases),
            }
        )
    return rows


def _sum(values: Any) -> float | None:
    data = list(values)
    return None if any(v is None for v in data) or not data else sum(data)


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 1)


def worst(config: Result, key: str) -> float | None:
    """The largest value of ``key`` over the configuration's replicas (None if any replica lacks it)."""
    values = [row[key] for row in replica_figures(config)]
    return None if not values or any(v is None for v in values) else max(values)


def ratio(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else round(value / base, 2)


def baseline_config(results: Result) -> Result | None:
    """The one-replica server-side configuration of the same run, if it ran without error."""
    return next(
        (
            c
            for c in results.get("configs", [])
            if c.get("path") == "server" and c.get("replicas") == 1 and not c.get("error")
        ),
        None,
    )


@dataclass(frozen=True)
class Target:
    """One of issue 18's targets: ``key`` of the worst replica of the largest fleet on ``path`` at most 0.3x."""

    path: str
    key: str
    what: str


TARGETS = (
    Target("server", "rss_end_mb", "RSS per replica"),
    Target("server", "events", "watch events received per replica"),
    Target("client", "cpu_s", "CPU per replica (bulk create + fan-out)"),
)


def verdicts(results: Result) -> list[str]:
    """'met' / 'missed' for each target whose configurations ran, with the ratio it was judged on."""
    base = baseline_config(results)
    if base is None:
        return ["no target judged: the one-replica server-side run is missing or failed"]
    lines = []
    for target in TARGETS:
        fleets = [c for c in results.get("configs", []) if c.get("path") == target.path and not c.get("error")]
        if not fleets:
            continue
        largest = max(fleets, key=lambda c: int(c["replicas"]))
        if largest["replicas"] == 1:
            continue
        value = ratio(worst(largest, target.key), worst(base, target.key))
        if value is None:
            lines.append(f"{target.what}, {largest['label']}: not measured")
            continue
        verdict = "met" if value <= TARGET else "missed"
        lines.append(f"{target.what}, {largest['label']}: {value:.2f}x one replica's (target <= {TARGET}x): {verdict}")
    return lines or ["no target judged: no fleet of more than one replica ran without error"]


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def replica_table(config: Result, base: Result | None) -> str:
    """One line per replica, with each figure's ratio to the one replica of the baseline run."""
    base_rows = replica_figures(base) if base is not None else []
    b = base_rows[0] if base_rows else {}
    head = (
        "| replica | shards | filter | cached objects | RSS end (MB) | vs 1 | RSS growth (MB) | events received | vs 1 "
        "| dropped by client filter | reconciles | CPU bulk / fan-out (s) | CPU vs 1 |"
    )
    lines = [head, "| " + " | ".join(["---"] * 13) + " |"]
    for row in replica_figures(config):
        lines.append(
            "| "
            + " | ".join(
                [
                    str(row["index"]),
                    ",".join(str(s) for s in row["shards"]) or "none",
                    _fmt(row["filtering"]),
                    _fmt(row["cached_objects"]),
                    _fmt(row["rss_end_mb"]),
                    _x(ratio(row["rss_end_mb"], b.get("rss_end_mb"))),
                    _fmt(row["rss_growth_mb"]),
                    _fmt(row["events"]),
                    _x(ratio(row["events"], b.get("events"))),
                    _fmt(row["dropped"]),
                    _fmt(row["reconciles"]),
                    f"{_fmt(row['cpu_bulk_s'])} / {_fmt(row['cpu_image_s'])}",
                    _x(ratio(row["cpu_s"], b.get("cpu_s"))),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def _phase(key: str, field: str) -> Callable[[Result], Any]:
    return lambda c: (c.get(key) or {}).get(field)


def _control_plane(key: str, process: str) -> Callable[[Result], Any]:
    return lambda c: ((c.get(key) or {}).get("control_plane_cpu_s") or {}).get(process)


@dataclass(frozen=True)
class SummaryRow:
    label: str
    value: Callable[[Result], Any]
    ratio: bool = False
    digits: int = 1


SUMMARY = (
    SummaryRow("fleet: all children exist (s)", _phase("bulk_create", "children_all_s")),
    SummaryRow("fleet: all Ready after the bulk create (s)", _phase("bulk_create", "ready_all_s")),
    SummaryRow("fleet: fan-out, every Deployment has the new image (s)", _phase("image", "deployments_updated_all_s")),
    SummaryRow("fleet: fan-out, all Ready again (s)", _phase("image", "ready_all_s")),
    SummaryRow("kube-apiserver CPU, bulk create (s)", _control_plane("bulk_create", "kube-apiserver")),
    SummaryRow("etcd CPU, bulk create (s)", _control_plane("bulk_create", "etcd")),
    SummaryRow("worst replica: RSS at the end (MB)", lambda c: worst(c, "rss_end_mb"), ratio=True),
    SummaryRow("worst replica: RSS growth over idle (MB)", lambda c: worst(c, "rss_growth_mb"), ratio=True),
    SummaryRow("worst replica: watch events received", lambda c: worst(c, "events"), ratio=True),
    SummaryRow("worst replica: reconciles", lambda c: worst(c, "reconciles"), ratio=True),
    SummaryRow("worst replica: CPU, bulk create (s)", lambda c: worst(c, "cpu_bulk_s"), ratio=True),
    SummaryRow("worst replica: CPU, image fan-out (s)", lambda c: worst(c, "cpu_image_s"), ratio=True),
    SummaryRow("fleet: CPU of all replicas, both phases (s)", lambda c: _sum(r["cpu_s"] for r in replica_figures(c))),
    SummaryRow("shards split after start (s)", lambda c: c.get("split_s")),
)


def summary_table(results: Result) -> str:
    """One column per configuration; rows marked ``ratio`` carry the ratio to one replica in brackets."""
    configs = results.get("configs", [])
    base = baseline_config(results)
    lines = [
        "| | " + " | ".join(c["label"] for c in configs) + " |",
        "| --- |" + " --- |" * len(configs),
    ]
    for row in SUMMARY:
        cells = []
        for config in configs:
            value = row.value(config)
            cell = _fmt(value, row.digits)
            if row.ratio and base is not None and config is not base and value is not None:
                cell += f" ({_x(ratio(value, row.value(base)))})"
            cells.append(cell)
        lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(results: Result) -> str:
    plan = results.get("plan", {})
    base = baseline_config(results)
    parts = [
        f"**N = {plan.get('n')} WebServers (replicas: 0), {plan.get('shards')} shards, {plan.get('namespaces')} "
        f"namespaces** ({_spread(plan)}); {plan.get('workers')} workers per replica; kube-controller-manager at "
        f"{plan.get('kcm_api_qps')} requests/s; each configuration on its own fresh cluster. Ratios: against the "
        "one replica on the server-side path of the same run; worst replica = the largest value in the fleet.",
        "",
        summary_table(results),
        "",
        "Targets (issue 18, largest fleet):",
        "",
        *[f"- {line}" for line in verdicts(results)],
    ]
    for config in results.get("configs", []):
        parts += ["", f"**{config['label']}**" + _load(config), ""]
        if config.get("error"):
            parts.append(f"Failed: {config['error']}")
        parts.append(replica_table(config, base))
        for key in PHASES:
            phase_error = (config.get(key) or {}).get("error")
            if phase_error:
                parts.append(f"\n{key}: {phase_error}")
        if config.get("stop_problems"):
            parts.append("\nOn SIGTERM: " + "; ".join(config["stop_problems"]))
    return "\n".join(parts) + "\n"


def _spread(plan: Result) -> str:
    counts = plan.get("webservers_per_shard") or {}
    if not counts:
        return "WebServers per shard unknown"
    values = list(counts.values())
    return f"{min(values)} to {max(values)} WebServers per shard"


def _load(config: Result) -> str:
    before, after = config.get("loadavg_before"), config.get("loadavg_after")
    if not before or not after:
        return ""
    return f" — load average {before[0]:.1f} before, {after[0]:.1f} after; {config.get('wall_s', 0):.0f} s in all"
