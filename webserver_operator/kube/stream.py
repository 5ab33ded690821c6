"""Decoding of a watch response body: newline-delimited JSON events, read chunk by chunk.

Why our own reader and not ``kubernetes_asyncio.watch.Watch``: that class deserialises every event into model objects
(the cost this module avoids), and it decides on its own what an ``ERROR`` event with code 410 means: in 36.1
(``Watch.next``), a watch without ``timeout_seconds`` reconnects once with the same stale resourceVersion, which the
server refuses again, and then raises ``ApiException(410)``; the relist is left to the caller either way. Here the
stream only decodes; the informer decides what an ``ERROR`` event or a closed stream means (a 410 relists at once).

Why lines are cut here: a watch event carries a whole object (up to etcd's ~1.5 MiB request limit, more after JSON
escaping), and the body arrives in chunks of any size. ``LineSplitter`` accumulates raw chunks and cuts complete
lines, scanning each byte once, so chunk boundaries anywhere (inside a line, inside a multi-byte UTF-8 character) are
harmless.

Events are decoded with orjson (``kube.jsoncodec``): in a bulk create, decoding watch events is the larger part of
the operator's JSON work. A watch of tenant-written objects passes ``decode`` (``kube.skim.Skim.event``), which never
builds the fields no reader reads.

Failure mapping: the server ending the response cleanly ends the iteration (the informer re-watches from its last
resourceVersion); a read timeout, a reset connection, a body cut mid-event or an event line longer than
``MAX_FRAME`` (16 MiB, client-go's frame limit) raises ``TransportError``.

The read timeout (no data for ``read_timeout`` seconds while waiting for the next chunk) is kept here, not by the
connection: a timer cancelled and scheduled on every received chunk (aiohttp's ``sock_read``) was, for watch
streams, one chunk per event, 2-3% of the operator's CPU in a bulk create (bench/README.md). A
``kube.transport.idle.IdleTimer`` keeps one timer, which counts only while a read is waiting.

Built by ``kube.client.watch``; hands decoded events to ``runtime.informers.informer``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from webserver_operator.kube import jsoncodec
from webserver_operator.kube.errors import TransportError
from webserver_operator.kube.transport.http1 import ProtocolError
from webserver_operator.kube.transport.idle import IdleTimer

__all__ = ["MAX_FRAME", "LineSplitter", "WatchStream"]

#: Longest watch event line accepted, as client-go's frame reader (``maxBytes`` of its JSON framer): 16 MiB, about
#: ten times the largest object etcd stores. A longer line (a server or proxy that never sends the newline) fails
#: the watch instead of growing the buffer without bound.
MAX_FRAME = 16 * 2**20


class LineSplitter:
    """Cut a byte stream into newline-terminated lines (without the newline)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    @property
    def pending(self) -> int:
        """Bytes received after the last complete line."""
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add ``chunk``; return the lines it completed."""
        scan_from = len(self._buffer)  # the old buffer holds no newline: only scan the new bytes
        self._buffer += chunk
        lines: list[bytes] = []
        start = 0
        while (newline := self._buffer.find(b"\n", max(start, scan_from))) >= 0:
            lines.append(bytes(self._buffer[start:newline]))
            start = newline + 1
        del self._buffer[:start]
        return lines

    def rest(self) -> bytes:
        """Return and forget the unterminated tail (call at end of stream)."""
        tail = bytes(self._buffer)
        self._buffer.clear()
        return tail


class WatchStream:
    """Async iterator of decoded watch events ``{"type": ..., "object": {...}}``.

    Built by ``Kube.watch``; ``read_chunk`` returns the next body chunk, ``b""`` at the end of the body. With
    ``read_timeout``, a read that waits that long for data is ended by ``interrupt(TimeoutError)``, which must make
    the pending ``read_chunk`` raise it (``kube.transport.connection.Connection.interrupt``); ``close()`` stops the
    timer.
    """

    def __init__(
        self,
        *,
        read_chunk: Callable[[], Awaitable[bytes]],
        method: str,
        path: str,
        host: str,
        read_timeout: float | None = None,
        interrupt: Callable[[BaseException], None] | None = None,
        decode: Callable[[bytes], Any] = jsoncodec.decode,
    ) -> None:
        self._read_chunk = read_chunk
        self._decoder = decode
        self._method = method
        self._path = path
        self._host = host
        self._splitter = LineSplitter()
        self._lines: deque[bytes] = deque()
        self._ended = False
        self._timer: IdleTimer | None = None
        if read_timeout is not None and interrupt is not None:
            timeout = read_timeout
            self._timer = IdleTimer(timeout, lambda: interrupt(TimeoutError(f"no data for {timeout:g}s")))

    def close(self) -> None:
        """Stop the read timer (the response is being released or closed)."""
        if self._timer is not None:
            self._timer.stop()

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while True:
            while self._lines:
                line = self._lines.popleft()
                if line.strip():
                    return self._decode(line)
            if self._ended:
                raise StopAsyncIteration
            chunk = await self._next_chunk()
            if chunk:
                lines = self._splitter.feed(chunk)
                if self._splitter.pending > MAX_FRAME or any(len(line) > MAX_FRAME for line in lines):
                    raise self._error(
                        f"a watch event longer than {MAX_FRAME // 2**20} MiB (client-go's limit); "
                        "the API server never sends one: a proxy in the way may be mangling the stream"
                    )
                self._lines.extend(lines)
                continue
            self._ended = True
            tail = self._splitter.rest()
            if tail.strip():
                # The API server ends every event with a newline: a tail is a body cut mid-event, unless it happens
                # to be a complete document (tolerated, for servers that omit the last newline).
                try:
                    event = self._decoder(tail)
                except ValueError:
                    raise self._error(f"stream ended in the middle of an event ({len(tail)} bytes)") from None
                return self._checked(event, tail)

    async def _next_chunk(self) -> bytes:
        timer = self._timer
        if timer is not None:
            timer.touch()
        try:
            return await self._read_chunk()
        except TimeoutError as exc:
            raise self._error(f"no data for the watch read timeout ({type(exc).__name__}: {exc})") from exc
        except (OSError, ProtocolError) as exc:
            raise self._error(f"watch stream broken: {type(exc).__name__}: {exc}") from exc
        finally:
            if timer is not None:
                timer.pause()

    def _decode(self, line: bytes) -> dict[str, Any]:
        try:
            event = self._decoder(line)
        except ValueError as exc:
            raise self._error(f"undecodable watch event ({len(line)} bytes): {exc}") from exc
        return self._checked(event, line)

    def _checked(self, event: object, line: bytes) -> dict[str, Any]:
        if not isinstance(event, dict) or "type" not in event:
            raise self._error(f"watch event is not an object with a 'type' ({len(line)} bytes)")
        return event

    def _error(self, cause: str) -> TransportError:
        return TransportError(method=self._method, path=self._path, cause=cause, host=self._host)
