"""From the raw results to what people read: medians per system, ratios, the markdown table, the README section.

Why medians of rounds and ratios: absolute times on a shared 2-core machine move with whatever else runs; the
ratios between systems measured in the same benchmark are what carries over. The table has one row per figure with
its unit, the value for each system, and ours/raw, ours/Go, ours/kopf where both sides exist.

Rows of a scenario the benchmark did not run (``--scenarios``) are left out and named under the table, so a blank
row always means "measured and failed" (the problems list says why), never "not asked for".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.stats import median

Result = dict[str, Any]
COLUMNS = ("raw", "ours", "go", "kopf")
HEADERS = {"raw": "raw limit", "ours": "this operator", "go": "controller-runtime (Go)", "kopf": "kopf"}
BEGIN = "<!-- bench:results:begin -->"
END = "<!-- bench:results:end -->"


def lookup(run: Result, dotted: str) -> Any:
    node: Any = run
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


@dataclass(frozen=True)
class Row:
    label: str
    paths: tuple[str, ...]
    raw_paths: tuple[str, ...] | None = None
    digits: int | tuple[int, ...] = 2
    ratio: bool = True

    @property
    def scenarios(self) -> frozenset[str]:
        """The scenarios (top-level result keys) this row reads."""
        return frozenset(p.split(".", 1)[0] for p in (*self.paths, *(self.raw_paths or ())))


ROWS = (
    Row("all children exist (s)", ("bulk_create.children_all_s",), ("bulk_create.children_all_s",)),
    Row(
        "all Ready at their generation (s); raw: all Deployments available",
        ("bulk_create.ready_all_s",),
        ("bulk_create.available_all_s",),
    ),
    Row(
        "per object: children exist p50 / p99 (s)",
        ("bulk_create.children_per_object_s.p50", "bulk_create.children_per_object_s.p99"),
    ),
    Row(
        "per object: Ready p50 / p99 (s)", ("bulk_create.ready_per_object_s.p50", "bulk_create.ready_per_object_s.p99")
    ),
    Row(
        "status lag, Deployment available -> Ready, p50 / p99 (ms)",
        ("bulk_create.status_lag_ms.p50", "bulk_create.status_lag_ms.p99"),
        digits=0,
    ),
    Row("CPU per WebServer, bulk create (ms)", ("bulk_create.cpu_per_ws_ms",), digits=1),
    Row(
        "operator CPU, bulk create: user / system (s)",
        ("bulk_create.cpu_user_s", "bulk_create.cpu_system_s"),
        digits=1,
    ),
    Row("kube-apiserver CPU during bulk create (s)", ("bulk_create.control_plane_cpu_s.kube-apiserver",), digits=1),
    Row(
        "operator requests, bulk create (writes / total)",
        ("bulk_create.requests.writes", "bulk_create.requests.total"),
        digits=0,
    ),
    Row("RSS idle / after bulk create (MB)", ("start.rss_idle_mb", "bulk_create.rss_end_mb"), digits=0),
    Row(
        "repair of a deleted child, p50 / p99 (ms)",
        ("repair_delete.latency_ms.p50", "repair_delete.latency_ms.p99"),
        digits=1,
    ),
    Row(
        "repair of a drift edit, p50 / p99 (ms)",
        ("repair_drift.latency_ms.p50", "repair_drift.latency_ms.p99"),
        digits=1,
    ),
    Row(
        "new image on all: Deployments updated (s)", ("image.deployments_updated_s",), ("image.deployments_updated_s",)
    ),
    Row(
        "new image on all: all Ready again (s); raw: all available", ("image.ready_all_s",), ("image.available_all_s",)
    ),
    Row("new image: status lag p50 / p99 (ms)", ("image.status_lag_ms.p50", "image.status_lag_ms.p99"), digits=0),
    Row("CPU per WebServer, image fan-out (ms)", ("image.cpu_per_ws_ms",), digits=1),
    Row("operator CPU, image fan-out: user / system (s)", ("image.cpu_user_s", "image.cpu_system_s"), digits=1),
    Row("steady state: writes / reads (get, list)", ("steady.requests.writes", "steady.requests.reads"), digits=0),
    Row("steady state: Events written", ("steady.events_created",), digits=0, ratio=False),
    Row("restart over N converged: writes / time until quiet (s)", ("restart.writes", "restart.idle_s"), digits=(0, 1)),
    Row("process start to first reconcile (s)", ("start.first_reconcile_s",)),
    Row("RSS converged, end of steady state (MB)", ("steady.rss_end_mb",), digits=0),
)


def best_concurrency(runs: list[Result]) -> dict[str, int]:
    """Per N, the raw driver's concurrency with the shortest "all children exist" in the first round."""
    best: dict[str, tuple[float, int]] = {}
    for run in runs:
        children, level = lookup(run, "bulk_create.children_all_s"), lookup(run, "bulk_create.concurrency")
        if run["system"] != "raw" or run.get("round", 0) != 0 or children is None or level is None:
            continue
        key = str(run["n"])
        if key not in best or children < best[key][0]:
            best[key] = (children, level)
    return {key: level for key, (_, level) in best.items()}


