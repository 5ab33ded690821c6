"""Store: replace diffs a relist into events, owner index stays consistent through upsert/delete/replace."""

from typing import Any

import pytest

from webserver_operator.runtime.informers.store import Store

pytestmark = pytest.mark.timeout(5)


def obj(name: str, rv: str, *, namespace: str = "ns", owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": rv}
    if owner:
        meta["ownerReferences"] = [
            {"uid": "not-controller", "controller": False},
            {"uid": owner, "controller": True, "kind": "WebServer", "name": "o"},
        ]
    return {"metadata": meta}


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def test_replace_reports_added_modified_deleted_and_skips_unchanged() -> None:
    store = Store()
    assert [c[0] for c in store.replace([obj("a", "1"), obj("b", "1"), obj("c", "1")], "10")] == ["ADDED"] * 3
    changes = store.replace([obj("a", "1"), obj("b", "2"), obj("d", "1")], "20")
    summary = [
        (kind, new["metadata"]["name"], old["metadata"]["resourceVersion"] if old else None)
        for kind, new, old in changes
    ]
    assert summary == [("DELETED", "c", None), ("MODIFIED", "b", "1"), ("ADDED", "d", None)]
    assert store.resource_version == "20"
    assert sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in store.list()) == [
        ("ns", "a"),
        ("ns", "b"),
        ("ns", "d"),
    ]


def test_get_list_by_namespace_and_cluster_scoped_keys() -> None:
    store = Store()
    store.upsert(obj("a", "1", namespace="x"))
    store.upsert(obj("a", "1", namespace="y"))
    store.upsert({"metadata": {"name": "node-1", "resourceVersion": "1"}})
    assert store.get(("x", "a")) is not None
    assert store.get(("", "node-1")) is not None
    assert store.get(("z", "a")) is None
    assert names(store.list("y")) == ["a"]
    assert len(store.list()) == 3


def test_upsert_and_delete_return_previous_object() -> None:
    store = Store()
    first = obj("a", "1")
    assert store.upsert(first) is None
    assert store.upsert(obj("a", "2")) is first
    removed = store.delete(("ns", "a"))
    assert removed is not None
    assert removed["metadata"]["resourceVersion"] == "2"
    assert store.delete(("ns", "a")) is None


def test_namespace_counts_follow_upserts_deletes_and_relists() -> None:
    store = Store()
    store.replace([obj("a", "1", namespace="one"), obj("b", "1", namespace="one"), obj("c", "1", namespace="two")], "1")
    assert dict(store.namespace_counts()) == {"one": 2, "two": 1}
    store.upsert(obj("a", "2", namespace="one"))  # a new version of a cached object adds nothing
    store.upsert(obj("d", "1", namespace="three"))
    assert dict(store.namespace_counts()) == {"one": 2, "two": 1, "three": 1}
    store.delete(("two", "c"))
    store.delete(("two", "c"))  # deleting what is gone changes nothing
    assert dict(store.namespace_counts()) == {"one": 2, "three": 1}
    store.replace([obj("b", "1", namespace="one")], "2")
    assert dict(store.namespace_counts()) == {"one": 1}
    assert sum(store.namespace_counts().values()) == len(store)
