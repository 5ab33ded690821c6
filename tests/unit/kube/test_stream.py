"""Watch body decoding: lines split across chunks, large objects, truncated bodies, broken connections."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

import pytest

from webserver_operator.kube.errors import TransportError
from webserver_operator.kube.stream import MAX_FRAME, LineSplitter, WatchStream
from webserver_operator.kube.transport.connection import ServerDisconnected
from webserver_operator.kube.transport.http1 import ProtocolError


def test_splitter_handles_any_chunk_boundary() -> None:
    payload = b'{"a": 1}\n{"b": "\xc3\xa9"}\n\n{"c": 3}\n{"d"'
    for size in range(1, len(payload) + 1):
        splitter = LineSplitter()
        lines: list[bytes] = []
        for start in range(0, len(payload), size):
            lines.extend(splitter.feed(payload[start : start + size]))
        assert lines == [b'{"a": 1}', b'{"b": "\xc3\xa9"}', b"", b'{"c": 3}']
        assert splitter.pending == 4
        assert splitter.rest() == b'{"d"'
        assert splitter.pending == 0


def test_splitter_large_line_in_small_chunks() -> None:
    line = json.dumps({"data": "x" * 3_000_000}).encode()
    splitter = LineSplitter()
    out: list[bytes] = []
    for start in range(0, len(line), 65536):
        out.extend(splitter.feed(line[start : start + 65536]))
    assert out == []
    assert splitter.feed(b"\n") == [line]


def reader(chunks: Iterable[bytes | BaseException]) -> Any:
    items = list(chunks)

    async def read_chunk() -> bytes:
        if not items:
            return b""
        item = items.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    return read_chunk


def stream(chunks: Iterable[bytes | BaseException]) -> WatchStream:
    return WatchStream(read_chunk=reader(chunks), method="GET", path="/api/v1/services", host="h:1")


async def collect(events: WatchStream) -> list[dict[str, Any]]:
    return [event async for event in events]


async def test_events_across_chunks() -> None:
    added = {"type": "ADDED", "object": {"kind": "Service", "metadata": {"name": "a", "resourceVersion": "5"}}}
    error = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}
    body = (json.dumps(added) + "\n" + json.dumps(error) + "\n").encode()
    events = await collect(stream([body[:7], body[7:60], body[60:]]))
    assert events == [added, error]


async def test_complete_tail_without_newline_is_accepted() -> None:
    assert await collect(stream([b'{"type": "BOOKMARK", "object": {}}'])) == [{"type": "BOOKMARK", "object": {}}]


async def test_body_cut_mid_event() -> None:
    events = stream([b'{"type": "ADDED", "object": {}}\n{"type": "MOD'])
    assert await anext(events) == {"type": "ADDED", "object": {}}
    with pytest.raises(TransportError, match="in the middle of an event"):
        await anext(events)


async def test_garbage_line() -> None:
    with pytest.raises(TransportError, match="undecodable"):
        await collect(stream([b"<html>\n"]))
    with pytest.raises(TransportError, match="'type'"):
        await collect(stream([b"[1, 2]\n"]))


@pytest.mark.parametrize(
    ("exc", "match"),
    [
        (TimeoutError("no data"), "read timeout"),
        (ServerDisconnected("the API server closed the connection before the answer ended"), "broken"),
        (ProtocolError("bad chunk size b'zz'"), "broken"),
        (ConnectionResetError("reset by peer"), "broken"),
    ],
)
async def test_read_failures_become_transport_errors(exc: BaseException, match: str) -> None:
    events = stream([b'{"type": "ADDED", "object": {}}\n', exc])
    assert (await anext(events))["type"] == "ADDED"
    with pytest.raises(TransportError, match=match) as caught:
        await anext(events)
    assert caught.value.retriable
    assert caught.value.host == "h:1"


class _Chunks:
    """A body handing out queued chunks; ``interrupt`` makes the read in progress raise (``Connection.interrupt``)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._waiter: asyncio.Future[bytes] | None = None
        self.interrupted: BaseException | None = None

    async def read(self) -> bytes:
        if self.interrupted is not None:
            raise self.interrupted
        if not self.queue.empty():
            return self.queue.get_nowait()
        getter = asyncio.ensure_future(self.queue.get())
        self._waiter = asyncio.get_running_loop().create_future()
        done, _ = await asyncio.wait({getter, self._waiter}, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            return getter.result()
        getter.cancel()
        return self._waiter.result()

    def interrupt(self, exc: BaseException) -> None:
        self.interrupted = exc
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)


def _line(name: str) -> bytes:
    return json.dumps({"type": "ADDED", "object": {"metadata": {"name": name}}}).encode() + b"\n"


async def test_a_read_waiting_longer_than_the_read_timeout_is_interrupted() -> None:
    body = _Chunks()
    events = WatchStream(
        read_chunk=body.read, method="GET", path="/x", host="h", read_timeout=0.2, interrupt=body.interrupt
    )
    body.queue.put_nowait(_line("a"))
    assert (await anext(events))["object"]["metadata"]["name"] == "a"
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TransportError, match="no data for the watch read timeout"):
        await anext(events)
    assert 0.15 < loop.time() - started < 2
    events.close()


async def test_only_waiting_counts_towards_the_read_timeout() -> None:
    """Chunks that keep coming within the timeout, and a consumer busy longer than it between reads (data waiting
    for it meanwhile), are no timeout: the timer only ends a read that itself waited that long."""
    body = _Chunks()
    events = WatchStream(
        read_chunk=body.read, method="GET", path="/x", host="h", read_timeout=0.2, interrupt=body.interrupt
    )
    names = []
    for i in range(8):  # 0.8 s of events, 0.1 s apart
        asyncio.get_running_loop().call_later(0.1, body.queue.put_nowait, _line(f"e{i}"))
        names.append((await anext(events))["object"]["metadata"]["name"])
    body.queue.put_nowait(_line("late"))
    await asyncio.sleep(0.5)  # the consumer is busy; the next chunk is already there when it reads
    names.append((await anext(events))["object"]["metadata"]["name"])
    assert names == [*(f"e{i}" for i in range(8)), "late"]
    assert body.interrupted is None
    events.close()


@pytest.mark.parametrize("newline", [False, True])
async def test_a_watch_event_longer_than_client_gos_frame_limit_fails_the_watch(newline: bool) -> None:
    """16 MiB (client-go's frame limit) without a newline, or in one line: the watch fails, the buffer stops growing."""
    piece = b"x" * 2**20
    chunks: list[bytes | BaseException] = [b'{"type":"ADDED","object":{"a":"', *([piece] * 17)]
    if newline:
        chunks.append(b'"}}\n')
    with pytest.raises(TransportError, match="longer than 16 MiB"):
        await collect(stream(chunks))


async def test_events_up_to_the_frame_limit_are_read() -> None:
    event = {"type": "ADDED", "object": {"data": "x" * (MAX_FRAME - 100)}}
    line = json.dumps(event).encode() + b"\n"
    assert len(line) <= MAX_FRAME
    chunks: list[bytes | BaseException] = [line[start : start + 2**20] for start in range(0, len(line), 2**20)]
    assert await collect(stream(chunks)) == [event]
