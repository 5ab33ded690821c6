"""What a reconcile returns to the controller, after controller-runtime's ``pkg/reconcile``.

Declared in the runtime (not next to a reconciler) because every reconciler returns it and ``runtime.controller.loop``
acts on it; reconcilers sit one layer up and import it from here.

- return ``Result()``: done; the key's backoff is reset.
- return ``Result(requeue_after=s)``: done for now, look again in ``s`` seconds (e.g. waiting on something that
  produces no watch event, such as a foreign object the label-filtered cache cannot see).
- raise any exception: the key is retried with per-key exponential backoff (at least its ``retry_after``, when the
  exception carries one, as the kube layer's errors do for 429s).
- raise ``TerminalError`` (or raise another exception ``from`` one): logged and counted as a terminal error, not
  retried until the next change. Recognised by type, as controller-runtime's ``errors.Is(err, TerminalError)``: the
  reconciler raises it for a spec it refuses (reported in the WebServer's status; a retry cannot help).

Returned by reconcilers; read by ``runtime.controller.loop``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

from webserver_operator.core.vocabulary import ObjectKey

__all__ = ["Reconciler", "Result", "TerminalError", "cause_of", "is_terminal"]

E = TypeVar("E", bound=BaseException)


@dataclass(frozen=True)
class Result:
    requeue_after: float | None = None


class TerminalError(Exception):
    """An error that retrying cannot fix; the next watch event or resync brings the key back.

    Only this type (a subclass, or an exception raised ``from`` one) is terminal: an attribute or a name that looks
    alike is not, so no error of a lower layer can stop a key's retries by accident.
    """


class Reconciler(Protocol):
    """What ``runtime.controller.loop.Controller`` drives: one key in, a ``Result`` out (or an exception)."""

    async def reconcile(self, key: ObjectKey) -> Result: ...


def is_terminal(exc: BaseException) -> bool:
    """True for a ``TerminalError``, also as a ``__cause__`` down the chain (the analogue of Go's ``errors.Is``)."""
    return cause_of(exc, TerminalError) is not None


def cause_of(exc: BaseException, kind: type[E]) -> E | None:
    """``exc`` or the first exception down its ``__cause__`` chain that is a ``kind`` (Go's ``errors.As``), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None
