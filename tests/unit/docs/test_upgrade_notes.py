"""The CHANGELOG's pod-template markers and the template diff the upgrade test judges with (tests/support/upgrades.py).

The integration test (tests/integration/test_upgrade.py) needs a cluster and two operator versions; the two pure
pieces it relies on are pinned here, so a parser that silently finds nothing, or a diff that misses a field, fails
without either.
"""

from __future__ import annotations

from tests.support.upgrades import (
    CHANGELOG,
    declared_template_changes,
    section,
    template_changes,
    undeclared,
    upgrade_problems,
)

NOTES = """# Changelog

## [Unreleased]

### Upgrade notes

- `pod-template: spec.template.spec.enableServiceLinks` false, rolled out as WebServers are next edited.
- Something else entirely, naming pod-template: spec.template.spec.hostNetwork in passing.

## [0.1.0] - 2026-11-24

- `pod-template: spec.template.spec.automountServiceAccountToken` false.
"""


def test_markers_are_read_from_the_named_section_only() -> None:
    assert declared_template_changes(NOTES) == ["spec.template.spec.enableServiceLinks"]
    assert declared_template_changes(NOTES, "0.1.0") == ["spec.template.spec.automountServiceAccountToken"]
    assert declared_template_changes(NOTES, "0.0.9") == []
    assert section(NOTES, "Unreleased").startswith("[Unreleased]")


def test_template_diff_names_leaf_fields_and_matches_containers_by_name() -> None:
    before = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "containers": [{"name": "web", "image": "nginx:1.27"}, {"name": "side", "image": "busybox"}],
            "enableServiceLinks": False,
        },
    }
    after = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "containers": [{"name": "side", "image": "busybox"}, {"name": "web", "image": "nginx:1.27", "tty": True}],
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 5,
        },
    }
    assert template_changes(before, before) == []
    assert template_changes(before, after) == [
        "spec.template.spec.containers[web].tty",
        "spec.template.spec.terminationGracePeriodSeconds",
    ]


def test_a_declared_field_covers_itself_and_what_is_below_it_only() -> None:
    changes = [
        "spec.template.spec.containers[web].securityContext.runAsNonRoot",
        "spec.template.spec.enableServiceLinks",
        "spec.template.spec.enableServiceLinksExtra",
    ]
    declared = ["spec.template.spec.containers[web].securityContext", "spec.template.spec.enableServiceLinks"]
    assert undeclared(changes, declared) == ["spec.template.spec.enableServiceLinksExtra"]


def test_the_changelog_declares_what_the_last_baseline_changed() -> None:
    """0.1.0's notes name the two fields that restarted every WebServer's pods when it was reached (see its section)."""
    declared = declared_template_changes(CHANGELOG.read_text(), "0.1.0")
    assert "spec.template.spec.automountServiceAccountToken" in declared
    assert "spec.template.spec.enableServiceLinks" in declared


def _child(generation: int, image: str, deployment_fields: str = "d", service_fields: str = "s") -> dict[str, object]:
    template = {"spec": {"containers": [{"name": "web", "image": image}]}}
    return {
        "generation": generation,
        "template": template,
        "deployment_fields": deployment_fields,
        "service_fields": service_fields,
    }


def test_upgrade_problems_name_undeclared_changes_restarts_and_writes() -> None:
    before = {"a": _child(1, "nginx:1"), "b": _child(1, "nginx:1"), "c": _child(1, "nginx:1")}
    after = {"a": _child(2, "nginx:2"), "b": _child(2, "nginx:1"), "c": _child(1, "nginx:1", service_fields="x")}
    assert upgrade_problems(before, after, []) == [
        "a: pod template changed at spec.template.spec.containers[web].image (generation 1 -> 2)",
        "b: generation 1 -> 2 with the same pod template",
        "c: HEAD's operator wrote to the converged Service",
    ]
    declared = ["spec.template.spec.containers[web].image"]
    assert upgrade_problems({"a": before["a"]}, {"a": after["a"]}, declared) == []
    assert upgrade_problems(before, before, []) == []
