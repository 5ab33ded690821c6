"""The benchmark's command line and how it starts each operator: this operator's event loop can be chosen for an A/B
(the peers' cannot), and a report is redrawn from any current directory."""

import json
import signal
from pathlib import Path

import pytest

from bench import report
from bench.__main__ import main
from bench.scenarios import reconcile_dict
from bench.systems import operator_spec

KUBECONFIG = Path("/tmp/kubeconfig")


def _without_metrics_port(argv: tuple[str, ...]) -> list[str]:
    return [arg for arg in argv if not arg.startswith("--metrics-bind-address=")]


def test_this_operator_runs_on_its_default_loop_unless_one_is_named() -> None:
    default = operator_spec("ours", KUBECONFIG)
    assert not [arg for arg in default.argv if arg.startswith("--event-loop")]
    chosen = operator_spec("ours", KUBECONFIG, event_loop="asyncio")
    assert chosen.argv[-1] == "--event-loop=asyncio"
    assert _without_metrics_port(chosen.argv)[:-1] == _without_metrics_port(default.argv)


def test_this_operator_serves_metrics_on_loopback_http_for_the_reconcile_count() -> None:
    spec = operator_spec("ours", KUBECONFIG)
    assert "--no-metrics-secure" in spec.argv
    assert spec.metrics_url is not None
    port = spec.metrics_url.removeprefix("http://127.0.0.1:").removesuffix("/metrics")
    assert f"--metrics-bind-address=127.0.0.1:{port}" in spec.argv
    assert reconcile_dict(100, 3100, 1000) == {"reconciles": 3000, "reconciles_per_ws": 3.0}
    assert reconcile_dict(None, 3100, 1000) == {}, "a system without metrics reports no count"


def test_the_go_peer_is_started_the_same_whatever_loop_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bench.systems.go_peer_binary", lambda: Path("/bin/peer"))  # no build in a unit test
    assert operator_spec("go", KUBECONFIG, event_loop="asyncio") == operator_spec("go", KUBECONFIG)


def test_an_unknown_loop_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown event loop 'tokio': use one of auto, uvloop, asyncio"):
        operator_spec("ours", KUBECONFIG, event_loop="tokio")


def test_the_command_line_refuses_an_unknown_loop_before_starting_anything(capsys: pytest.CaptureFixture[str]) -> None:
    handler = signal.getsignal(signal.SIGTERM)  # main() installs its own SIGTERM handler
    try:
        with pytest.raises(SystemExit) as exit_:
            main(["run", "--event-loop", "tokio"])
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert exit_.value.code == 2
    assert "invalid choice: 'tokio'" in capsys.readouterr().err


def test_the_table_title_names_a_loop_other_than_the_default() -> None:
    runs = [{"system": "ours", "n": 10, "replicas": 1, "bulk_create": {"children_all_s": 1.0}}]
    chosen = report.markdown({"plan": {"ours_event_loop": "asyncio"}, "runs": runs})
    assert "this operator with --event-loop=asyncio" in chosen
    default = report.markdown({"plan": {"ours_event_loop": "auto"}, "runs": runs})
    assert "--event-loop" not in default


@pytest.mark.plots  # the report redraws the charts
def test_report_redraws_from_a_path_relative_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench.__main__ as cli  # noqa: PLC0415

    (tmp_path / "results").mkdir()
    (tmp_path / "README.md").write_text(f"# Benchmark\n\n{report.BEGIN}\nold\n{report.END}\n")
    runs = [{"system": "ours", "n": 10, "replicas": 1, "bulk_create": {"children_all_s": 1.0}}]
    (tmp_path / "results" / "run.json").write_text(json.dumps({"plan": {}, "runs": runs}))
    monkeypatch.setattr(cli, "BENCH_DIR", tmp_path)
    monkeypatch.chdir(tmp_path)
    handler = signal.getsignal(signal.SIGTERM)
    try:
        assert main(["report", "results/run.json", "--readme"]) == 0
    finally:
        signal.signal(signal.SIGTERM, handler)
    readme = (tmp_path / "README.md").read_text()
    assert "Latest run: [results/run.json](results/run.json)" in readme
    assert "| all children exist (s) | — | 1.00 |" in readme
    assert "old" not in readme
