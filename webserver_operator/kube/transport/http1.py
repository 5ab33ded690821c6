"""HTTP/1.1 on the wire, without I/O: a request as bytes, and an incremental parser of the answers.

Why our own and not aiohttp's client: the operator sends about five requests and reads about ten watch events per
WebServer, and aiohttp builds for each request a ``ClientRequest``, a ``ClientResponse``, a ``StreamReader``, a
header multidict, timers and trace hooks, all in Python; in a profiled bulk create of 1000 WebServers that was over a
quarter of the operator's CPU (``ClientSession._request`` 14%, ``ResponseHandler.data_received`` 13%; bench/README.md,
issue 19). The API server speaks one small, fixed dialect of HTTP/1.1: JSON answers with ``Content-Length`` or
chunked bodies, no compression unless asked for (we never ask), no ``Expect``, no upgrades. What that dialect needs
fits in this module, and each answer costs a handful of ``bytes`` operations: the head is cut at its empty line and
split once, a body with a length is sliced out of the received chunk, a chunked body is cut at its size lines.
A third-party parser (httptools, h11) would add a dependency to do the same with a callback per header.

What is handled (RFC 9112): status line and header fields (names case-insensitive, obsolete line folding refused);
``Transfer-Encoding: chunked`` (chunk extensions ignored, trailer fields skipped) before ``Content-Length``; a body
read to the end of the connection when an answer has neither; no body for 1xx, 204 and 304; interim 1xx answers
skipped; ``Connection: close`` and HTTP/1.0 answers end the connection's reuse. Anything malformed raises
``ProtocolError``; the connection that carried it is then closed.

Used by ``kube.transport.connection`` (one ``ResponseParser`` per connection, fed from ``data_received``); hands on the
head (``ResponseHead``) and the body's bytes to its callbacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["ProtocolError", "ResponseHead", "ResponseParser", "encode_request"]

#: Longest head (status line and header fields) accepted; the API server's are a few hundred bytes.
MAX_HEAD = 64 * 1024
_CHUNK_SIZE_LINE_MAX = 4096


class ProtocolError(ValueError):
    """The server's bytes are not the HTTP/1.1 this client understands; the connection must be closed."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    status: int
    reason: str
    #: Header fields in order, names lowercased.
    fields: tuple[tuple[str, str], ...]
    #: Whether the connection may carry another request after this answer's body.
    keep_alive: bool

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of the header field ``name`` (any case)."""
        wanted = name.lower()
        for field, value in self.fields:
            if field == wanted:
                return value
        return default

    def headers(self) -> dict[str, str]:
        """The header fields as a dict of lowercased names (the first value of a repeated field)."""
        return dict(reversed(self.fields))


def encode_request(method: str, target: str, host: str, fields: Iterable[tuple[str, str]], body: bytes | None) -> bytes:
    """The request's bytes: request line, ``Host``, ``fields``, ``Content-Length`` when there is a body, then it.

    ``target`` is the origin form (``/path?query``, already percent-encoded) or, through a proxy, the absolute form.
    Values must not hold CR or LF (they come from the operator's own code and its credentials, never a response).
    """
    lines = [f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n"]
    for name, value in fields:
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {name} holds a line break")
        lines.append(f"{name}: {value}\r\n")
    if body is None:
        lines.append("\r\n")
        return "".join(lines).encode("latin-1")
    lines.append(f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(lines).encode("latin-1") + body


def _parse_head(raw: bytes) -> ResponseHead:
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise ProtocolError(str(exc)) from exc
    lines = text.split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if version not in ("HTTP/1.1", "HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise ProtocolError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
    fields: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[0] in " \t":
            raise ProtocolError(f"malformed header line: {line[:80]!r}")
        fields.append((name.lower(), value.strip(" \t")))
    keep_alive = version == "HTTP/1.1"
    for name, value in fields:
        if name == "connection":
            tokens = {token.strip().lower() for token in value.split(",")}
            if "close" in tokens:
                keep_alive = False
            elif "keep-alive" in tokens:
                keep_alive = True
    return ResponseHead(int(code), reason, tuple(fields), keep_alive)


_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE, _DONE = range(8)


class ResponseParser:
    """Feed it the bytes of a connection; it calls ``on_head(head)``, ``on_body(bytes)`` and ``on_end(reusable)``.

    One answer at a time: after ``on_end`` it waits for the next head (the next request's answer). ``reusable`` is
    False when the connection must not carry another request (``Connection: close``, HTTP/1.0, a body that ends
    with the connection). ``eof()`` tells it the connection ended: a body read to the end then ends; an answer cut
    short raises ``ProtocolError``. Bytes after a complete answer with no request waiting are an error too.
    """

    def __init__(
        self,
        on_head: Callable[[ResponseHead], None],
        on_body: Callable[[bytes], None],
        on_end: Callable[[bool], None],
    ) -> None:
        self._on_head, self._on_body, self._on_end = on_head, on_body, on_end
        self._buffer = b""
        self._state = _HEAD
        self._remaining = 0
        self._keep_alive = True
        self._bodiless = False

    def next_without_body(self) -> None:
        """The next answer has no body whatever its header fields say (a 2xx answer to ``CONNECT``)."""
        self._bodiless = True

    @property
    def idle(self) -> bool:
        """No answer started: nothing of a response has arrived since the last one ended."""
        return self._state == _HEAD and not self._buffer

    def feed(self, data: bytes) -> None:
        """Parse ``data``, the next bytes of the connection.

        Positions move through one buffer instead of slicing off what is left after each piece: a read carrying
        many watch events would otherwise copy its remainder once per event.
        """
        if self._buffer:
            data, self._buffer = self._buffer + data, b""
        pos, end = 0, len(data)
        while pos < end:
            state = self._state
            if state in (_LENGTH, _CHUNK_DATA):
                take = min(self._remaining, end - pos)
                self._on_body(data if take == end else data[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining:
                    return
                if state == _LENGTH:
                    self._finish()
                else:
                    self._state = _CHUNK_END
            elif state == _UNTIL_CLOSE:
                self._on_body(data[pos:] if pos else data)
                return
            elif state == _DONE:
                raise ProtocolError(f"{end - pos} bytes after the end of an answer that closes the connection")
            else:
                after = self._line_state(data, pos)
                if after < 0:
                    self._buffer = data[pos:]
                    return
                pos = after

    def _line_state(self, data: bytes, pos: int) -> int:
        """Handle a state that needs a whole line (or head) first: where parsing goes on, -1 when it has not arrived."""
        state = self._state
        if state == _HEAD:
            end = data.find(b"\r\n\r\n", pos)
            if end < 0:
                if len(data) - pos > MAX_HEAD:
                    raise ProtocolError(f"answer head longer than {MAX_HEAD} bytes")
                return -1
            self._start(_parse_head(data[pos:end]))
            return end + 4
        end = data.find(b"\r\n", pos)
        if end < 0:
            if len(data) - pos > _CHUNK_SIZE_LINE_MAX:
                raise ProtocolError("chunk size line too long")
            return -1
        line = data[pos:end]
        if state == _CHUNK_SIZE:
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_text[:20]!r}") from None
            if size < 0 or size_text[:1] in (b"+", b"-"):
                raise ProtocolError(f"bad chunk size {size_text[:20]!r}")
            if size == 0:
                self._state = _TRAILER
            else:
                self._remaining, self._state = size, _CHUNK_DATA
        elif state == _CHUNK_END:
            if line:
                raise ProtocolError("chunk data longer than its size")
            self._state = _CHUNK_SIZE
        elif not line:  # _TRAILER: the empty line ends the chunked body
            self._finish()
        return end + 2

    def _start(self, head: ResponseHead) -> None:
        if 100 <= head.status < 200:
            return  # an interim answer (e.g. 100 Continue); the final one follows
        self._on_head(head)
        self._keep_alive = head.keep_alive
        encoding = head.get("transfer-encoding")
        if head.status in (204, 304) or self._bodiless:
            self._bodiless = False
            self._finish()
        elif encoding is not None:
            if encoding.lower().rsplit(",", 1)[-1].strip() != "chunked":
                raise ProtocolError(f"unsupported Transfer-Encoding {encoding!r}")
            self._state = _CHUNK_SIZE
        elif (length := head.get("content-length")) is not None:
            if not length.isdigit():
                raise ProtocolError(f"bad Content-Length {length!r}")
            self._remaining = int(length)
            if self._remaining:
                self._state = _LENGTH
            else:
                self._finish()
        else:
            self._keep_alive = False
            self._state = _UNTIL_CLOSE

    def _finish(self) -> None:
        self._state = _HEAD if self._keep_alive else _DONE
        self._on_end(self._keep_alive)

    def eof(self) -> None:
        """The connection ended; raises ``ProtocolError`` when an answer was cut short."""
        if self._state == _UNTIL_CLOSE:
            self._state = _DONE
            self._on_end(False)
        elif not self.idle and self._state != _DONE:
            raise ProtocolError("the connection ended in the middle of an answer")
