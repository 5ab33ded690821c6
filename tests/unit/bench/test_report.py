"""The report: medians over rounds, ratios against the same run's peers, and the README section it maintains."""

from pathlib import Path
from typing import Any

import pytest

from bench import report


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
