"""``kube.skim``: tenant-written objects decoded without the fields no reader reads, and nothing else changed."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import orjson
import pytest

from webserver_operator.kube import jsoncodec
from webserver_operator.kube.skim import Skim

KEPT = ("name", "namespace", "uid", "resourceVersion", "annotations")
SKIM = Skim(KEPT)


def padded(name: str, labels: int = 2000) -> dict[str, Any]:
    """A WebServer as the API server returns it: tenant labels, their managedFields, spec and status."""
    keys = [f"p{i:05d}" for i in range(labels)]
    return {
        "apiVersion": "web.webserver-operator.dev/v1",
        "kind": "WebServer",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "resourceVersion": "42",
            "generation": 3,
            "labels": dict.fromkeys(keys, "v" * 63),
            "annotations": {"webserver-operator.dev/template-upgrade": "true", "tenant.example/x": "y"},
            "managedFields": [
                {
                    "manager": "kubectl",
                    "operation": "Update",
                    "fieldsV1": {"f:metadata": {"f:labels": {f"f:{key}": {} for key in keys}}},
                }
            ],
        },
        "spec": {"replicas": 2, "image": "nginx:1.27", "health": {"path": "/healthz"}},
        "status": {"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def expected(obj: dict[str, Any]) -> dict[str, Any]:
    """What a whole decode gives, with only the ``KEPT`` metadata keys."""
    whole: dict[str, Any] = jsoncodec.decode(orjson.dumps(obj))
    whole["metadata"] = {key: value for key, value in whole["metadata"].items() if key in KEPT}
    return whole


def test_an_object_keeps_spec_status_and_the_named_metadata_and_nothing_else() -> None:
    obj = padded("a")
    assert SKIM.object(orjson.dumps(obj)) == expected(obj)


def test_a_list_page_keeps_its_own_metadata_and_skims_every_item() -> None:
    items = [padded("a"), padded("b")]
    page = {"apiVersion": "v1", "kind": "WebServerList", "metadata": {"resourceVersion": "9", "continue": "tok"}}
    decoded = SKIM.list(orjson.dumps({**page, "items": items}))
    assert decoded == {**page, "items": [expected(item) for item in items]}


def test_an_empty_list_page() -> None:
    assert SKIM.list(b'{"metadata":{"resourceVersion":"9"},"items":null}') == {
        "metadata": {"resourceVersion": "9"},
        "items": None,
    }


@pytest.mark.parametrize("event_type", ["ADDED", "MODIFIED", "DELETED"])
def test_a_watch_event_skims_its_object(event_type: str) -> None:
    obj = padded("a")
    assert SKIM.event(orjson.dumps({"type": event_type, "object": obj})) == {
        "type": event_type,
        "object": expected(obj),
    }


def test_a_bookmark_and_an_error_event_keep_what_the_informer_reads() -> None:
    bookmark = {"type": "BOOKMARK", "object": {"kind": "WebServer", "metadata": {"resourceVersion": "77"}}}
    assert SKIM.event(orjson.dumps(bookmark)) == bookmark
    error = {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "too old resource version: 1 (77)",
            "reason": "Expired",
            "code": 410,
        },
    }
    assert SKIM.event(orjson.dumps(error)) == error


def test_input_msgspec_refuses_is_decoded_whole_as_the_standard_library_would() -> None:
    # A lone UTF-16 surrogate escape: the API server never writes one, jsoncodec's fallback accepts it.
    data = b'{"metadata":{"name":"a","labels":{"k":"v"}},"spec":{"x":"\\ud800"}}'
    assert SKIM.object(data) == json.loads(data)


def test_json_that_is_not_json_still_raises_a_value_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        SKIM.object(b'{"metadata":')


def test_a_padded_page_builds_a_small_fraction_of_what_a_whole_decode_builds() -> None:
    """The point of the module: the labels and managedFields are never built, not built and dropped."""
    page = orjson.dumps({"metadata": {}, "items": [padded(f"w{i}", labels=8000) for i in range(5)]})

    def peak(decode: Any) -> int:
        tracemalloc.start()
        try:
            decoded = decode(page)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            del decoded

    whole, skimmed = peak(jsoncodec.decode), peak(SKIM.list)
    assert whole > 3 * len(page)  # the labels as Python strings and dicts
    assert skimmed < len(page) // 20, f"skim built {skimmed} bytes for a {len(page)}-byte page (whole: {whole})"
