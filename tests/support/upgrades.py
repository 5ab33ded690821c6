"""What an operator upgrade may change in the pod templates it renders: the CHANGELOG's word against the cluster's.

Why: a new operator version that renders a WebServer's pod template even slightly differently rolls out every
WebServer's pods at once on upgrade. tests/integration/test_upgrade.py records the Deployments a previous release
converged, upgrades the operator and diffs the templates; a changed field passes only when the CHANGELOG's
[Unreleased] upgrade notes name it on a line of the form

    - `pod-template: spec.template.spec.<field>` what changes, why, and how it rolls out

(docs/upgrades.md). Kept pure, apart from reading the file, so the parser and the diff are unit-tested too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
MARKER = re.compile(r"^\s*[-*]\s+`pod-template: ([^`\s]+)`", flags=re.MULTILINE)


def section(changelog: str, version: str) -> str:
    """The text of the changelog section ``## [<version>]`` (empty when there is none)."""
    for part in re.split(r"^## ", changelog, flags=re.MULTILINE)[1:]:
        if part.startswith(f"[{version}]"):
            return part
    return ""


def declared_template_changes(changelog: str, version: str = "Unreleased") -> list[str]:
    """The pod-template fields the upgrade notes of ``version`` declare as changed."""
    return MARKER.findall(section(changelog, version))


def template_changes(before: Any, after: Any, path: str = "spec.template") -> list[str]:
    """The leaf paths where two pod templates differ, e.g. ``spec.template.spec.containers[web].image``.

    Lists of named objects (containers, volumes, ports) are matched by name, so a reordering is not reported as a
    change of every element; other lists by position.
    """
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[str] = []
        for key in sorted(set(before) | set(after)):
            changes += template_changes(before.get(key), after.get(key), f"{path}.{key}")
        return changes
    if isinstance(before, list) and isinstance(after, list):
        if _named(before) and _named(after):
            old = {item["name"]: item for item in before}
            new = {item["name"]: item for item in after}
            changes = []
            for name in sorted(set(old) | set(new)):
                changes += template_changes(old.get(name), new.get(name), f"{path}[{name}]")
            return changes
        if len(before) == len(after):
            changes = []
            for index, (old_item, new_item) in enumerate(zip(before, after, strict=True)):
                changes += template_changes(old_item, new_item, f"{path}[{index}]")
            return changes
    return [] if before == after else [path]


def _named(items: list[Any]) -> bool:
    return all(isinstance(item, dict) and isinstance(item.get("name"), str) for item in items)


def undeclared(changes: list[str], declared: list[str]) -> list[str]:
    """The changed paths no declared field covers (a declared field covers itself and everything below it)."""
    return [
        change
        for change in changes
        if not any(change == field or change.startswith((f"{field}.", f"{field}[")) for field in declared)
    ]


def _operator_entry(obj: dict[str, Any], field_manager: str) -> list[dict[str, Any]]:
    return [e for e in obj["metadata"].get("managedFields") or [] if e.get("manager") == field_manager]


def children_state(
    deployments: list[dict[str, Any]], services: list[dict[str, Any]], names: list[str], *, field_manager: str
) -> dict[str, dict[str, Any]]:
    """Per WebServer ``name``: its Deployment's generation, pod template and ``field_manager``'s managedFields entry,
    and its Service's entry, from the objects as ``kubectl get --show-managed-fields`` lists them."""
    by_name = {d["metadata"]["name"]: d for d in deployments}
    service_by_name = {s["metadata"]["name"]: s for s in services}
    return {
        name: {
            "generation": by_name[name]["metadata"]["generation"],
            "template": by_name[name]["spec"]["template"],
            "deployment_fields": _operator_entry(by_name[name], field_manager),
            "service_fields": _operator_entry(service_by_name[name], field_manager),
        }
        for name in names
    }


def upgrade_problems(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], declared: list[str]
) -> list[str]:
    """What an upgrade did to converged children that it may not: an undeclared pod-template change, a new
    generation with the same template, an operator write to a Deployment whose template did not change or to a
    Service. ``before`` and ``after`` come from ``children_state``; ``declared`` from ``declared_template_changes``."""
    problems: list[str] = []
    for name in before:
        changed = template_changes(before[name]["template"], after[name]["template"])
        unnamed = undeclared(changed, declared)
        generations = f"generation {before[name]['generation']} -> {after[name]['generation']}"
        if unnamed:
            problems.append(f"{name}: pod template changed at {', '.join(unnamed)} ({generations})")
        elif not changed and after[name]["generation"] != before[name]["generation"]:
            problems.append(f"{name}: {generations} with the same pod template")
        if not changed and after[name]["deployment_fields"] != before[name]["deployment_fields"]:
            problems.append(f"{name}: HEAD's operator wrote to the converged Deployment")
        if after[name]["service_fields"] != before[name]["service_fields"]:
            problems.append(f"{name}: HEAD's operator wrote to the converged Service")
    return problems
