"""What a reconcile returns to the controller, after controller-runtime's pkg/reconcile.

Lives in the reconcile layer (not controller/) because reconcilers produce it and the controller, one layer up,
consumes it: lower layers never import higher ones.

- return ``Result()``: done; the key's backoff is reset.
- return ``Result(requeue_after=s)``: done for now, look again in ``s`` seconds (e.g. waiting on something that
  produces no watch event, such as a foreign object the label-filtered cache cannot see).
- raise any exception: the key is retried with per-key exponential backoff.
- raise ``TerminalError``: logged and counted as an error, not retried until the next change or resync.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Result:
    requeue_after: float | None = None


class TerminalError(Exception):
    """An error that retrying cannot fix; the next watch event or resync brings the key back.

    The controller recognises it by the ``terminal`` class attribute (on the error or its ``__cause__`` chain),
    not by type, because it sits in a higher layer.
    """

    terminal: ClassVar[bool] = True