def groups(results: Result) -> dict[tuple[int, int], dict[str, list[Result]]]:
    """Runs by (N, replicas) and system; raw keeps only the runs at its best concurrency."""
    best = {int(k): v for k, v in (results.get("raw_best_concurrency") or {}).items()}
    out: dict[tuple[int, int], dict[str, list[Result]]] = {}
    for run in results["runs"]:
        key = (run["n"], run["replicas"])
        system = run["system"]
        if system == "raw" and lookup(run, "bulk_create.concurrency") != best.get(run["n"]):
            continue
        out.setdefault(key, {}).setdefault(system, []).append(run)
    return out


def medians(runs: Iterable[Result], paths: tuple[str, ...]) -> tuple[float | None, ...]:
    runs = list(runs)
    values = []
    for p in paths:
        found = [lookup(r, p) for r in runs]
        values.append(median(v for v in found if isinstance(v, int | float)))
    return tuple(values)


def _fmt(values: tuple[float | None, ...], digits: int | tuple[int, ...]) -> str:
    if all(v is None for v in values):
        return "—"
    each = digits if isinstance(digits, tuple) else (digits,) * len(values)
    return " / ".join("—" if v is None else f"{v:,.{d}f}" for v, d in zip(values, each, strict=True))


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "—"
    if 0 < a / b < 0.005:  # would print as 0.00x, which reads as "nothing" rather than "far smaller"
        return "<0.01x"
    return f"{a / b:.2f}x"


#: Always run: the operator's start is the first step of every run.
_ALWAYS = frozenset({"start"})


def not_run(results: Result) -> list[str]:
    """Scenarios of the table that this benchmark did not run (``--scenarios``), in table order."""
    chosen = (results.get("plan") or {}).get("scenarios")
    if chosen is None:  # a partial result without its plan: everything was asked for
        return []
    missing: list[str] = []
    for row in ROWS:
        for scenario in sorted(row.scenarios - _ALWAYS - set(chosen)):
            if scenario not in missing:
                missing.append(scenario)
    return missing


def summarise(results: Result) -> dict[str, Any]:
    """Median values per (N, replicas), row and system, plus ratios; what the JSON summary and table show.

    Rows of scenarios that were not run are left out (``not_run``).
    """
    summary: dict[str, Any] = {}
    skipped = set(not_run(results))
    for (n, replicas), by_system in sorted(groups(results).items()):
        rows = []
        for row in ROWS:
            if row.scenarios & skipped:
                continue
            cells: dict[str, tuple[float | None, ...]] = {}
            for system in COLUMNS:
                runs = by_system.get(system, [])
                if system == "raw":
                    cells[system] = medians(runs, row.raw_paths) if row.raw_paths else ()
                else:
                    cells[system] = medians(runs, row.paths)
            rows.append({"label": row.label, "digits": row.digits, "ratio": row.ratio, "values": cells})
        summary[f"{n}x{replicas}"] = {
            "n": n,
            "replicas": replicas,
            "rounds": {s: len(by_system.get(s, [])) for s in COLUMNS},
            "rows": rows,
        }
    return summary


