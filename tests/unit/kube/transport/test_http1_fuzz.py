"""Differential fuzz of ``kube.transport.http1.ResponseParser`` against h11, on generated and on mangled answers.

Properties, for every generated input:

- The parser raises nothing but ``ProtocolError`` (never ``ValueError``, ``IndexError``...).
- The outcome does not depend on how the bytes are cut into reads.
- Never more lenient than h11: an answer the parser accepts, h11 accepts too, with the same status, reason, header
  fields (``Content-Length`` and ``Transfer-Encoding`` aside, which h11 rewrites) and body.
- The API server's dialect is read: every well-formed answer (``valid_answers``) is accepted, as by h11.

Where the parser is stricter than h11 on purpose (llhttp's or Go's choice): a bare LF, obsolete line folding,
``Transfer-Encoding`` with ``Content-Length`` or in HTTP/1.0, more than 16 hex digits of chunk size, bytes after a
complete answer, a head over ``MAX_HEAD`` (h11's own limit is lower), HTTP versions other than 1.0 and 1.1.

In ``make test`` a fixed, derandomized set of examples runs in a few seconds (no example database: CI is
deterministic); ``make fuzz-http1`` runs many more with fresh random draws (``HTTP1_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import h11
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webserver_operator.kube.transport.http1 import MAX_HEAD, ProtocolError, ResponseHead, ResponseParser

_LONG_RUN = int(os.environ.get("HTTP1_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_LONG_RUN or 120,
    derandomize=not _LONG_RUN,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_FRAMING = frozenset({"content-length", "transfer-encoding"})


@dataclass(frozen=True)
class Answer:
    status: int
    reason: bytes
    fields: tuple[tuple[bytes, bytes], ...]  # lowercased names, framing fields left out
    body: bytes


def ours(data: bytes, cuts: list[int]) -> Answer | None:
    """What ``ResponseParser`` makes of ``data`` cut at ``cuts``: the one answer, or ``None`` when it refuses."""
    heads: list[ResponseHead] = []
    body = bytearray()
    ends: list[bool] = []
    parser = ResponseParser(heads.append, body.extend, ends.append)
    try:
        start = 0
        for cut in [*sorted(set(cuts)), len(data)]:
            if cut > start:
                parser.feed(data[start:cut])
                start = cut
        parser.eof()
    except ProtocolError:
        return None
    if len(heads) != 1 or len(ends) != 1:
        return None
    head = heads[0]
    fields = tuple((name.encode(), value.encode("latin-1")) for name, value in head.fields if name not in _FRAMING)
    return Answer(head.status, head.reason.encode("latin-1"), fields, bytes(body))


def h11s(data: bytes) -> Answer | None:
    """What h11 makes of ``data`` as the answer to a GET, the connection ending after it; ``None`` when it refuses."""
    connection = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD + 1024)
    connection.send(h11.Request(method="GET", target="/", headers=[("Host", "api")]))
    connection.send(h11.EndOfMessage())
    connection.receive_data(data)
    connection.receive_data(b"")
    response: h11.Response | None = None
    body = bytearray()
    try:
        while True:
            event = connection.next_event()
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage) and response is not None:
                fields = tuple((name, value) for name, value in response.headers if name.decode() not in _FRAMING)
                return Answer(response.status_code, response.reason, fields, bytes(body))
            else:
                return None
    except h11.RemoteProtocolError:
        return None


# --- well-formed answers in the API server's dialect ---------------------------------------------------------------

_TOKEN = st.from_regex(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]{1,12}", fullmatch=True).filter(
    lambda name: name.lower() not in (b"content-length", b"transfer-encoding", b"connection")
)
_VALUE = st.from_regex(rb"([\x21-\x7e\x80-\xff]([ \t\x21-\x7e\x80-\xff]{0,20}[\x21-\x7e\x80-\xff])?)?", fullmatch=True)
_OWS = st.sampled_from([b"", b" ", b"  ", b"\t"])


@st.composite
def _field(draw: st.DrawFn) -> bytes:
    return draw(_TOKEN) + b":" + draw(_OWS) + draw(_VALUE) + draw(_OWS) + b"\r\n"


@st.composite
def _chunked(draw: st.DrawFn, body: bytes) -> bytes:
    out = bytearray()
    start = 0
    while start < len(body):
        size = draw(st.integers(1, len(body) - start))
        digits = f"{size:x}".upper() if draw(st.booleans()) else f"{size:x}"
        digits = "0" * draw(st.integers(0, 16 - len(digits))) + digits
        suffix = draw(st.sampled_from([b"", b";a=b", b';x="y;z"', b" ", b"\t "]))
        out += digits.encode() + suffix + b"\r\n" + body[start : start + size] + b"\r\n"
        start += size
    out += b"0" + draw(st.sampled_from([b"", b";end", b" "])) + b"\r\n"
    out += b"".join(draw(st.lists(_field(), max_size=2)))
    return bytes(out + b"\r\n")


@st.composite
def valid_answers(draw: st.DrawFn) -> bytes:
    """One answer as the API server (or a well-behaved proxy) sends it, with optional interim answers before it."""
    interim = draw(
        st.sampled_from([b"", b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"])
    )
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0"]))
    status = draw(st.sampled_from([200, 201, 204, 304, 403, 404, 409, 410, 429, 500, 503]))
    reason = draw(st.sampled_from([b" OK", b" Not Found", b"", b" ", b" Too Many Requests"]))
    fields = draw(st.lists(_field(), max_size=5))
    body = draw(st.binary(max_size=200))
    framing = draw(st.sampled_from(["length", "chunked", "close"] if version == b"HTTP/1.1" else ["length", "close"]))
    if status in (204, 304):
        body, framing = b"", draw(st.sampled_from(["none", "length"]))
    if framing == "length":
        fields.insert(draw(st.integers(0, len(fields))), b"Content-Length: %d\r\n" % len(body))
        payload = body
    elif framing == "chunked":
        fields.insert(draw(st.integers(0, len(fields))), b"Transfer-Encoding: chunked\r\n")
        payload = draw(_chunked(body))
    elif framing == "close":
        fields.append(b"Connection: close\r\n")
        payload = body
    else:
        payload = b""
    return interim + version + b" %d" % status + reason + b"\r\n" + b"".join(fields) + b"\r\n" + payload


# --- the same, mangled ---------------------------------------------------------------------------------------------

_NASTY = [
    b"\r", b"\n", b"\r\n", b"\x00", b" ", b"\t", b"\x0b", b"0x", b"_", b"+", b"-", b",", b";", b":", b"\xb2",
    b"\xd9\xa1", b"1", b"f", b"00000000000000000", b"Content-Length: 3\r\n", b"Content-Length: 0\r\n",
    b"Content-Length: 2, 3\r\n", b"Transfer-Encoding: chunked\r\n", b"Transfer-Encoding: gzip\r\n", b"HTTP/1.0",
    b"HTTP/1.1 101 Switching Protocols\r\n\r\n", b"HTTP/1.1 200 OK\r\n", b"\r\n\r\n", b" folded\r\n", b"X:\r\n",
]  # fmt: skip


@st.composite
def mangled_answers(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(valid_answers()))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "replace", "delete"]))
        piece = draw(st.sampled_from(_NASTY))
        if action == "insert":
            data[at:at] = piece
        elif action == "replace":
            data[at : at + len(piece)] = piece
        else:
            data[at : at + draw(st.integers(1, 4))] = b""
    return bytes(data)


def _cuts(data_length: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, data_length), max_size=8)


@FUZZ
@given(st.data())
def test_well_formed_answers_are_read_as_h11_reads_them(data: st.DataObject) -> None:
    answer = data.draw(valid_answers(), label="answer")
    cuts = data.draw(_cuts(len(answer)), label="cuts")
    parsed = ours(answer, cuts)
    assert parsed is not None, "a well-formed answer was refused"
    assert parsed == ours(answer, []), "the outcome depends on where the reads are cut"
    assert parsed == h11s(answer)


@FUZZ
@given(st.data())
def test_mangled_answers_are_never_read_more_leniently_than_by_h11(data: st.DataObject) -> None:
    answer = data.draw(mangled_answers(), label="answer")
    cuts = data.draw(_cuts(len(answer)), label="cuts")
    parsed = ours(answer, [])
    assert ours(answer, cuts) == parsed, "the outcome depends on where the reads are cut"
    if parsed is not None:
        assert h11s(answer) == parsed, "accepted here, refused or read otherwise by h11"
