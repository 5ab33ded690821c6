"""A program run as a child process the way the tests, the benchmark and the chaos harness need it.

Why one wrapper: each of them runs the operator (the benchmark also its Go and kopf peers) as a real process, so
that signals, exit codes, probes and logs are what a user would get, and each needs the same four things: its own
session (a test can kill -9 it without touching the test runner), its output in a log file that outlives it, its
stderr lines handed over as they come (ports and tracebacks are read from them), and a stop that escalates from a
signal to SIGKILL.

Used by ``operator`` (the tests' and the bench's operator), the chaos replicas and the benchmark's peers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class Process:
    """A started child process in its own session. ``started_at`` is the wall-clock time just before exec.

    With ``on_line``, stderr (and stdout, when ``merge_stdout``) is read by a thread, line by line, into the log file
    and ``on_line``; without it, the output goes straight to the log file (or nowhere).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        log_path: Path | None = None,
        append: bool = False,
        merge_stdout: bool = False,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.killed = False
        mode = "a" if append else "w"
        self._log = log_path.open(mode, encoding="utf-8") if log_path is not None else None
        self._on_line = on_line
        self.started_at = time.time()
        if on_line is None:
            out = self._log if self._log is not None else subprocess.DEVNULL
            stdout, stderr = (out, subprocess.STDOUT) if merge_stdout else (subprocess.DEVNULL, out)
        else:
            stdout, stderr = (subprocess.STDOUT if merge_stdout else subprocess.DEVNULL), subprocess.PIPE
        self.proc = subprocess.Popen(
            self.argv,
            stdout=stdout,
            stderr=stderr,
            text=True,
            env=dict(os.environ if env is None else env),
            cwd=cwd,
            start_new_session=True,
        )
        self._reader: threading.Thread | None = None
        if on_line is not None:
            self._reader = threading.Thread(target=self._read, name=f"read-{self.proc.pid}", daemon=True)
            self._reader.start()

    def _read(self) -> None:
        """Hand on every line until the process closes its output, then close the log file.

        The reader closes it, not ``stop()``: a process that exits on its own (a supervised replica) leaves none open.
        """
        assert self.proc.stderr is not None
        assert self._on_line is not None
        try:
            for line in self.proc.stderr:
                if self._log is not None:
                    self._log.write(line)
                    self._log.flush()
                self._on_line(line)
        finally:
            self.proc.stderr.close()
            if self._log is not None:
                self._log.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, sig: signal.Signals) -> bool:
        """Send ``sig`` if the process still runs; False if it had already exited."""
        if self.proc.poll() is not None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)
        return True

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send ``sig`` and wait up to ``timeout``; then SIGKILL (``killed`` tells). Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.close()
        return self.proc.returncode

    def close(self) -> None:
        """After the process exited: let the reader finish the last lines (it closes the log), or close the log."""
        if self._reader is not None:
            self._reader.join(timeout=5)  # a grandchild may still hold stderr open: then the reader closes it later
        elif self._log is not None:
            self._log.close()
