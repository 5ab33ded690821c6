"""The sharded faults' verdicts as the run computes them (chaos/shardfaults.py), the preset a fault name selects, and
the sharded report's own block in docs/reliability.md (chaos/report.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from chaos import report, shardfaults
from chaos.scenario import FULL, SHARDED, Measured, Result, with_faults
from chaos.shardverdicts import FENCE_RULE, OVERLAP_RULE, OWNERSHIP_RULE, TAKEOVER_RULE
from chaos.toxiproxy import Toxiproxy
from chaos.verdicts import Figures, Rule, Window
from tests.unit.chaos.fake_harness import FakeHarness
from tests.unit.chaos.test_shardverdicts import COUNT, A, B, C, lease, write


def sharded_harness() -> FakeHarness:
    h = FakeHarness(Toxiproxy("http://127.0.0.1:9"))
    h.cfg = replace(SHARDED, shards=COUNT)
    h.started = {A: [0.0], B: [0.0], C: [0.0]}
    return h


def killed_window() -> Window:
    w = Window("shard-kill", "kill", start=99.5, healed=120.0, end=140.0)
    w.extra["killed replica"] = "op-a"
    w.marks.update(fault=100.0, settled=4.0)
    w.extra["shards settled after the recovery"] = "4.0s (shares op-b 1, op-c 1)"
    return w


def verdicts(rules: list[Rule]) -> dict[str, bool]:
    return {r.name.removesuffix(" (after the recovery)"): r.passed for r in rules}


TAKEN_OVER = [
    lease(99.0, A, 0, "op-a_1"),
    lease(99.0, A, 1, "op-a_1"),
    write(99.6, A, 0),
    lease(110.0, B, 0, "op-b_1"),
    lease(112.0, C, 1, "op-c_1"),
    write(113.0, B, 0),
    write(113.0, C, 1),
]


def test_a_kill_whose_shards_are_taken_over_in_time_by_fenced_replicas_passes_every_sharded_rule() -> None:
    h = sharded_harness()
    rules = shardfaults.judge_kill(h.as_harness(), killed_window(), requests=TAKEN_OVER, timeline=[])
    assert verdicts(rules) == {FENCE_RULE: True, OVERLAP_RULE: True, OWNERSHIP_RULE: True, TAKEOVER_RULE: True}
    assert "1 accepted" not in rules[0].detail and "of 3 judged" in rules[0].detail


def test_a_kill_fails_on_a_write_after_expiry_a_double_writer_a_late_takeover_or_no_settling() -> None:
    h = sharded_harness().as_harness()
    late = [*TAKEN_OVER, write(109.99, A, 1)]  # op-a's grant of shard 1 expired at 108.98
    assert verdicts(shardfaults.judge_kill(h, killed_window(), requests=late, timeline=[]))[FENCE_RULE] is False
    early = [*TAKEN_OVER, lease(101.0, C, 0, "op-c_1"), write(101.5, C, 0)]  # op-a's grant ran until 108.98
    assert verdicts(shardfaults.judge_kill(h, killed_window(), requests=early, timeline=[]))[OVERLAP_RULE] is False
    slow = [r for r in TAKEN_OVER if r.user != C] + [lease(116.0, C, 1, "op-c_1")]
    assert verdicts(shardfaults.judge_kill(h, killed_window(), requests=slow, timeline=[]))[TAKEOVER_RULE] is False
    unsettled = killed_window()
    del unsettled.marks["settled"]
    assert verdicts(shardfaults.judge_kill(h, unsettled, requests=TAKEN_OVER, timeline=[]))[OWNERSHIP_RULE] is False
    unmarked = Window("shard-kill", "kill", start=99.5, healed=120.0, end=140.0)
    assert verdicts(shardfaults.judge_kill(h, unmarked, requests=TAKEN_OVER, timeline=[]))[TAKEOVER_RULE] is False


def test_the_scale_verdict_needs_both_stopped_replicas_to_exit_0() -> None:
    h = sharded_harness().as_harness()
    w = Window("shard-scale", "scale", start=99.5, healed=120.0, end=140.0)
    w.marks.update({"exit:op-a": 0.0, "exit:op-b": 0.0, "settled": 2.0})
    assert all(r.passed for r in shardfaults.judge_scale(h, w, requests=TAKEN_OVER[:3], timeline=[]))
    w.marks["exit:op-b"] = math.nan  # no process was running to stop
    (*_, exited) = shardfaults.judge_scale(h, w, requests=TAKEN_OVER[:3], timeline=[])
    assert not exited.passed and exited.detail == "op-a: 0, op-b: not running"


def test_naming_only_sharded_faults_selects_the_sharded_preset_and_mixing_is_refused() -> None:
    config = with_faults(FULL, ["shard-freeze", "shard-kill"])
    assert config.sharded and config.shards == 8 and config.faults == ["shard-freeze", "shard-kill"]
    assert config.slots == ("op-a", "op-b", "op-c") and config.spare_slots == ("op-d",)
    assert not any(name.startswith("shard-") for name in FULL.faults)
    with pytest.raises(ValueError, match="name them in two runs"):
        with_faults(FULL, ["shard-kill", "etcd-freeze"])
    with pytest.raises(ValueError, match="runs only the sharded faults"):
        with_faults(SHARDED, ["etcd-freeze"])


def test_the_sharded_report_lives_in_its_own_block_that_the_full_report_keeps(tmp_path: Path) -> None:
    path = tmp_path / "reliability.md"
    report.write(path, "# Reliability under real faults\n\nfull run 1\n")
    report.write_block(path, "# Reliability under real faults\n\n## Summary\n\nsharded run 1\n")
    text = path.read_text()
    assert text.index("full run 1") < text.index(report.MARKER) < text.index("## Sharded run (issue 18)")
    assert "### Summary\n\nsharded run 1" in text
    report.write_block(path, "# Reliability under real faults\n\nsharded run 2\n")
    report.write(path, "# Reliability under real faults\n\nfull run 2\n")
    text = path.read_text()
    assert "sharded run 2" in text and "full run 2" in text
    assert "sharded run 1" not in text and "full run 1" not in text and text.count(report.BLOCK_BEGIN) == 1


def test_the_sharded_report_names_its_own_columns_and_rules() -> None:
    w = killed_window()
    fig = Figures(deposed_writes=["op-a patch deployments ns-1/web"], leader_changes=["shard 0: op-b_1 from +10.0s"])
    rules = shardfaults.judge_kill(sharded_harness().as_harness(), w, requests=TAKEN_OVER, timeline=[])
    result = Result(config=SHARDED, started=99.0, finished=200.0, faults=[Measured(w, fig, rules)])
    text = report.render(result, command="make chaos CHAOS_ARGS='--preset sharded'")
    assert "| unfenced writes | liveness failures | tracebacks | shard handovers | verdict |" in text
    assert "| [shard-kill](#shard-kill) |" in text and "| 1 | 0 | 0 | 1 | PASS |" in text
    assert "writes accepted for a shard without a current grant / rejected attempts | 1 / 0" in text
    assert f"| {TAKEOVER_RULE} | PASS |" in text and "--shards 8" in text
