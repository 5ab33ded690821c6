"""Which event loop runs the operator: the standard library's by default, uvloop on request.

Why the default is asyncio: the operator's work is requests and watch events, and uvloop (libuv underneath) does the
socket, TLS-transport and scheduling work of the loop in C, where the standard library's selector loop runs it in
Python; but since the operator has its own HTTP/1.1 connection pool (``kube.transport.connection``), uvloop measured no
less CPU end to end (issue 33's A/B in bench/README.md: equal within the runs' spread in the benchmark, 9% more CPU per
request in ``bench.request_cost``), so a dependency that does not pay is not the default. ``auto`` (uvloop when
installed) and ``uvloop`` stay for whoever measures otherwise on their own nodes; the package is an extra
(``pip install 'webserver-operator[uvloop]'``), not in the operator's image. uvloop ships as wheels for Linux and macOS
on CPython; where it is missing (another platform, a source build that failed), ``auto``
falls back to the standard library's loop and says so, and ``asyncio`` chooses that loop on purpose (to rule the loop
out when debugging, or to measure one against the other). ``uvloop`` insists: without the package the operator stops
at start with what to install, rather than quietly running on something else.

Called by ``cli`` before anything runs; hands on a loop factory for ``asyncio.Runner``.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from webserver_operator.core.settings import EventLoopChoice
from webserver_operator.kube.errors import ConfigurationError

__all__ = ["LoopChoice", "choose_loop", "run"]

T = TypeVar("T")


def _import_uvloop() -> ModuleType:
    return importlib.import_module("uvloop")


@dataclass(frozen=True)
class LoopChoice:
    """The loop the operator runs on, and why (``note``, for the start-up log line)."""

    name: str  # "uvloop" or "asyncio"
    factory: Callable[[], asyncio.AbstractEventLoop]
    note: str


def choose_loop(setting: EventLoopChoice, *, import_uvloop: Callable[[], ModuleType] = _import_uvloop) -> LoopChoice:
    """The loop for ``setting``; ``ConfigurationError`` when uvloop is required and cannot be imported.

    ``import_uvloop`` is a test hook (an import that fails as on a platform without uvloop's wheels).
    """
    if setting == "asyncio":
        return LoopChoice("asyncio", asyncio.new_event_loop, "the standard library's loop, as set (--event-loop)")
    try:
        uvloop = import_uvloop()
    except ImportError as err:
        if setting == "uvloop":
            raise ConfigurationError(
                f"--event-loop=uvloop, but uvloop cannot be imported ({err}): install it "
                "(pip install 'webserver-operator[uvloop]'; wheels exist for CPython on Linux and macOS, and the "
                "operator's image does not include it), or run with --event-loop=auto or asyncio"
            ) from err
        return LoopChoice(
            "asyncio",
            asyncio.new_event_loop,
            f"uvloop is not available ({err}); the standard library's loop instead (--event-loop=auto)",
        )
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return LoopChoice("uvloop", factory, f"uvloop {getattr(uvloop, '__version__', '')}".rstrip())


def run(main: Coroutine[Any, Any, T], choice: LoopChoice) -> T:
    """``asyncio.run(main)`` on a loop made by ``choice.factory`` (no process-wide event loop policy is changed)."""
    with asyncio.Runner(loop_factory=choice.factory) as runner:
        return runner.run(main)
