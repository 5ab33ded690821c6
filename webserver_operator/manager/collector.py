"""Garbage-collector settings for a process whose heap is mostly a cache of decoded JSON objects.

Why: the informer caches hold thousands of decoded API objects (nested dicts and lists without reference cycles)
and every watch event decodes another one. Reference counting frees those; CPython's cyclic collector still walks
them: a young collection every 700 new container objects, and full collections over every tracked object, imported
modules and classes included. In a bulk create of 1000 WebServers that was about 5% of the operator's CPU (0.27 s,
measured with ``gc.callbacks``; bench/README.md). Two settings that large Python services use for the same reason:

- a young-generation threshold of ``YOUNG_THRESHOLD`` (10,000) container objects instead of 700: most objects of one
  watch event or one request die before a young collection looks at them, and there are 15 times fewer collections;
- ``gc.freeze()`` once the caches have synced: everything alive then (the modules, classes and functions of the
  process, the first list of every resource) moves to a permanent generation that full collections skip.

Neither changes what is freed, only how often and over how many objects the collector looks for cycles; a reference
cycle is still collected, after at most ``YOUNG_THRESHOLD`` new objects instead of 700.

Called by ``manager.operator`` for an operator that has its process to itself (``run_operator``, what the CLI
runs): ``tune()`` when it starts, ``settle()`` once the caches have synced. Both are process-wide, so an operator
embedded in another process (the integration tests run some in the test process) leaves the collector as it is.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle", "tune"]

YOUNG_THRESHOLD = 10_000


def tune() -> None:
    """Collect the young generation every ``YOUNG_THRESHOLD`` new container objects (the older ones as before)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def settle() -> None:
    """Collect what start-up left behind, then exempt everything alive now from later full collections."""
    gc.collect()
    gc.freeze()
