"""PNG charts of one benchmark: for each N, the key figures per system side by side (matplotlib, headless).

Why a picture next to the table: the ratio that matters (ours vs raw, Go and kopf) is read at a glance from bars, and
the README links the charts of the latest run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report import COLUMNS, HEADERS, summarise

Result = dict[str, Any]
COLORS = {"raw": "#9e9e9e", "ours": "#1f77b4", "go": "#2ca02c", "kopf": "#ff7f0e"}
PANELS = (
    ("all children exist (s)", "all children exist (s)", 0),
    ("all Ready (s)", "all Ready at their generation (s); raw: all Deployments available", 0),
    ("CPU per WebServer, bulk (ms)", "CPU per WebServer, bulk create (ms)", 0),
    ("RSS after bulk create (MB)", "RSS idle / after bulk create (MB)", 1),
    ("repair of a deleted child p99 (ms)", "repair of a deleted child, p50 / p99 (ms)", 1),
    ("new image: Deployments updated (s)", "new image on all: Deployments updated (s)", 0),
)


def render(results: Result, out_prefix: Path) -> list[Path]:
    """Write ``<out_prefix>-n<N>.png`` per N; returns the paths."""
    import matplotlib  # noqa: PLC0415 - bench-only optional dependency, imported when charts are drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    written = []
    for key, block in summarise(results).items():
        rows = {row["label"]: row["values"] for row in block["rows"]}
        fig, axes = plt.subplots(2, 3, figsize=(13, 7))
        for ax, (title, label, index) in zip(axes.flat, PANELS, strict=True):
            values = rows.get(label, {})
            names, heights = [], []
            for system in COLUMNS:
                cell = values.get(system) or ()
                value = cell[index] if len(cell) > index else None
                if value is not None:
                    names.append(system)
                    heights.append(value)
            bars = ax.bar(names, heights, color=[COLORS[s] for s in names])
            ax.bar_label(bars, fmt="%.3g", fontsize=8)
            ax.set_title(title, fontsize=10)
            ax.set_xticks(range(len(names)), [HEADERS[s].split(" (")[0] for s in names], fontsize=8)
        fig.suptitle(f"N = {block['n']}, {block['replicas']} replica(s) per WebServer (medians; lower is better)")
        fig.tight_layout()
        path = out_prefix.parent / f"{out_prefix.name}-n{key}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written
