"""The JSON codec of the API client: what orjson decodes must be what ``json`` decodes, for what API servers send.

Covered through ``WatchStream`` (the path every watch event takes) and the codec itself: non-ASCII text in every
encoding the API server may use (raw UTF-8 and ``\\u`` escapes, surrogate pairs split across chunks), integers at the
64-bit edges, BOOKMARK and ERROR events, and the input orjson refuses and the standard library accepts.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from webserver_operator.kube import jsoncodec
from webserver_operator.kube.stream import WatchStream


def _stream(body: bytes, chunk: int) -> WatchStream:
    chunks = [body[i : i + chunk] for i in range(0, len(body), chunk)]

    async def read_chunk() -> bytes:
        return chunks.pop(0) if chunks else b""

    return WatchStream(read_chunk=read_chunk, method="GET", path="/apis/apps/v1/deployments", host="h:1")


ADDED = {
    "type": "ADDED",
    "object": {
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "resourceVersion": "123456789",
            "annotations": {"note": "café ☕ 日本語 \U0001f600", "escaped": 'quote " backslash \\ tab \t'},
        },
        "spec": {"replicas": 3, "revisionHistoryLimit": 9223372036854775807, "min": -9223372036854775808},
        "status": {"observedGeneration": 18446744073709551615, "ratio": 0.1, "ready": True, "none": None},
    },
}
BOOKMARK = {
    "type": "BOOKMARK",
    "object": {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": {"resourceVersion": "123456790", "annotations": {"k8s.io/initial-events-end": "true"}},
    },
}
ERROR = {
    "type": "ERROR",
    "object": {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": "too old resource version: 5 (123456790)",
        "reason": "Expired",
        "code": 410,
    },
}


@pytest.mark.parametrize("ensure_ascii", [True, False], ids=["escaped", "utf-8"])
@pytest.mark.parametrize("chunk", [1, 3, 64, 1 << 20])
async def test_watch_events_decode_as_the_standard_library_does(ensure_ascii: bool, chunk: int) -> None:
    lines = [json.dumps(event, ensure_ascii=ensure_ascii) for event in (ADDED, BOOKMARK, ERROR)]
    body = ("\n".join(lines) + "\n").encode()
    events = [event async for event in _stream(body, chunk)]
    assert events == [ADDED, BOOKMARK, ERROR]
    assert events == [json.loads(line) for line in lines]
    status = events[0]["object"]["status"]
    assert isinstance(status["observedGeneration"], int)
    assert status["observedGeneration"] == 2**64 - 1
    assert events[0]["object"]["spec"]["min"] == -(2**63)


def test_integers_beyond_64_bits_decode_as_the_api_server_stores_them() -> None:
    # apimachinery's convertNumber keeps an int64 and turns larger numbers into float64: the API server never sends
    # a larger exact integer, and the codec gives the same float it would have stored.
    decoded = jsoncodec.decode(b'{"n": 18446744073709551616}')
    assert decoded == {"n": float(2**64)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b'{"a": "\\ud800"}', {"a": "\ud800"}),  # a lone surrogate escape: orjson refuses, json accepts
        (b'{"a": 1e400}', {"a": float("inf")}),
        (bytearray(b'{"a": "\\u00e9"}'), {"a": "é"}),
        ('{"a": "é"}', {"a": "é"}),
    ],
)
def test_what_orjson_refuses_is_decoded_by_the_standard_library(text: Any, expected: dict[str, Any]) -> None:
    assert jsoncodec.decode(text) == expected


def test_undecodable_input_raises_a_value_error() -> None:
    with pytest.raises(ValueError, match="Expecting value"):
        jsoncodec.decode(b"<html>")


def test_encode_is_compact_utf8_and_falls_back_for_what_orjson_refuses() -> None:
    assert jsoncodec.encode({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'.encode()
    assert json.loads(jsoncodec.encode({"big": 2**70})) == {"big": 2**70}
    assert json.loads(jsoncodec.encode({1: "x"})) == {"1": "x"}
    with pytest.raises(TypeError):
        jsoncodec.encode({"a": object()})
