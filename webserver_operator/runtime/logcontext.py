"""Which reconcile a log line belongs to: controller-runtime's per-reconcile logger values, for asyncio.

Why a context variable: controller-runtime hands every reconcile a logger carrying ``controller``, ``namespace``,
``name`` and a fresh ``reconcileID``, so every line a reconcile writes, however deep, can be grouped and followed.
asyncio gives each task its own copy of a ``ContextVar``, so ``runtime.controller`` sets it around one reconcile and
the log formatter (``manager.logs``) adds its fields to every record written inside, without threading a logger
through every call.
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Iterator

_CURRENT: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("reconcile", default=None)


@contextlib.contextmanager
def reconciling(*, controller: str, namespace: str, name: str) -> Iterator[str]:
    """Mark the enclosed code as one reconcile; yields its ``reconcileID``."""
    reconcile_id = str(uuid.uuid4())
    token = _CURRENT.set({"controller": controller, "namespace": namespace, "name": name, "reconcileID": reconcile_id})
    try:
        yield reconcile_id
    finally:
        _CURRENT.reset(token)


def current() -> dict[str, str]:
    """The fields of the reconcile running in this task, or an empty dict outside one."""
    return dict(_CURRENT.get() or {})
