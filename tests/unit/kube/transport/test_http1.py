"""``kube.transport.http1``: requests as bytes, and answers parsed from bytes cut anywhere, as the API server sends
them."""

from __future__ import annotations

import pytest

from webserver_operator.kube.transport.http1 import (
    MAX_HEAD,
    ProtocolError,
    ResponseHead,
    ResponseParser,
    encode_request,
)


class Answers:
    """Collects what the parser reports, one entry per answer: head, body, and whether the connection is reusable."""

    def __init__(self) -> None:
        self.heads: list[ResponseHead] = []
        self.bodies: list[bytes] = []
        self.ends: list[bool] = []
        self._current = bytearray()
        self.parser = ResponseParser(self._head, self._body, self._end)

    def _head(self, head: ResponseHead) -> None:
        self.heads.append(head)

    def _body(self, data: bytes) -> None:
        self._current += data

    def _end(self, reusable: bool) -> None:
        self.bodies.append(bytes(self._current))
        self._current.clear()
        self.ends.append(reusable)

    def feed(self, data: bytes, *, step: int | None = None) -> None:
        step = step or len(data) or 1
        for start in range(0, len(data), step):
            self.parser.feed(data[start : start + step])


LENGTH = b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"kind":"A"}\n'
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
    b'7\r\n{"a":1}\r\n'
    b'9;ext=1\r\n\n{"b":22}\r\n'
    b"0\r\nTrailer: x\r\n\r\n"
)


@pytest.mark.parametrize("step", [None, 1, 2, 7, 64])
def test_answers_cut_anywhere_parse_the_same(step: int | None) -> None:
    answers = Answers()
    answers.feed(LENGTH + CHUNKED + LENGTH, step=step)
    assert [head.status for head in answers.heads] == [201, 200, 201]
    assert answers.bodies == [b'{"kind":"A"}\n', b'{"a":1}\n{"b":22}', b'{"kind":"A"}\n']
    assert answers.ends == [True, True, True]
    assert answers.heads[0].get("CONTENT-TYPE") == "application/json"
    assert answers.heads[0].reason == "Created"
    assert answers.parser.idle


def test_header_names_are_case_insensitive_and_the_first_value_wins() -> None:
    answers = Answers()
    answers.feed(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nretry-after: 9\r\nContent-Length: 0\r\n\r\n")
    head = answers.heads[0]
    assert head.get("retry-after") == "3"
    assert head.headers()["retry-after"] == "3"
    assert head.get("missing", "x") == "x"


@pytest.mark.parametrize(
    ("head", "reusable"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n", True),
    ],
)
def test_connection_reuse_follows_the_version_and_connection_field(head: bytes, reusable: bool) -> None:
    answers = Answers()
    answers.feed(head + b"{}")
    assert answers.ends == [reusable]


def test_a_body_without_length_ends_with_the_connection() -> None:
    answers = Answers()
    answers.feed(b"HTTP/1.1 200 OK\r\n\r\nsome ")
    answers.feed(b"bytes")
    assert answers.ends == []
    answers.parser.eof()
    assert answers.bodies == [b"some bytes"]
    assert answers.ends == [False]


def test_no_body_for_204_304_and_interim_answers_are_skipped() -> None:
    answers = Answers()
    answers.feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\n")
    assert [head.status for head in answers.heads] == [204, 304]
    assert answers.bodies == [b"", b""]


def test_an_answer_to_connect_has_no_body_whatever_it_says() -> None:
    answers = Answers()
    answers.parser.next_without_body()
    answers.feed(b"HTTP/1.1 200 Connection established\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert answers.ends == [True]
    answers.feed(LENGTH)
    assert answers.bodies == [b"", b'{"kind":"A"}\n'], "only the one answer after it was bodiless"


def test_a_watch_body_arrives_as_it_comes() -> None:
    seen: list[bytes] = []
    parser = ResponseParser(lambda _: None, seen.append, lambda _: None)
    parser.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab")
    assert seen == [b"ab"], "part of a chunk is handed on at once"
    parser.feed(b"cde\r\n")
    assert seen == [b"ab", b"cde"]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"HTP/1.1 200 OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "malformed header"),
        (b"HTTP/1.1 200 OK\r\nA: 1\r\n folded\r\n\r\n", "malformed header"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "Transfer-Encoding"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n", "longer than its size"),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\nextra", "after the end"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20000, "head longer"),
    ],
)
def test_malformed_answers_are_protocol_errors(data: bytes, error: str) -> None:
    with pytest.raises(ProtocolError, match=error):
        Answers().feed(data)


