"""The sharded benchmark's report: per-replica figures, ratios to the one replica of the same run, the targets."""

from pathlib import Path
from typing import Any

import pytest

from bench import sharded_charts, sharded_report


def config(path: str, rows: list[tuple[float, float, int, float, float]], **extra: Any) -> dict[str, Any]:
    """One configuration; each row is (RSS idle, RSS end, events per phase, CPU bulk, CPU image) of one replica."""
    size = len(rows)
    side = "server-side" if path == "server" else "client-side (gate off)"
    return {
        "path": path,
        "replicas": size,
        "label": f"{size} replicas, {side}",
        "split_s": 2.0,
        "loadavg_before": [2.0, 2.0, 2.0],
        "loadavg_after": [3.0, 2.0, 2.0],
        "wall_s": 100.0,
        "bulk_create": {
            "children_all_s": 40.0,
            "ready_all_s": 90.0,
            "control_plane_cpu_s": {"kube-apiserver": 80.0, "etcd": 20.0},
            "replicas": [
                {"cpu_s": bulk, "events": events, "dropped": 0, "reconciles": events // 2}
                for _, _, events, bulk, _ in rows
            ],
        },
        "image": {
            "deployments_updated_all_s": 30.0,
            "ready_all_s": 60.0,
            "replicas": [
                {"cpu_s": image, "events": events, "dropped": 0, "reconciles": events // 2}
                for _, _, events, _, image in rows
            ],
        },
        "replica_rows": [
            {"shards": [i], "filtering": path, "cached_objects_end": 3, "rss_idle_mb": idle, "rss_end_mb": end}
            for i, (idle, end, _, _, _) in enumerate(rows)
        ],
        **extra,
    }


def results() -> dict[str, Any]:
    return {
        "plan": {
            "n": 1000,
            "shards": 8,
            "namespaces": 40,
            "workers": 4,
            "kcm_api_qps": 200,
            "webservers_per_shard": {"0": 125, "1": 125},
        },
        "configs": [
            config("server", [(60.0, 160.0, 1000, 10.0, 10.0)]),
            config("server", [(60.0, 85.0, 250, 3.0, 2.0), (60.0, 90.0, 260, 2.5, 2.5)] * 2),
            config("client", [(60.0, 100.0, 1000, 4.0, 3.0), (60.0, 95.0, 1000, 3.0, 3.0)] * 2),
        ],
    }


def test_per_replica_figures_add_both_phases_and_the_growth_over_idle() -> None:
    rows = sharded_report.replica_figures(results()["configs"][1])
    assert rows[1] == {
        "index": 1,
        "shards": [1],
        "filtering": "server",
        "cached_objects": 3,
        "rss_end_mb": 90.0,
        "rss_growth_mb": 30.0,
        "events": 520,
        "dropped": 0,
        "reconciles": 260,
        "cpu_bulk_s": 2.5,
        "cpu_image_s": 2.5,
        "cpu_s": 5.0,
    }


def test_targets_are_judged_on_the_worst_replica_of_the_largest_fleet() -> None:
    lines = sharded_report.verdicts(results())
    assert lines == [
        "RSS per replica, 4 replicas, server-side: 0.56x one replica's (target <= 0.3x): missed",
        "watch events received per replica, 4 replicas, server-side: 0.26x one replica's (target <= 0.3x): met",
        "CPU per replica (bulk create + fan-out), 4 replicas, client-side (gate off): 0.35x one replica's "
        "(target <= 0.3x): missed",
    ]


def test_without_a_one_replica_run_no_target_is_judged() -> None:
    data = results()
    data["configs"][0]["error"] = "ClusterError: boom"
    assert sharded_report.verdicts(data) == ["no target judged: the one-replica server-side run is missing or failed"]
    assert "(0." not in sharded_report.summary_table(data), "no ratio without the baseline"
    alone = {"configs": [results()["configs"][0]]}
    assert sharded_report.verdicts(alone) == ["no target judged: no fleet of more than one replica ran without error"]


def test_summary_shows_each_configuration_with_its_ratio_to_one_replica() -> None:
    table = sharded_report.summary_table(results())
    lines = table.splitlines()
    assert lines[0] == "| | 1 replicas, server-side | 4 replicas, server-side | 4 replicas, client-side (gate off) |"
    events = next(line for line in lines if line.startswith("| worst replica: watch events received"))
    assert events == "| worst replica: watch events received | 2,000 | 520 (0.26x) | 2,000 (1.00x) |"
    fleet_cpu = next(line for line in lines if line.startswith("| fleet: CPU of all replicas"))
    assert fleet_cpu == "| fleet: CPU of all replicas, both phases (s) | 20.0 | 20.0 | 26.0 |"


def test_markdown_has_a_table_per_configuration_and_names_failures() -> None:
    data = results()
    data["configs"][2]["image"]["error"] = "not converged within 800 s: {'ready': 10} of 1000"
    text = sharded_report.markdown(data)
    assert "125 to 125 WebServers per shard" in text
    assert "**4 replicas, client-side (gate off)** — load average 2.0 before, 3.0 after; 100 s in all" in text
    assert "| 1 | 1 | server | 3 | 90.0 | 0.56x | 30.0 | 520 | 0.26x | 0 | 260 | 2.5 / 2.5 | 0.25x |" in text
    assert "image: not converged within 800 s" in text


@pytest.mark.plots
def test_chart_is_written_when_there_are_replica_figures(tmp_path: Path) -> None:
    png = sharded_charts.render(results(), tmp_path / "x.png")
    assert png == tmp_path / "x.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sharded_charts.render({"configs": [{"label": "failed", "error": "x"}]}, tmp_path / "y.png") is None
    assert not (tmp_path / "y.png").exists()
