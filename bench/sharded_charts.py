"""The sharded benchmark's chart: each replica's RSS, events and CPU per configuration, and the fleet-wide times.

Why a picture: "each replica carries about 1/R" is read at a glance from one dot per replica next to the single
replica's bar; the fleet-wide times beside them show what sharding does not change (the one API server). Drawn with
matplotlib (headless) from the figures ``bench.sharded_report`` computes, next to the JSON; called by
``bench.sharded``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.sharded_report import replica_figures

Result = dict[str, Any]
PER_REPLICA = (
    ("RSS at the end (MB)", "rss_end_mb"),
    ("watch events received", "events"),
    ("CPU, bulk create (s)", "cpu_bulk_s"),
    ("CPU, image fan-out (s)", "cpu_image_s"),
)
FLEET = (
    ("fleet: all children exist (s)", "bulk_create", "children_all_s"),
    ("fleet: fan-out, Deployments updated (s)", "image", "deployments_updated_all_s"),
)


def render(results: Result, path: Path) -> Path | None:
    """Write the chart to ``path``; None when no configuration has replica figures."""
    configs = [c for c in results.get("configs", []) if replica_figures(c)]
    if not configs:
        return None
    import matplotlib  # noqa: PLC0415 - bench-only optional dependency, imported when charts are drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    labels = [c["label"].replace(", ", "\n") for c in configs]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5), squeeze=False)
    for ax, (title, key) in zip(axes.flat, PER_REPLICA, strict=False):
        worst = []
        for x, config in enumerate(configs):
            values = [row[key] for row in replica_figures(config) if row[key] is not None]
            worst.append(max(values) if values else 0)
            ax.scatter([x] * len(values), values, color="black", s=12, zorder=3)
        bars = ax.bar(range(len(configs)), worst, color="#1f77b4", alpha=0.6)
        ax.bar_label(bars, labels=[_label(v) for v in worst], fontsize=8)
        ax.set_title(f"per replica: {title}\n(bar: worst replica, dots: each)", fontsize=9)
        ax.set_xticks(range(len(configs)), labels, fontsize=7)
    for ax, (title, phase, key) in zip(list(axes.flat)[len(PER_REPLICA) :], FLEET, strict=False):
        values = [((c.get(phase) or {}).get(key) or 0) for c in configs]
        bars = ax.bar(range(len(configs)), values, color="#9e9e9e")
        ax.bar_label(bars, labels=[_label(v) for v in values], fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(len(configs)), labels, fontsize=7)
    plan = results.get("plan", {})
    fig.suptitle(
        f"Sharded replicas: N = {plan.get('n')} WebServers (replicas: 0), {plan.get('shards')} shards "
        "(lower is better)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _label(value: float) -> str:
    """26000 as "26,000" rather than "2.6e+04"; small values with three significant digits."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
