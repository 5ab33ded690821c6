"""The process runner: output reaches the log file and the line handler, and a stop escalates to SIGKILL."""

import signal
import sys
import time
from pathlib import Path

from harness.process import Process

PRINTS = "import sys; [print(f'line {i}', file=sys.stderr, flush=True) for i in range(3)]"
IGNORES_SIGTERM = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', file=sys.stderr, flush=True); time.sleep(60)"
)


def test_stderr_lines_reach_the_handler_and_the_log(tmp_path: Path) -> None:
    seen: list[str] = []
    proc = Process([sys.executable, "-c", PRINTS], log_path=tmp_path / "p.log", on_line=seen.append)
    assert proc.proc.wait(timeout=10) == 0
    assert proc.stop() == 0
    assert seen == ["line 0\n", "line 1\n", "line 2\n"]
    assert (tmp_path / "p.log").read_text() == "line 0\nline 1\nline 2\n"


def test_without_a_handler_stdout_and_stderr_are_appended_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    log.write_text("before\n")
    code = "import sys; print('out', flush=True); print('err', file=sys.stderr, flush=True)"
    proc = Process([sys.executable, "-c", code], log_path=log, append=True, merge_stdout=True)
    assert proc.proc.wait(timeout=10) == 0
    assert proc.stop() == 0
    assert sorted(log.read_text().splitlines()) == ["before", "err", "out"]


def test_a_process_that_ignores_sigterm_is_killed_after_the_timeout(tmp_path: Path) -> None:
    seen: list[str] = []
    proc = Process([sys.executable, "-c", IGNORES_SIGTERM], log_path=tmp_path / "p.log", on_line=seen.append)
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen == ["ready\n"]
    assert proc.stop(signal.SIGTERM, timeout=0.5) == -signal.SIGKILL
    assert proc.killed
    assert not proc.alive()


def test_a_process_that_exits_on_its_own_leaves_no_file_open(tmp_path: Path) -> None:
    """A supervised replica is never stopped by the harness: its reader closes the log at the end of the output."""
    proc = Process([sys.executable, "-c", PRINTS], log_path=tmp_path / "p.log", on_line=lambda _: None)
    assert proc.proc.wait(timeout=10) == 0
    assert proc._reader is not None
    proc._reader.join(timeout=10)
    assert proc._log is not None
    assert proc._log.closed
