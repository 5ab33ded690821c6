"""Run ``webserver-operator`` with tracemalloc on, and dump a snapshot on every SIGUSR1.

Why a wrapper: where the operator's memory goes is only visible from inside the process, and the operator's code is
not changed for a measurement. Start it as ``python -X tracemalloc=10 -m bench.tracemalloc_operator run ...`` with
BENCH_TRACEMALLOC_DIR set; each SIGUSR1 writes ``snapshot-<k>.pickle`` there (k = 1, 2, ...). bench/profiling.py
sends the signals (idle, then at N converged WebServers) and reads the snapshots.
"""

from __future__ import annotations

import os
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

from webserver_operator.cli import main

_count = 0


def _dump(_signum: int, _frame: FrameType | None) -> None:
    global _count  # noqa: PLW0603 - one counter per process, only touched by this handler
    _count += 1
    out = Path(os.environ["BENCH_TRACEMALLOC_DIR"]) / f"snapshot-{_count}.pickle"
    tracemalloc.take_snapshot().dump(str(out) + ".tmp")
    os.replace(str(out) + ".tmp", out)


if __name__ == "__main__":
    if not tracemalloc.is_tracing():
        tracemalloc.start(10)
    signal.signal(signal.SIGUSR1, _dump)
    sys.exit(main(sys.argv[1:]))
