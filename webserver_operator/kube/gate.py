"""The write gate at the last moment before a request goes on the wire, inside aiohttp.

Why inside aiohttp: a gate checked when ``KubeClient.request`` starts is checked before the client-side rate limiter
and before the wait for a free pooled connection, and each of those can hold a request for seconds. A write that
passed the gate, then waited past the Lease's validity deadline, would still leave. So the gate is checked again
where nothing can wait any more.

Where exactly (aiohttp 3.x, ``ClientSession._request``): ``_connect_and_send_request`` awaits
``connector.connect()`` (the pool wait and connecting, with the ``on_connection_queued_*``,
``on_connection_create_*`` and ``on_connection_reuseconn`` trace signals inside it), then calls
``ClientRequest.send(conn)``, which writes the request line and headers, then the body. ``send`` is the last point
before a byte is written, with no await in between. The trace signals are not used: they fire inside ``connect()``,
and an exception raised from ``on_connection_create_end`` leaks the freshly made connection (aiohttp releases only its
placeholder). An exception raised from ``send`` is handled by aiohttp: it closes that connection and re-raises.

So ``FencedRequest`` (the session's ``request_class``) overrides ``send``: it asks the check in the ``_WRITE_GATE``
context variable, if one is set, and raises its refusal before calling aiohttp's ``send``. ``gate_writes(check)``
sets the variable around one request; ``connect()`` and ``send()`` run in the task that awaits the request, so the
variable reaches them, and only that request. Reads and watches set nothing and are never gated.

Used by ``kube.client`` (the session of every ``KubeClient`` is made with ``request_class=FencedRequest``; a gated
view's writes run inside ``gate_writes``); the check is usually ``kube.fence.LeaseFence.why_not``.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import aiohttp

from webserver_operator.kube.errors import WritesStopped

if TYPE_CHECKING:
    from aiohttp.client_reqrep import ClientResponse
    from aiohttp.connector import Connection

__all__ = ["FencedRequest", "WriteCheck", "gate_writes"]

#: Given the path a write goes to, ``None`` while it may leave, else why not. The path lets one check cover writes
#: under different Leases: with sharding, the namespace in the path names the shard whose fence decides.
WriteCheck = Callable[[str], str | None]

_WRITE_GATE: contextvars.ContextVar[WriteCheck | None] = contextvars.ContextVar("webserver_operator_write_gate")


@contextlib.contextmanager
def gate_writes(check: WriteCheck) -> Iterator[None]:
    """Requests sent inside this block (in this task) leave only while ``check(path)`` returns ``None``."""
    token = _WRITE_GATE.set(check)
    try:
        yield
    finally:
        _WRITE_GATE.reset(token)


class FencedRequest(aiohttp.ClientRequest):
    """aiohttp's request, refused at ``send`` (nothing written yet) when the gate of the calling task says no."""

    async def send(self, conn: Connection) -> ClientResponse:
        check = _WRITE_GATE.get(None)
        if check is not None and (why := check(self.url.path)) is not None:
            raise WritesStopped(method=self.method, path=self.url.path, why=why)
        return await super().send(conn)