def test_an_answer_cut_short_is_an_error_at_the_end_of_the_connection() -> None:
    answers = Answers()
    answers.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345")
    with pytest.raises(ProtocolError, match="middle of an answer"):
        answers.parser.eof()
    idle = Answers()
    idle.feed(LENGTH)
    idle.parser.eof()  # between answers: a clean end


def test_requests_are_encoded_with_host_fields_and_length() -> None:
    data = encode_request(
        "POST", "/api/v1/namespaces/d/services?fieldManager=x", "api:6443", [("Accept", "application/json")], b"{}"
    )
    assert data == (
        b"POST /api/v1/namespaces/d/services?fieldManager=x HTTP/1.1\r\nHost: api:6443\r\n"
        b"Accept: application/json\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert encode_request("GET", "/version", "api", [], None) == b"GET /version HTTP/1.1\r\nHost: api\r\n\r\n"
    with pytest.raises(ValueError, match="line break"):
        encode_request("GET", "/", "api", [("Authorization", "Bearer x\r\nEvil: 1")], None)


OK = b"HTTP/1.1 200 OK\r\n"
CHUNKED_HEAD = OK + b"Transfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    "data",
    [
        # Latin-1 superscripts, as a head decodes: str.isdigit() says yes, int() says no.
        b"HTTP/1.1 2\xb20 OK\r\nContent-Length: 0\r\n\r\n",
        OK + b"Content-Length: \xb2\r\n\r\n",
        OK + b"Content-Length: 1\xb9\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: ²\r\n\r\n".encode(),  # the same in UTF-8
        OK + b"Content-Length: " + b"1" * 4301 + b"\r\n\r\n",  # int() refuses more than 4300 digits
        OK + b"Content-Length: 5 5\r\n\r\n",
        OK + b"Content-Length: +5\r\n\r\n",
        OK + b"Content-Length: \r\n\r\n",
    ],
)
def test_malformed_numbers_are_protocol_errors_never_value_errors(data: bytes) -> None:
    """The parser promises ``ProtocolError`` (the connection is closed and the request fails as a transport error)."""
    with pytest.raises(ProtocolError) as raised:
        Answers().feed(data)
    assert type(raised.value) is ProtocolError


