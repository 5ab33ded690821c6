"""HTTP/1.1 on the wire, without I/O: a request as bytes, and an incremental parser of the answers.

Why our own and not aiohttp's client: the operator sends about five requests and reads about ten watch events per
WebServer, and aiohttp builds for each request a ``ClientRequest``, a ``ClientResponse``, a ``StreamReader``, a
header multidict, timers and trace hooks, all in Python; in a profiled bulk create of 1000 WebServers that was over a
quarter of the operator's CPU (``ClientSession._request`` 14%, ``ResponseHandler.data_received`` 13%; bench/README.md,
issue 19). The API server speaks one small, fixed dialect of HTTP/1.1: JSON answers with ``Content-Length`` or
chunked bodies, no compression unless asked for (we never ask), no ``Expect``, no upgrades. What that dialect needs
fits in this module, and each answer costs a handful of ``bytes`` operations: the head is cut at its empty line and
split once, a body with a length is sliced out of the received chunk, a chunked body is cut at its size lines.

Why not httptools (llhttp, in C), measured (``bench.http1_parse``, farm-bench, median CPU of 5 paired runs, whole
processes): httptools parses small answers (nine fields, 3 KiB body, one read each) in about 7 µs against 17 µs
here, and a watch event (one 2 KiB chunk per read) in 1.4 µs against 3.8 µs; but a 600 KiB list page in 64 KiB reads
takes it 2.6 times as long as here (its body callbacks copy, this parser slices). Per WebServer (about five answers
and ten watch events) that is about 70 µs of a cost dominated by JSON and the reconciler, for a new compiled
dependency and a callback per header field: not worth it. h11 is the reference this parser is fuzzed against
(``tests/unit/kube/test_http1_fuzz.py``).

What is handled (RFC 9112): status line and header fields (names case-insensitive); ``Transfer-Encoding: chunked``
(chunk extensions ignored, trailer fields checked and skipped); a body read to the end of the connection when an
answer has neither; no body for 204 and 304; interim 1xx answers skipped; ``Connection: close`` and HTTP/1.0
answers end the connection's reuse. Anything malformed raises ``ProtocolError`` (never another exception; numbers
are matched as ASCII digits before ``int`` sees them); the connection that carried it is then closed.

As strict as h11 and llhttp, and stricter where two parsers could read one answer two ways (response splitting,
smuggling through a proxy): refused are two different ``Content-Length``s, two ``Transfer-Encoding``s or any coding
but ``chunked``, ``Transfer-Encoding`` with ``Content-Length`` (RFC 9112 6.3, as llhttp) or in HTTP/1.0 (6.1), NUL,
VT, FF, a bare CR or a bare LF anywhere in a head (h11 takes a bare LF as a line end), obsolete line folding, chunk
sizes with a sign, ``0x``, ``_``, a leading blank or over 16 hex digits (Go's limit; h11 takes 20), HTTP versions
other than 1.0 and 1.1, and ``101`` (this client never asks for an upgrade). A head is at most ``MAX_HEAD`` bytes,
whether it arrives whole or in pieces. Body size limits are the connection's (``kube.transport.connection.MAX_BODY``)
and the watch reader's (``kube.stream.MAX_FRAME``): only they know whether a body is read whole or streamed.

Used by ``kube.transport.connection`` (one ``ResponseParser`` per connection, fed from ``data_received``); hands on the
head (``ResponseHead``) and the body's bytes to its callbacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["MAX_HEAD", "ProtocolError", "ResponseHead", "ResponseParser", "encode_request"]

#: Longest head (status line and header fields) accepted, complete or not; the API server's are a few hundred bytes.
MAX_HEAD = 64 * 1024
_CHUNK_SIZE_LINE_MAX = 4096

_TOKEN = rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+"
#: The status line (RFC 9112 4): HTTP/1.0 or HTTP/1.1, three ASCII digits, an optional reason phrase.
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([^\r\n]*))?")
#: The field lines after the status line, joined by CRLF: a token, a colon, anything but CR and LF. One pattern with
#: no ambiguity, so a refused head costs one linear scan (no backtracking between lines).
_FIELD_LINES = re.compile(rb"(?:" + _TOKEN + rb":[^\r\n]*\r\n)*" + _TOKEN + rb":[^\r\n]*")
_FIELD_LINE = re.compile(_TOKEN + rb":[^\r\n]*")
#: A chunk size line: 1 to 16 hex digits (Go's limit: a size fits 64 bits), then extensions (ignored) or trailing
#: blanks, as h11 accepts them; no sign, ``0x`` prefix, underscore or leading blank (which ``int(x, 16)`` takes).
_CHUNK_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:;[^\r\n]*|[ \t]*)")
#: ``Content-Length``: ASCII digits only (``str.isdigit`` takes ``²``), and few enough that ``int`` never refuses.
_DIGITS = re.compile(r"[0-9]{1,20}")


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


def _check_bytes(raw: bytes, what: str) -> None:
    """Refuse what no line of a head may hold, as h11 and llhttp do.

    NUL, vertical tab, form feed, a CR not followed by LF, an LF not preceded by CR (a bare LF ends a line for some
    parsers and not for others: a smuggling vector). Counting and ``in`` run at C speed; a regular expression with
    look-arounds cost more than the rest of the head.
    """
    if (
        b"\x00" in raw
        or b"\x0b" in raw
        or b"\x0c" in raw
        or not raw.count(b"\r") == raw.count(b"\n") == raw.count(b"\r\n")
    ):
        raise ProtocolError(
            f"the answer's {what} holds a forbidden byte (NUL, VT, FF, CR or LF outside CRLF): {raw[:80]!r}"
        )


def _parse_head(raw: bytes) -> tuple[ResponseHead, int | None, bool]:
    """The head of ``raw`` (status line and fields, without the final empty line) and its body framing.

    Returns the head, the ``Content-Length`` (``None`` when absent) and whether the body is chunked. Refuses what h11
    or llhttp refuse (see the module docstring), always with ``ProtocolError``.
    """
    _check_bytes(raw, "head")
    line_end = raw.find(b"\r\n")
    if line_end < 0:
        line_end = len(raw)
    status_line = _STATUS_LINE.fullmatch(raw, 0, line_end)
    if status_line is None or int(status_line[2]) < 100:
        raise ProtocolError(f"not an HTTP/1.1 status line: {raw[: min(line_end, 80)]!r}")
    if line_end < len(raw) and _FIELD_LINES.fullmatch(raw, line_end + 2) is None:
        raise ProtocolError(f"malformed header line in: {raw[line_end + 2 : line_end + 82]!r}")
    fields: list[tuple[str, str]] = []
    keep_alive = status_line[1] == b"1"
    lengths: set[str] = set()
    encodings: list[str] = []
    lines = raw[line_end + 2 :].decode("latin-1").split("\r\n") if line_end < len(raw) else []
    for line in lines:
        name, _, value = line.partition(":")
        name, value = name.lower(), value.strip(" \t")
        fields.append((name, value))
        if name == "content-length":
            lengths.update(part.strip(" \t") for part in value.split(","))
        elif name == "transfer-encoding":
            encodings.append(value)
        elif name == "connection":
            tokens = {token.strip(" \t").lower() for token in value.split(",")}
            if "close" in tokens:
                keep_alive = False
            elif "keep-alive" in tokens:
                keep_alive = True
    length: int | None = None
    if lengths:
        if len(lengths) > 1:
            raise ProtocolError(f"conflicting Content-Length fields: {[text[:24] for text in sorted(lengths)[:4]]}")
        text = lengths.pop()
        if _DIGITS.fullmatch(text) is None:
            raise ProtocolError(f"bad Content-Length {text[:24]!r}")
        length = int(text)
    if encodings:
        if len(encodings) > 1:
            raise ProtocolError("more than one Transfer-Encoding field")
        if encodings[0].lower() != "chunked":
            raise ProtocolError(f"unsupported Transfer-Encoding {encodings[0][:40]!r} (only chunked is)")
        if length is not None:
            raise ProtocolError("an answer with both Transfer-Encoding and Content-Length (RFC 9112 6.3)")
        if status_line[1] == b"0":
            raise ProtocolError("an HTTP/1.0 answer with Transfer-Encoding (RFC 9112 6.1: faulty framing)")
    reason = (status_line[3] or b"").decode("latin-1")
    head = ResponseHead(int(status_line[2]), reason, tuple(fields), keep_alive)
    return head, length, bool(encodings)


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
        self._buffer = bytearray()  # an incomplete head or line, appended to in place as reads arrive
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
            buffer, head = self._buffer, self._state == _HEAD
            scan = max(len(buffer) - 3, 0)  # the end of a head or line may start in the bytes buffered before
            buffer += data
            incomplete = buffer.find(b"\r\n\r\n" if head else b"\r\n", scan) < 0
            if incomplete and len(buffer) <= (MAX_HEAD if head else _CHUNK_SIZE_LINE_MAX):
                return  # wait, without copying what was buffered once per read (quadratic for small reads)
            data, self._buffer = bytes(buffer), bytearray()
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
                    self._buffer = bytearray(memoryview(data)[pos:])
                    return
                pos = after

    def _line_state(self, data: bytes, pos: int) -> int:
        """Handle a state that needs a whole line (or head) first: where parsing goes on, -1 when it has not arrived."""
        state = self._state
        if state == _HEAD:
            end = data.find(b"\r\n\r\n", pos, pos + MAX_HEAD + 4)
            if end < 0:
                if len(data) - pos > MAX_HEAD:
                    raise ProtocolError(f"answer head longer than {MAX_HEAD} bytes")
                return -1
            self._start(*_parse_head(data[pos:end]))
            return end + 4
        end = data.find(b"\r\n", pos, pos + _CHUNK_SIZE_LINE_MAX + 2)
        if end < 0:
            if len(data) - pos > _CHUNK_SIZE_LINE_MAX:
                raise ProtocolError("chunk size or trailer line too long")
            return -1
        if state == _CHUNK_SIZE:
            size_line = _CHUNK_SIZE_LINE.fullmatch(data, pos, end)
            if size_line is None:
                raise ProtocolError(f"bad chunk size line {data[pos : min(end, pos + 24)]!r}")
            size = int(size_line[1], 16)
            if size == 0:
                self._state = _TRAILER
            else:
                self._remaining, self._state = size, _CHUNK_DATA
        elif state == _CHUNK_END:
            if end != pos:
                raise ProtocolError("chunk data longer than its size")
            self._state = _CHUNK_SIZE
        elif end == pos:  # _TRAILER: the empty line ends the chunked body
            self._finish()
        else:  # a trailer field: checked as a header field, then ignored
            line = data[pos:end]
            if _FIELD_LINE.fullmatch(line) is None:
                raise ProtocolError(f"malformed trailer line {line[:80]!r}")
            _check_bytes(line, "trailer")
        return end + 2

    def _start(self, head: ResponseHead, length: int | None, chunked: bool) -> None:
        if 100 <= head.status < 200:
            if head.status == 101:
                raise ProtocolError("101 Switching Protocols, but this client never asks for an upgrade")
            return  # an interim answer (e.g. 100 Continue, 103 Early Hints); the final one follows
        self._on_head(head)
        self._keep_alive = head.keep_alive
        if head.status in (204, 304) or self._bodiless:
            self._bodiless = False
            self._finish()
        elif chunked:
            self._state = _CHUNK_SIZE
        elif length is not None:
            self._remaining = length
            if length:
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
