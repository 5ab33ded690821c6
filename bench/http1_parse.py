"""Micro-benchmark: parsing the API server's answers with ``kube.transport.http1`` or with httptools (llhttp), as bytes
arrive.

Why: issue 32 asked whether an existing parser (httptools, llhttp in C) reads the operator's answers as fast as its
own; if so, prefer it. Three workloads, the operator's real ones, built in memory (no sockets, so only parsing is
timed):

- ``small``: answers to single-object requests (a PATCH, a GET): nine header fields as the API server sends them and
  a 3 KiB JSON body, one read per answer.
- ``list``: a list page: the same head and a 600 KiB body with ``Content-Length``, in 64 KiB reads.
- ``watch``: a watch stream: chunked, one 2 KiB event per chunk and per read (events come one by one).

Both parsers hand on the same things: the status, the header fields with lowercased ``str`` names and values (what
``ResponseHead`` holds), and the body pieces. Run one parser per process and compare whole processes with
farm-bench::

    farm-bench -n 10 -- .venv/bin/python -m bench.http1_parse --parser ours --workload watch \\
        --vs '.venv/bin/python -m bench.http1_parse --parser httptools --workload watch'

httptools is not a dependency of the operator, only of the benchmarks (bench/requirements.txt, ``make bench``
installs it).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from webserver_operator.kube.transport.http1 import ResponseHead, ResponseParser

_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"Audit-Id: 0f6a2c1e-6d9b-4b0e-9a57-0f3c4c9f6c1b\r\n"
    b"Cache-Control: no-cache, private\r\n"
    b"Content-Type: application/json\r\n"
    b"X-Kubernetes-Pf-Flowschema-Uid: 6c1f3c0a-1b0e-4f53-9d6b-9b0f2c3b9e7a\r\n"
    b"X-Kubernetes-Pf-Prioritylevel-Uid: 2a9f5c1d-8e7b-4c3a-a1f0-5d6e7f8a9b0c\r\n"
    b"Date: Sat, 28 Nov 2026 03:00:00 GMT\r\n"
)


def _json(size: int) -> bytes:
    return (b'{"kind":"Deployment","data":"' + b"x" * size)[:size] + b'"}'


def small(answers: int = 2000) -> list[bytes]:
    body = _json(3 * 1024)
    return [_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body] * answers


def listing(pages: int = 40) -> list[bytes]:
    body = _json(600 * 1024)
    data = _HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body
    reads = [data[start : start + 65536] for start in range(0, len(data), 65536)]
    return reads * pages


def watch(events: int = 20000) -> list[bytes]:
    event = b'{"type":"MODIFIED","object":' + _json(2 * 1024) + b"}\n"
    reads = [_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"]
    reads += [b"%x\r\n%b\r\n" % (len(event), event)] * events
    reads.append(b"0\r\n\r\n")
    return reads


def run_ours(reads: list[bytes]) -> int:
    heads: list[ResponseHead] = []
    pieces: list[bytes] = []
    ends: list[bool] = []
    parser = ResponseParser(heads.append, pieces.append, ends.append)
    for data in reads:
        parser.feed(data)
    return len(ends)


def run_httptools(reads: list[bytes]) -> int:
    import httptools  # noqa: PLC0415 - bench-only (bench/requirements.txt), imported only when compared

    class Protocol:
        def __init__(self) -> None:
            self.fields: list[tuple[str, str]] = []
            self.heads: list[tuple[int, tuple[tuple[str, str], ...]]] = []
            self.pieces: list[bytes] = []
            self.ends = 0

        def on_header(self, name: bytes, value: bytes) -> None:
            self.fields.append((name.decode("latin-1").lower(), value.decode("latin-1").strip(" \t")))

        def on_headers_complete(self) -> None:
            self.heads.append((parser.get_status_code(), tuple(self.fields)))
            self.fields = []

        def on_body(self, body: bytes) -> None:
            self.pieces.append(body)

        def on_message_complete(self) -> None:
            self.ends += 1

    protocol = Protocol()
    parser = httptools.HttpResponseParser(protocol)
    for data in reads:
        parser.feed_data(data)
    return protocol.ends


WORKLOADS: dict[str, Callable[[], list[bytes]]] = {"small": small, "list": listing, "watch": watch}
PARSERS: dict[str, Callable[[list[bytes]], int]] = {"ours": run_ours, "httptools": run_httptools}


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    arguments.add_argument("--parser", choices=sorted(PARSERS), required=True)
    arguments.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    arguments.add_argument("--rounds", type=int, default=20)
    options = arguments.parse_args()
    reads = WORKLOADS[options.workload]()
    run = PARSERS[options.parser]
    answers = sum(run(reads) for _ in range(options.rounds))
    assert answers > 0


if __name__ == "__main__":
    main()