@pytest.mark.parametrize(
    ("data", "error"),
    [
        # Chunk sizes h11 and llhttp refuse; int(x, 16) takes the first three.
        (CHUNKED_HEAD + b"0x5\r\nabcde\r\n0\r\n\r\n", "chunk size"),
        (CHUNKED_HEAD + b"0_5\r\nabcde\r\n0\r\n\r\n", "chunk size"),
        (CHUNKED_HEAD + b" 5\r\nabcde\r\n0\r\n\r\n", "chunk size"),
        (CHUNKED_HEAD + b"5 ;x=1\r\nabcde\r\n0\r\n\r\n", "chunk size"),
        (CHUNKED_HEAD + b"+5\r\nabcde\r\n0\r\n\r\n", "chunk size"),
        (CHUNKED_HEAD + b"1" * 17 + b"\r\n", "chunk size"),  # more than 64 bits (Go refuses 17 digits)
        (CHUNKED_HEAD + b"5\nabcde\r\n0\r\n\r\n", "chunk size"),  # a bare LF in the size line
        (CHUNKED_HEAD + b"0\r\nno colon\r\n\r\n", "trailer"),
        (CHUNKED_HEAD + b"0\r\nX: a\x00b\r\n\r\n", "trailer"),
        # Framing the first field of which used to win, or that a proxy may read otherwise (smuggling).
        (OK + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nabc", "conflicting Content-Length"),
        (OK + b"Content-Length: 2, 3\r\n\r\nabc", "conflicting Content-Length"),
        (OK + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "more than one"),
        (OK + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "Transfer-Encoding"),
        (OK + b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", "Transfer-Encoding"),
        (OK + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", "both"),
        (b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "HTTP/1.0"),
        # Bytes no header line may hold.
        (OK + b"X: a\x00b\r\nContent-Length: 0\r\n\r\n", "forbidden byte"),
        (OK + b"X: a\nContent-Length: 5\r\n\r\nabcde", "forbidden byte"),  # a bare LF: one line or two?
        (OK + b"X: a\rContent-Length: 5\r\n\r\nabcde", "forbidden byte"),
        (OK + b"X: a\x0bb\r\nContent-Length: 0\r\n\r\n", "forbidden byte"),
        (OK + b"X : y\r\nContent-Length: 0\r\n\r\n", "malformed header"),
        (OK + b"X(y): a\r\nContent-Length: 0\r\n\r\n", "malformed header"),
        (b"HTTP/1.1 200 OK\nContent-Length: 0\n\nHTTP/1.1 200 OK\r\n\r\n", "forbidden byte"),
        # Status lines.
        (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "101"),
        (b"HTTP/1.1 099 Early\r\nContent-Length: 0\r\n\r\n", "status line"),
        (b"HTTP/1.1\t200 OK\r\nContent-Length: 0\r\n\r\n", "status line"),
        (b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", "status line"),
        (b"\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "status line"),
        # A whole head longer than the limit, arriving in one read.
        (OK + b"X: " + b"y" * (MAX_HEAD + 10) + b"\r\nContent-Length: 0\r\n\r\n", "head longer"),
    ],
)
def test_what_h11_or_llhttp_refuse_is_refused(data: bytes, error: str) -> None:
    for step in (None, 1):  # a head near MAX_HEAD in 1-byte reads: linear, not a copy of the buffer per read
        with pytest.raises(ProtocolError, match=error):
            Answers().feed(data, step=step)


@pytest.mark.parametrize(
    ("data", "body"),
    [
        (OK + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\nab", b"ab"),  # the same length twice
        (OK + b"Content-Length: 2, 2\r\n\r\nab", b"ab"),
        (OK + b"Content-Length: 002\r\n\r\nab", b"ab"),
        (CHUNKED_HEAD + b"0000000000000002\r\nab\r\n0\r\n\r\n", b"ab"),  # 16 hex digits
        (CHUNKED_HEAD + b"2 \r\nab\r\n0 \t\r\n\r\n", b"ab"),  # blanks after the size, as h11 accepts
        (CHUNKED_HEAD + b'2;name="va;lue"\r\nab\r\n0\r\nX-Trailer: 1\r\n\r\n', b"ab"),
        (OK + b"Transfer-Encoding: CHUNKED\r\n\r\n2\r\nab\r\n0\r\n\r\n", b"ab"),
        (OK + b"X: a\tb \xff\r\nX-Empty:\r\nContent-Length: 2\r\n\r\nab", b"ab"),  # tab and obs-text in a value
        (b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK + b"Content-Length: 2\r\n\r\nab", b"ab"),
        (b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nab", b"ab"),  # no reason phrase, as h11 accepts
    ],
)
def test_what_h11_accepts_in_the_api_servers_dialect_is_still_read(data: bytes, body: bytes) -> None:
    for step in (None, 1):
        answers = Answers()
        answers.feed(data, step=step)
        assert answers.bodies == [body]
        assert [head.status for head in answers.heads] == [200]
