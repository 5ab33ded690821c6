"""The chart's dashboard panels and alert rules as PromQL a real Prometheus can evaluate.

Why: Grafana sends a panel's query with its variables filled in (``$job``, ``$__rate_interval``), and an alert only
returns data while it fires. To prove on real series that each panel shows something and that each alert watches a
signal that exists, the dashboard test (tests/e2e/test_dashboard_prometheus.py) needs the queries as Grafana would
send them and each alert's *signal*: its expression without the final threshold (``x > 0.1`` -> ``x``,
``absent(up == 1)`` -> ``up``). Pure functions over the chart's files; parsing is promql-parser's.

Hands on: ``Query`` (one panel target), ``dashboard_queries``, ``grafana_expr``, ``alert_signal``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser

_COMPARISONS = frozenset({"==", "!=", ">", "<", ">=", "<="})


@dataclass(frozen=True)
class Query:
    """One target of a dashboard panel: which panel, its legend and the query as written in the dashboard."""

    panel_id: int
    title: str
    ref: str
    expr: str
    legend: str

    @property
    def id(self) -> str:
        """A stable pytest id: ``panel 7 A (Reconciles per second, by result)``."""
        return f"panel {self.panel_id} {self.ref} ({self.title})"


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_queries(path: Path) -> list[Query]:
    """Every target of every panel (rows' nested panels included), in dashboard order."""
    dashboard = json.loads(path.read_text())
    return [
        Query(
            panel_id=int(panel["id"]),
            title=str(panel.get("title", "")),
            ref=str(target.get("refId", "")),
            expr=str(target["expr"]),
            legend=str(target.get("legendFormat", "")),
        )
        for panel in _panels(dashboard["panels"])
        for target in panel.get("targets", [])
        if "expr" in target
    ]


def rate_interval(scrape_interval_s: float, step_s: float) -> str:
    """Grafana's ``$__rate_interval``: max(``$__interval`` + scrape interval, 4 x scrape interval)."""
    return f"{max(step_s + scrape_interval_s, 4 * scrape_interval_s):g}s"


def grafana_expr(expr: str, *, job: str, scrape_interval_s: float, step_s: float) -> str:
    """The query Grafana sends with ``$job`` set to ``job`` and the interval variables filled in for ``step_s``."""
    filled = re.sub(r"\$\{?__rate_interval\}?", rate_interval(scrape_interval_s, step_s), expr)
    filled = re.sub(r"\$\{?__interval\}?", f"{step_s:g}s", filled)
    # Grafana puts a variable's value into the regex of ``job=~"$job"`` escaped for RE2 inside a PromQL string.
    value = re.sub(r"([.*+?()\[\]{}|^$\\])", r"\\\\\1", job)
    filled = re.sub(r"\$\{?job\}?", lambda _: value, filled)
    if "$" in filled:
        raise AssertionError(f"{expr!r} uses a Grafana variable this test does not know: {filled!r}")
    return filled


def alert_signal(expr: str) -> str:
    """The series an alert compares: its expression without the outermost threshold, and ``absent()``'s argument.

    ``a / b > 0.1`` -> ``a / b``; ``absent(up{job="x"} == 1)`` -> ``up{job="x"}``; ``x == 1`` -> ``x``. An
    expression with neither is returned unchanged (it is its own signal).
    """
    node = promql_parser.parse(expr)
    while True:
        if isinstance(node, promql_parser.ParenExpr):
            node = node.expr
        elif isinstance(node, promql_parser.Call) and node.func.name == "absent":
            node = node.args[0]
        elif (
            isinstance(node, promql_parser.BinaryExpr)
            and str(node.op) in _COMPARISONS
            and isinstance(node.rhs, promql_parser.NumberLiteral)
        ):
            node = node.lhs
        else:
            return node.prettify()
