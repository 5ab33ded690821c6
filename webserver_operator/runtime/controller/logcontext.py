"""Which reconcile a log line belongs to: controller-runtime's per-reconcile logger values, for asyncio.

Why a context variable: controller-runtime hands every reconcile a logger carrying ``controller``, ``namespace``,
``name`` and a fresh ``reconcileID``, so every line a reconcile writes, however deep, can be grouped and followed.
asyncio gives each task its own copy of a ``ContextVar``, so ``runtime.controller.loop`` sets it around one reconcile
and the log formatter (``manager.logs``) adds its fields to every record written inside, without threading a logger
through every call.

Why the ``reconcileID`` is made on first use: most reconciles write no log line at all (a resync, a child's status
moving on), and a ``uuid4`` costs an ``os.urandom`` system call. The ID is drawn when the first line of a reconcile
asks for it and kept for the rest of that reconcile, so every line of one reconcile still carries the same ID.
"""

from __future__ import annotations

import contextvars
import uuid
from types import TracebackType

__all__ = ["Reconcile", "current", "reconciling"]


class Reconcile:
    """One reconcile's log fields; ``reconcile_id`` is drawn when first asked for."""

    __slots__ = ("_id", "_token", "controller", "name", "namespace")

    def __init__(self, *, controller: str, namespace: str, name: str) -> None:
        self.controller, self.namespace, self.name = controller, namespace, name
        self._id: str | None = None
        self._token: contextvars.Token[Reconcile | None] | None = None

    @property
    def reconcile_id(self) -> str:
        if self._id is None:
            self._id = str(uuid.uuid4())
        return self._id

    def fields(self) -> dict[str, str]:
        return {
            "controller": self.controller,
            "namespace": self.namespace,
            "name": self.name,
            "reconcileID": self.reconcile_id,
        }

    def __enter__(self) -> Reconcile:
        self._token = _CURRENT.set(self)
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None


_CURRENT: contextvars.ContextVar[Reconcile | None] = contextvars.ContextVar("reconcile", default=None)


def reconciling(*, controller: str, namespace: str, name: str) -> Reconcile:
    """The fields of one reconcile; use it as a context manager around the code of that reconcile."""
    return Reconcile(controller=controller, namespace=namespace, name=name)


def current() -> dict[str, str]:
    """The fields of the reconcile running in this task, or an empty dict outside one."""
    running = _CURRENT.get()
    return {} if running is None else running.fields()
