"""Harness failures: the run could not go on (setup failed, a fault could not be injected or healed, a step hung).

Why a record and not a traceback: a full run takes a quarter of an hour, and a fault that the harness cannot heal
used to end it with a Python traceback, the churn's ``Session is closed`` errors after it, and no table at all, so
the windows already measured were lost with it (issue 21). Now ``Phase`` turns any exception of a phase (and a
phase that runs past its limit) into a ``HarnessFailure`` naming the phase, the fault's last step and the time;
``scenario`` stops injecting faults, heals what it can, tears down, and still measures every window that ran;
``report`` writes the table with the aborted fault marked, and ``python -m chaos`` exits 2. A harness failure is
never a verdict on the operator, and the report says so. The traceback is kept, in a file of the run's work
directory, for whoever fixes the harness.

Used by ``scenario``; rendered by ``report``.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from chaos.verdicts import Window


@dataclass(frozen=True)
class HarnessFailure:
    phase: str  # "setup and baseline", "fault 12/17 sigterm-brownout", "final convergence", "teardown"
    fault: str  # the fault's name, "" outside a fault
    step: str  # the last step the fault announced (Window.step), "" when it announced none
    step_started: float  # epoch seconds the step began (0 when none)
    phase_started: float
    at: float  # epoch seconds the failure was caught
    error: str  # "ToxiproxyError: ..." or "did not finish within 420s"
    traceback_file: Path | None

    def describe(self) -> str:
        """One line for a terminal and the report: where, when, what, and where the traceback is."""
        when = datetime.fromtimestamp(self.at, tz=UTC).strftime("%H:%M:%S UTC")
        where = f"{self.phase}, step '{self.step}'" if self.step else self.phase
        since = f"{self.at - self.phase_started:.1f}s into the phase"
        if self.step:
            since += f", {self.at - self.step_started:.1f}s into the step"
        text = f"harness failure in {where} at {when} ({since}): {self.error}"
        if self.traceback_file is not None:
            text += f" (traceback: {self.traceback_file})"
        return text


class Phase:
    """One phase of the run whose errors end the run with a report instead of a traceback.

    ``async with Phase(name, ...) as phase``: any exception, or running past ``limit`` seconds, becomes
    ``phase.failure`` (None when the phase ended normally) instead of propagating. ``window`` is the fault's window,
    whose last announced step names where it failed. Cancellation and KeyboardInterrupt are not caught: a person
    stopping the run stops it.
    """

    def __init__(
        self, name: str, *, traceback_dir: Path, window: Window | None = None, limit: float | None = None
    ) -> None:
        self.name = name
        self.failure: HarnessFailure | None = None
        self._traceback_dir = traceback_dir
        self._window = window
        self._limit = limit
        self._scope = asyncio.timeout(limit)
        self._started = 0.0

    async def __aenter__(self) -> Phase:
        self._started = time.time()
        await self._scope.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        expired = False
        try:
            await self._scope.__aexit__(exc_type, exc, tb)
        except TimeoutError as err:  # the limit expired: the scope turned its cancellation into this
            exc, expired = err, True
        if not isinstance(exc, Exception):
            return False  # ended normally, or cancelled by a person: nothing to catch
        if expired:
            error = f"did not finish within {self._limit:g}s (the step named is where it hung)"
        else:
            error = f"{type(exc).__name__}: {exc}"
        steps = self._window.steps if self._window is not None else []
        step_started, step = steps[-1] if steps else (0.0, "")
        self.failure = HarnessFailure(
            phase=self.name,
            fault=self._window.name if self._window is not None else "",
            step=step,
            step_started=step_started,
            phase_started=self._started,
            at=time.time(),
            error=error,
            traceback_file=_keep_traceback(exc, self.name, self._traceback_dir),
        )
        return True


def _keep_traceback(err: BaseException, phase: str, directory: Path) -> Path | None:
    path = directory / "harness-failure.txt"
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"--- {phase} at {datetime.now(tz=UTC).isoformat()}\n")
            fh.writelines(traceback.format_exception(err))
    except OSError:
        return None
    return path
