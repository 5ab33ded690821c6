"""merge_patch (RFC 7386) and diff / changed_paths on plain objects."""

from typing import Any

import pytest

from webserver_operator.reconcile.owned import ABSENT, Change, changed_paths, diff, merge_patch

Obj = dict[str, Any]


def live(**fields: Any) -> Obj:
    return {"metadata": {"name": "web", "resourceVersion": "7"}, **fields}


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        (live(spec={"a": 1}), live(spec={"a": 1}), None),
        (live(spec={"a": 1, "b": 2}), live(spec={"a": 1, "b": 3}), {"spec": {"b": 3}}),
        (live(spec={"a": {"x": 1, "y": 2}}), live(spec={"a": {"x": 1, "y": 5}}), {"spec": {"a": {"y": 5}}}),
        (live(spec={"a": 1, "b": 2}), live(spec={"a": 1}), {"spec": {"b": None}}),
        (live(spec={}), live(spec={"n": {"deep": [1]}}), {"spec": {"n": {"deep": [1]}}}),
        (live(spec={"l": [1, 2, 3]}), live(spec={"l": [1, 2, 4]}), {"spec": {"l": [1, 2, 4]}}),
        (live(spec={"l": [{"a": 1}]}), live(spec={"l": [{"a": 1}, {"b": 2}]}), {"spec": {"l": [{"a": 1}, {"b": 2}]}}),
        (live(spec={"v": 1}), live(spec={"v": {"now": "a map"}}), {"spec": {"v": {"now": "a map"}}}),
        (
            live(spec={"a": 1}),
            {"metadata": {"name": "web", "resourceVersion": "7", "labels": {"k": "v"}}, "spec": {"a": 1}},
            {"metadata": {"labels": {"k": "v"}}},
        ),
    ],
)
def test_merge_patch(old: Obj, new: Obj, patch: Obj | None) -> None:
    if patch is not None:
        patch.setdefault("metadata", {})["resourceVersion"] = "7"
    assert merge_patch(old, new) == patch


def test_merge_patch_without_resource_version() -> None:
    assert merge_patch({"spec": {"a": 1}}, {"spec": {"a": 2}}) == {"spec": {"a": 2}}


def test_merge_patch_copies_values() -> None:
    new = live(spec={"l": [{"a": 1}]})
    patch = merge_patch(live(spec={}), new)
    assert patch is not None
    patch["spec"]["l"][0]["a"] = 99
    assert new["spec"]["l"] == [{"a": 1}]


@pytest.mark.parametrize(
    ("old", "new", "paths"),
    [
        ({"a": 1}, {"a": 1}, []),
        ({"spec": {"replicas": 3}}, {"spec": {"replicas": 5}}, ["spec.replicas"]),
        ({"labels": {"app.kubernetes.io/name": "x"}}, {"labels": {}}, ["labels[app.kubernetes.io/name]"]),
        (
            {"containers": [{"name": "web", "image": "a"}, {"name": "side", "image": "s"}]},
            {"containers": [{"name": "web", "image": "b"}, {"name": "side", "image": "s"}]},
            ["containers[web].image"],
        ),
        (
            {"containers": [{"name": "a"}, {"name": "b"}]},
            {"containers": [{"name": "b"}, {"name": "a"}]},
            ["containers"],
        ),
        ({"args": ["a"]}, {"args": ["b"]}, ["args"]),
        ({"refs": [{"uid": "1"}]}, {"refs": [{"uid": "2"}]}, ["refs"]),
        ({"l": [{"name": "x"}, {"name": "x"}]}, {"l": [{"name": "x"}]}, ["l"]),
        ({}, {"a": {"b": 1}}, ["a"]),
        ({"a": {"b": 1}}, {"a": 2}, ["a"]),
    ],
)
def test_changed_paths(old: Obj, new: Obj, paths: list[str]) -> None:
    assert changed_paths(old, new) == paths


def test_diff_values_and_rendering() -> None:
    changes = diff({"spec": {"replicas": 3, "gone": "x"}}, {"spec": {"replicas": 5}})
    assert changes == [Change("spec.replicas", 3, 5), Change("spec.gone", "x", ABSENT)]
    assert [str(c) for c in changes] == ["spec.replicas (3 -> 5)", "spec.gone (x -> absent)"]


def test_long_values_are_shortened() -> None:
    text = str(Change("spec.template.spec.containers[web]", ABSENT, {"name": "web", "image": "x" * 500}))
    assert text.startswith("spec.template.spec.containers[web] (absent -> {'name': 'web'")
    assert text.endswith("...)")
    assert len(text) < 200
