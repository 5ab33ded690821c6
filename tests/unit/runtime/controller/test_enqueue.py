"""Event -> key mapping: primary objects, controller owners (group match, not version), orphan fallback."""

from typing import Any

import pytest

from webserver_operator.runtime.controller.enqueue import keys_for_owner, keys_on_delete, owner_key

pytestmark = pytest.mark.timeout(5)


def by_instance_label(obj: dict[str, Any]) -> str | None:
    """An orphan rule as a controller passes one: the instance label names the would-be owner."""
    owner = (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/instance")
    return owner if isinstance(owner, str) else None


OWNER: dict[str, Any] = {"owner_kind": "WebServer", "owner_api_version": "example.com/v1", "orphans": by_instance_label}


def child(
    *, ref: dict[str, Any] | None = None, labels: dict[str, str] | None = None, namespace: str = "ns"
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-abc", "namespace": namespace, "labels": labels or {}}
    if ref is not None:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "apiVersion": "apps/v1", "name": "x", "uid": "1"}, ref]
    return {"metadata": meta}


def ref(kind: str = "WebServer", api_version: str = "example.com/v1", name: str = "web") -> dict[str, Any]:
    return {"kind": kind, "apiVersion": api_version, "name": name, "uid": "u", "controller": True}


def test_controller_reference_maps_to_owner_key() -> None:
    assert owner_key(child(ref=ref()), **OWNER) == ("ns", "web")


def test_owner_group_matches_regardless_of_version() -> None:
    assert owner_key(child(ref=ref(api_version="example.com/v1beta1")), **OWNER) == ("ns", "web")


@pytest.mark.parametrize(
    "foreign",
    [ref(kind="Other"), ref(api_version="other.io/v1"), ref(kind="WebServer", api_version="v1")],
)
def test_foreign_controller_never_wakes_us_even_with_our_label(foreign: dict[str, Any]) -> None:
    obj = child(ref=foreign, labels={"app.kubernetes.io/instance": "web"})
    assert owner_key(obj, **OWNER) is None


def test_orphan_falls_back_to_the_controllers_orphan_rule() -> None:
    assert owner_key(child(labels={"app.kubernetes.io/instance": "web"}), **OWNER) == ("ns", "web")


def test_without_an_orphan_rule_an_orphan_wakes_nobody() -> None:
    orphan = child(labels={"app.kubernetes.io/instance": "web"})
    assert owner_key(orphan, owner_kind="WebServer", owner_api_version="example.com/v1") is None


def test_non_controller_owner_reference_is_not_a_controller() -> None:
    obj = child(labels={"app.kubernetes.io/instance": "web"})
    obj["metadata"]["ownerReferences"] = [{**ref(name="other"), "controller": False}]
    assert owner_key(obj, **OWNER) == ("ns", "web")


def test_unlabelled_orphan_maps_to_nothing() -> None:
    assert owner_key(child(), **OWNER) is None


def test_update_wakes_old_and_new_owner() -> None:
    keys = keys_for_owner(**OWNER)
    assert sorted(keys("MODIFIED", child(ref=ref(name="new")), child(ref=ref(name="old")))) == [
        ("ns", "new"),
        ("ns", "old"),
    ]
    assert list(keys("MODIFIED", child(ref=ref(name="same")), child(ref=ref(name="same")))) == [("ns", "same")]


def test_keys_on_delete_only_on_delete() -> None:
    keys = keys_on_delete(lambda: [("ns", "waiting")])
    assert list(keys("DELETED", child(), None)) == [("ns", "waiting")]
    assert list(keys("MODIFIED", child(), child())) == []
