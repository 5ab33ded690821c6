"""A harness failure is reported with the fault, the step and the time, and the windows already measured survive."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from chaos.__main__ import exit_code
from chaos.failure import Phase
from chaos.report import render, summary
from chaos.scenario import FULL, SHORT, Measured, Result, quiet_rule, with_faults
from chaos.toxiproxy import ToxiproxyError
from chaos.verdicts import Figures, Rule, Window
from harness.audit import Request


async def test_an_error_in_a_fault_becomes_a_failure_naming_the_fault_the_step_and_the_time(tmp_path: Path) -> None:
    w = Window("sigterm-brownout", "leader SIGTERMed during an API brownout", start=time.time())
    async with Phase("fault 12/19 sigterm-brownout", traceback_dir=tmp_path, window=w) as phase:
        w.step("inject 3000 ms latency on op-b")
        w.step("heal: recreate proxy op-b")
        raise ToxiproxyError("toxiproxy DELETE /proxies/op-b: HTTP 500: boom")
    failure = phase.failure
    assert failure is not None
    assert (failure.fault, failure.step) == ("sigterm-brownout", "heal: recreate proxy op-b")
    text = failure.describe()
    assert text.startswith("harness failure in fault 12/19 sigterm-brownout, step 'heal: recreate proxy op-b' at ")
    assert "UTC" in text and "ToxiproxyError: toxiproxy DELETE /proxies/op-b: HTTP 500: boom" in text
    assert failure.traceback_file is not None and "Traceback" in failure.traceback_file.read_text()


async def test_a_phase_past_its_limit_is_a_failure_at_the_step_where_it_hung(tmp_path: Path) -> None:
    w = Window("latency", "latency", start=time.time())
    started = time.monotonic()
    async with Phase("fault 6/19 latency", traceback_dir=tmp_path, window=w, limit=0.2) as phase:
        w.step("heal: recreate both proxies")
        await asyncio.sleep(30)
    assert time.monotonic() - started < 2
    assert phase.failure is not None and phase.failure.step == "heal: recreate both proxies"
    assert phase.failure.error == "did not finish within 0.2s (the step named is where it hung)"


async def test_a_phase_that_ends_normally_is_no_failure(tmp_path: Path) -> None:
    async with Phase("setup and baseline", traceback_dir=tmp_path) as phase:
        await asyncio.sleep(0)
    assert phase.failure is None and not (tmp_path / "harness-failure.txt").exists()


def _measured(name: str, *, aborted: bool = False) -> Measured:
    w = Window(name, f"{name} title", start=100.0, healed=0.0 if aborted else 110.0, end=130.0, aborted=aborted)
    if not aborted:
        w.canary, w.backlog = 1.5, 2.5
    else:
        w.steps.append((120.0, "heal: recreate proxy op-b"))
    return Measured(w, Figures(), [] if aborted else [Rule("recovered", True, "canary 1.5s")])


async def test_the_report_keeps_the_faults_that_ran_marks_the_aborted_one_and_the_run_exits_2(tmp_path: Path) -> None:
    config = with_faults(FULL, ["etcd-freeze", "sigterm-brownout", "leader-freeze"])
    w = _measured("sigterm-brownout", aborted=True).window
    async with Phase("fault 2/3 sigterm-brownout", traceback_dir=tmp_path, window=w) as phase:
        raise ToxiproxyError("toxiproxy: proxy op-b could not be created again")
    result = Result(config=config, started=90.0, finished=200.0, aborted=phase.failure)
    result.faults = [_measured("etcd-freeze"), Measured(w, Figures(), [])]
    text = render(result, command="make chaos")
    assert "Overall: **ABORTED** (harness)." in text
    assert "## Harness failure" in text and "Measured and judged as usual (below): etcd-freeze." in text
    assert "The aborted fault is marked ABORTED and not judged. Not run: leader-freeze." in text
    assert "| [etcd-freeze](#etcd-freeze) | 10 | 1.5 | 2.5 |" in text and text.count("| PASS |") >= 1
    assert "| [sigterm-brownout](#sigterm-brownout) | 30 (aborted) | — | — |" in text
    assert "**Aborted by a harness failure** in the step 'heal: recreate proxy op-b'" in text
    assert "The final phase (convergence, duplicates, foreign objects, quiet window) did not run." in text
    assert not result.passed and exit_code(result) == 2
    assert summary(result).splitlines()[1].startswith("  ABORTED: harness failure in fault 2/3 sigterm-brownout")


def test_exit_codes_without_a_harness_failure() -> None:
    passing = Result(config=SHORT, started=0.0, faults=[_measured("etcd-freeze")])
    assert exit_code(passing) == 0
    passing.final.append(Rule("0 lost updates", False, "1 not converged"))
    assert exit_code(passing) == 1


def test_the_quiet_window_is_judged_once_the_operator_converged_even_if_the_garbage_collector_lags() -> None:
    write = Request("1", 5.0, 5.1, "op-a", "op", "patch", "deployments", "ns", "web", 200, "", None)
    waiting = quiet_rule([], [], quiet_start=0.0, quiet_end=30.0, settled=True, waiting=2)
    assert waiting.passed and waiting.detail.endswith("(2 WebServer(s) still waiting for the garbage collector)")
    assert not quiet_rule([], [], quiet_start=0.0, quiet_end=30.0, settled=False, waiting=0).passed
    wrote = quiet_rule([write], [], quiet_start=0.0, quiet_end=30.0, settled=True, waiting=0)
    assert not wrote.passed and wrote.detail.startswith("1 writes accepted in the 30s after convergence, 0 rejected")
    assert "op-a patch deployments ns/web -> 200 at +5.0s" in wrote.detail
