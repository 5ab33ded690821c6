"""The report: medians over rounds, ratios against the same run's peers, and the README section it maintains."""

from pathlib import Path
from typing import Any

import pytest

from bench import charts, report


def run(system: str, children: float, *, concurrency: int | None = None, round_: int = 0) -> dict[str, Any]:
    bulk: dict[str, Any] = {"children_all_s": children}
    if concurrency is not None:
        bulk["concurrency"] = concurrency
    return {"system": system, "n": 100, "replicas": 1, "round": round_, "bulk_create": bulk}


def results() -> dict[str, Any]:
    return {
        "raw_best_concurrency": {"100": 64},
        "runs": [
            run("raw", 1.0, concurrency=64),
            run("raw", 9.0, concurrency=16),  # the sweep's slower level is not the raw limit
            run("ours", 3.0),
            run("ours", 5.0, round_=1),
            run("ours", 4.0, round_=2),
            run("go", 2.0),
            {**run("kopf", 8.0), "error": "TimeoutError: boom"},
        ],
    }


def test_table_shows_medians_and_ratios_from_the_same_run() -> None:
    text = report.markdown(results())
    row = next(line for line in text.splitlines() if line.startswith("| all children exist"))
    assert row == "| all children exist (s) | 1.00 | 4.00 | 2.00 | 8.00 | 4.00x | 2.00x | 0.50x |"
    assert "raw limit at 64 requests in flight" in text
    assert "- kopf N=100 round 1: run: TimeoutError: boom" in text


def test_readme_section_is_inserted_once_then_replaced(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Architecture\n\ntext\n\n## Development\n\nmore\n")
    report.update_readme(readme, "first table")
    report.update_readme(readme, "second table")
    text = readme.read_text()
    assert text.count("## Performance") == 1
    assert "second table" in text
    assert "first table" not in text
    assert text.index("## Performance") < text.index("## Development")


def test_readme_without_a_development_heading_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# x\n")
    with pytest.raises(ValueError, match="no '## Development' heading"):
        report.update_readme(readme, "table")


def test_rows_of_scenarios_not_run_are_left_out_and_named() -> None:
    data = results()
    data["plan"] = {"scenarios": ["bulk_create", "repair_delete"], "kcm_api_qps": 200}
    data["runs"][2]["repair_delete"] = {"latency_ms": {"p50": 20.0, "p99": 80.0}}
    text = report.markdown(data)
    assert "| repair of a deleted child, p50 / p99 (ms) | — | 20.0 / 80.0 |" in text
    assert "repair of a drift edit" not in text
    assert "new image" not in text
    assert "| steady state" not in text
    assert "so their rows are left out: repair_drift, image, steady, restart." in text
    assert "kube-controller-manager at 200 requests/s (every system alike)" in text


def test_a_scenario_that_ran_and_failed_keeps_its_row() -> None:
    data = results()
    data["plan"] = {"scenarios": list(report_scenarios())}
    text = report.markdown(data)
    assert "| repair of a deleted child, p50 / p99 (ms) | — | — | — | — |" in text
    assert "Not run in this benchmark" not in text


def report_scenarios() -> set[str]:
    return set().union(*(row.scenarios for row in report.ROWS)) - {"start"}


def test_user_and_system_cpu_are_reported_apart() -> None:
    data = results()
    data["runs"][2]["bulk_create"].update(cpu_user_s=12.25, cpu_system_s=3.5)
    row = next(line for line in report.markdown(data).splitlines() if "bulk create: user / system" in line)
    assert row.startswith("| operator CPU, bulk create: user / system (s) | — | 12.2 / 3.5 |")


def test_charts_draw_only_panels_with_data() -> None:
    data = results()
    data["plan"] = {"scenarios": ["bulk_create"]}
    block = next(iter(report.summarise(data).values()))
    panels, missing = charts.panels_with_data(block)
    assert [title for title, _ in panels] == ["all children exist (s)"]
    assert dict(panels[0][1]) == {"raw": 1.0, "ours": 4.0, "go": 2.0, "kopf": 8.0}
    assert "repair of a deleted child p99 (ms)" not in [title for title, _ in panels]
    assert "all Ready (s)" in missing


def test_a_ratio_too_small_for_two_decimals_is_not_shown_as_zero() -> None:
    data = results()
    data["runs"][2]["bulk_create"]["status_lag_ms"] = {"p50": 122.0, "p99": 471.0}
    data["runs"][5]["bulk_create"]["status_lag_ms"] = {"p50": 35168.0, "p99": 66318.0}
    text = report.markdown(data)
    row = next(line for line in text.splitlines() if line.startswith("| status lag"))
    assert row.endswith("| — | <0.01x | — |"), row