def markdown(results: Result) -> str:
    best = results.get("raw_best_concurrency") or {}
    parts = []
    for block in summarise(results).values():
        n, replicas = block["n"], block["replicas"]
        rounds = block["rounds"]
        plan = results.get("plan") or {}
        steady = plan.get("steady_seconds", 60)
        qps = plan.get("kcm_api_qps")
        loop = plan.get("ours_event_loop")
        title = (
            f"**N = {n}, {replicas} replica(s) per WebServer** — medians of {max(rounds.values())} round(s), each "
            f"system on its own fresh cluster; raw limit at {best.get(str(n), '?')} requests in flight; 4 workers "
            f"per operator; steady state over {steady:.0f} s"
            + (f"; kube-controller-manager at {qps} requests/s (every system alike)" if qps else "")
            + (f"; this operator with --event-loop={loop}" if loop and loop != "auto" else "")
        )
        head = "| | " + " | ".join(HEADERS[c] for c in COLUMNS) + " | ours/raw | ours/Go | ours/kopf |"
        lines = [title, "", head, "|" + " --- |" * (len(COLUMNS) + 4)]
        for row in block["rows"]:
            v = row["values"]
            cells = [_fmt(tuple(v[c]), row["digits"]) if v[c] else "—" for c in COLUMNS]
            ours = v["ours"][0] if v["ours"] else None
            ratios = ["—", "—", "—"]
            if row["ratio"]:
                raw = v["raw"][0] if v["raw"] else None
                ratios = [
                    _ratio(ours, raw),
                    _ratio(ours, v["go"][0] if v["go"] else None),
                    _ratio(ours, v["kopf"][0] if v["kopf"] else None),
                ]
            lines.append(f"| {row['label']} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
        parts.append("\n".join(lines))
    missing = not_run(results)
    if missing:
        parts.append(
            "Not run in this benchmark (`--scenarios`), so their rows are left out: " + ", ".join(missing) + "."
        )
    wall = sum(float(r.get("wall_s") or 0) for r in results["runs"])
    if wall:
        parts.append(f"Time of all runs together: {wall / 60:.0f} min.")
    errors = [
        f"- {r['system']} N={r['n']} round {r.get('round', 0) + 1}: {where}: {msg}"
        for r in results["runs"]
        for where, msg in _errors(r)
    ]
    if errors:
        parts.append("Problems recorded in this run:\n\n" + "\n".join(errors))
    return "\n\n".join(parts) + "\n"


def _errors(run: Result) -> list[tuple[str, str]]:
    found = []
    if run.get("error"):
        found.append(("run", str(run["error"])))
    for key, value in run.items():
        if isinstance(value, dict):
            if value.get("error"):
                found.append((key, str(value["error"])))
            if value.get("equivalence_problems"):
                found.append((key, "children differ from ours: " + "; ".join(value["equivalence_problems"][:3])))
    return found


def update_readme(readme: Path, section: str) -> None:
    """Replace the generated part of the README's Performance section (create the section before Development)."""
    text = readme.read_text()
    block = f"{BEGIN}\n{section.rstrip()}\n{END}"
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block, text, flags=re.DOTALL)
    else:
        intro = (
            "## Performance\n\n"
            "`make bench` measures this operator against the API server's own limit (the same children created "
            "directly) and two peers doing the same job: a controller-runtime operator as kubebuilder scaffolds it "
            "and a kopf operator as kopf's documentation shows it (`bench/peers/`). Each system runs alone on a fresh "
            "local control plane, in alternating order; the tables show medians and ratios from one run. The machine "
            "has 2 cores shared with other work, so absolute times are noisy: compare the ratios. Method, every "
            "scenario and the profile of the operator: [bench/README.md](bench/README.md).\n\n"
        )
        marker = "## Development"
        if marker not in text:
            raise ValueError(f"{readme} has no '{marker}' heading to put the Performance section before")
        text = text.replace(marker, intro + block + "\n\n" + marker, 1)
    readme.write_text(text)
