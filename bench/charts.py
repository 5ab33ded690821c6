"""PNG charts of one benchmark: for each N, the key figures per system side by side (matplotlib, headless).

Why a picture next to the table: the ratio that matters (ours vs raw, Go and kopf) is read at a glance from bars, and
the README links the charts of the latest run. A panel is drawn only when at least one system has a value for it: a
scenario that was not run (or failed for every system) leaves no empty axis, and the title names what is missing.
"""

from __future__ import annotations

import math
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
    ("CPU per WebServer, image (ms)", "CPU per WebServer, image fan-out (ms)", 0),
)


def render(results: Result, out_prefix: Path) -> list[Path]:
    """Write ``<out_prefix>-n<N>.png`` per N; returns the paths."""
    import matplotlib  # noqa: PLC0415 - bench-only optional dependency, imported when charts are drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    written = []
    for key, block in summarise(results).items():
        panels, missing = panels_with_data(block)
        if not panels:
            continue  # nothing measured for this size: no chart rather than empty axes
        columns = min(3, len(panels))
        lines = math.ceil(len(panels) / columns)
        fig, axes = plt.subplots(lines, columns, figsize=(4.4 * columns, 3.5 * lines), squeeze=False)
        for ax in axes.flat[len(panels) :]:
            ax.remove()
        for ax, (title, bars) in zip(axes.flat, panels, strict=False):
            names = [system for system, _ in bars]
            drawn = ax.bar(names, [value for _, value in bars], color=[COLORS[s] for s in names])
            ax.bar_label(drawn, fmt="%.3g", fontsize=8)
            ax.set_title(title, fontsize=10)
            ax.set_xticks(range(len(names)), [HEADERS[s].split(" (")[0] for s in names], fontsize=8)
        heading = f"N = {block['n']}, {block['replicas']} replica(s) per WebServer (medians; lower is better)"
        if missing:
            heading += "\nno data (not run or failed): " + ", ".join(missing)
        fig.suptitle(heading, fontsize=11)
        fig.tight_layout()
        path = out_prefix.parent / f"{out_prefix.name}-n{key}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def panels_with_data(block: dict[str, Any]) -> tuple[list[tuple[str, list[tuple[str, float]]]], list[str]]:
    """The panels of one size that have data, as (title, bars), and the titles of those that have none."""
    rows = {row["label"]: row["values"] for row in block["rows"]}
    panels: list[tuple[str, list[tuple[str, float]]]] = []
    missing: list[str] = []
    for title, label, index in PANELS:
        bars = _bars(rows.get(label, {}), index)
        if bars:
            panels.append((title, bars))
        else:
            missing.append(title)
    return panels, missing


def _bars(values: dict[str, Any], index: int) -> list[tuple[str, float]]:
    """(system, value) for every system with a value at ``index`` of its cell."""
    bars = []
    for system in COLUMNS:
        cell = values.get(system) or ()
        value = cell[index] if len(cell) > index else None
        if value is not None:
            bars.append((system, value))
    return bars
