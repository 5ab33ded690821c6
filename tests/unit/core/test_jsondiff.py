"""compare: the RFC 7386 merge patch and the changed fields, on plain objects."""

from typing import Any

import pytest

from webserver_operator.core.jsondiff import ABSENT, FieldChange, compare


def _patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    return compare(old, new).patch


def _paths(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return compare(old, new).paths


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
    return compare(old, new).changes


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
    assert _patch(old, new) == patch


def test_merge_patch_without_resource_version() -> None:
    assert _patch({"spec": {"a": 1}}, {"spec": {"a": 2}}) == {"spec": {"a": 2}}


def test_merge_patch_copies_values() -> None:
    new = live(spec={"l": [{"a": 1}]})
    patch = _patch(live(spec={}), new)
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
    assert _paths(old, new) == paths


def test_diff_values_and_rendering() -> None:
    changes = _changes({"spec": {"replicas": 3, "gone": "x"}}, {"spec": {"replicas": 5}})
    assert changes == [FieldChange("spec.replicas", 3, 5), FieldChange("spec.gone", "x", ABSENT)]
    assert [str(c) for c in changes] == ["spec.replicas (3 -> 5)", "spec.gone (x -> absent)"]


def test_long_values_are_shortened() -> None:
    text = str(FieldChange("spec.template.spec.containers[web]", ABSENT, {"name": "web", "image": "x" * 500}))
    assert text.startswith("spec.template.spec.containers[web] (absent -> {'name': 'web'")
    assert text.endswith("...)")
    assert len(text) < 200
