"""Draw a dashboard panel as a PNG from the series a real Prometheus returned (matplotlib, headless).

Why: docs/monitoring.md shows users what the chart's Grafana dashboard looks like, and those pictures must come from
series the operator really exported, not from a mock-up. The dashboard test (tests/e2e/test_dashboard_prometheus.py)
hands each key panel's range-query results here; the legend of each line is the panel's ``legendFormat`` filled
with the series' labels, as Grafana fills it. Returns the PNG's path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.prometheus import Series


@dataclass(frozen=True)
class Line:
    """One query's results in a panel and how Grafana labels them."""

    legend: str
    series: list[Series]


def legend(template: str, labels: dict[str, str]) -> str:
    """Grafana's legendFormat: ``{{name}}`` becomes the label's value (empty when the series has no such label)."""
    return re.sub(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip()


def render_panel(title: str, unit: str, lines: Sequence[Line], start: float, out: Path) -> Path:
    """Write ``out``: one line per series of every query, x in seconds since ``start``; NaN points are gaps."""
    import matplotlib  # noqa: PLC0415 - the `plots` extra (make monitoring-panels), loaded only when a panel is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
    drawn = 0
    for line in lines:
        for series in line.series:
            xs = [t - start for t, _ in series.points]
            ys = [v for _, v in series.points]
            ax.plot(xs, ys, linewidth=1.6, label=legend(line.legend, series.labels) or "value")
            drawn += 1
    if not drawn:
        plt.close(fig)
        raise AssertionError(f"panel {title!r}: no series to draw")
    ax.set_title(title, loc="left", fontsize=11)
    ax.set_xlabel("seconds since Prometheus started scraping")
    ax.set_ylabel(unit)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
