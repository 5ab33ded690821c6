"""What a reconcile returns to the controller, after controller-runtime's ``pkg/reconcile``.

Declared in the runtime (not next to a reconciler) because every reconciler returns it and ``runtime.controller.loop``
acts on it; reconcilers sit one layer up and import it from here.

- return ``Result()``: done; the key's backoff is reset.
- return ``Result(requeue_after=s)``: done for now, look again in ``s`` seconds (e.g. waiting on something that
  produces no watch event, such as a foreign object the label-filtered cache cannot see).
- raise any exception: the key is retried with per-key exponential backoff (at least its ``retry_after``, when the
  exception carries one, as the kube layer's errors do for 429s).
- raise ``TerminalError`` (or raise from one): logged and counted as an error, not retried until the next change.

Returned by reconcilers; read by ``runtime.controller.loop``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from webserver_operator.core.vocabulary import ObjectKey


@dataclass(frozen=True)
class Result:
    requeue_after: float | None = None


class TerminalError(Exception):
    """An error that retrying cannot fix; the next watch event or resync brings the key back.

    Recognised by its ``terminal = True`` class attribute, so an error type that cannot import this one (a lower
    layer's) can declare itself terminal the same way.
    """

    terminal: ClassVar[bool] = True


class Reconciler(Protocol):
    """What ``runtime.controller.loop.Controller`` drives: one key in, a ``Result`` out (or an exception)."""

    async def reconcile(self, key: ObjectKey) -> Result: ...


def is_terminal(exc: BaseException) -> bool:
    """True for an error with ``terminal = True``, also as the ``__cause__`` (the analogue of Go's ``errors.Is``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if getattr(type(current), "terminal", False) is True:
            return True
        seen.add(id(current))
        current = current.__cause__
    return False
