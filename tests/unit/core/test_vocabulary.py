"""The shared vocabulary's helpers: object keys and the controller ownerReference."""

from typing import Any

import pytest

from webserver_operator.core.vocabulary import controller_of, object_key

OWNER = {
    "apiVersion": "web.webserver-operator.dev/v1",
    "kind": "WebServer",
    "name": "web",
    "uid": "uid-1",
    "controller": True,
}


@pytest.mark.parametrize(
    ("refs", "expected"),
    [
        (None, None),
        ([], None),
        ([{**OWNER, "controller": False}], None),
        ([{"kind": "Other", "uid": "x"}, OWNER], OWNER),
    ],
)
def test_controller_of(refs: list[dict[str, Any]] | None, expected: dict[str, Any] | None) -> None:
    obj: dict[str, Any] = {"metadata": {} if refs is None else {"ownerReferences": refs}}
    assert controller_of(obj) == expected


def test_object_key() -> None:
    assert object_key({"metadata": {"namespace": "ns", "name": "a"}}) == ("ns", "a")
    assert object_key({"metadata": {"name": "cluster-scoped"}}) == ("", "cluster-scoped")
