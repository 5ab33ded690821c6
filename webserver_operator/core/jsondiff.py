"""Compare two JSON objects once: the fields that differ (for people) and the RFC 7386 merge patch (for the API).

Why one pass for both: the reconciler needs to know *what* drifted (logs, Events, the drift-repair metric) and to
send exactly that as a write. Computing them separately walked the same pair twice and could, in principle,
disagree; ``compare`` walks it once and returns both. Generic: nothing here knows which fields anyone owns
(``reconcile.owned`` decides that and hands over ``(live, merged)``).

The patch carries ``metadata.resourceVersion`` of ``live`` (optimistic concurrency: the API server rejects it with
409 if the object changed since it was read). Keys missing from ``merged`` become ``null``; lists are replaced
whole, as merge patches always do. Lists of named objects (containers, ports, imagePullSecrets, ownerReferences)
are matched by name in the field report, so a path says which entry changed.

Called by ``reconcile.reconciler`` once per child sync; hands on the ``Difference`` it writes and reports.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["ABSENT", "Difference", "FieldChange", "compare"]


class _Absent:
    """Marker for a field that is not there (distinct from a JSON null)."""

    def __repr__(self) -> str:
        return "absent"


ABSENT: Final = _Absent()
_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_MAX_VALUE_CHARS = 80


@dataclass(frozen=True)
class FieldChange:
    """One field that differs: its path (``spec.template.spec.containers[web].image``), old and new value.

    ``old`` / ``new`` are ``ABSENT`` when the field is missing on that side. ``str()`` gives a short line for logs and
    Events: ``spec.replicas (3 -> 5)``.
    """

    path: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.path} ({_short(self.old)} -> {_short(self.new)})"


@dataclass(frozen=True)
class Difference:
    """What ``compare`` found: the changed fields and the merge patch that makes them (``None`` when equal)."""

    changes: list[FieldChange] = field(default_factory=list)
    patch: dict[str, Any] | None = None

    @property
    def paths(self) -> list[str]:
        return [change.path for change in self.changes]


def compare(live: dict[str, Any], merged: dict[str, Any]) -> Difference:
    """The fields where ``merged`` differs from ``live``, and the merge patch turning ``live`` into ``merged``."""
    changes: list[FieldChange] = []
    patch = _walk(live, merged, "", changes)
    if not patch:
        return Difference()
    resource_version = (live.get("metadata") or {}).get("resourceVersion")
    if resource_version is not None:
        metadata = patch.get("metadata")
        if not isinstance(metadata, dict):
            metadata = patch["metadata"] = {}
        metadata["resourceVersion"] = resource_version
    return Difference(changes=changes, patch=patch)


def _walk(old: dict[str, Any], new: dict[str, Any], path: str, out: list[FieldChange]) -> dict[str, Any]:
    """The merge patch from ``old`` to ``new``, recording each changed field in ``out`` (old key order first)."""
    patch: dict[str, Any] = {}
    for key in [*old, *(k for k in new if k not in old)]:
        before, after = old.get(key, ABSENT), new.get(key, ABSENT)
        if before == after:
            continue
        where = _join(path, str(key))
        if after is ABSENT:
            patch[key] = None
            out.append(FieldChange(where, before, ABSENT))
        elif isinstance(before, dict) and isinstance(after, dict):
            patch[key] = _walk(before, after, where, out)
        else:
            patch[key] = copy.deepcopy(after)
            _describe(before, after, where, out)
    return patch


def _describe(old: Any, new: Any, path: str, out: list[FieldChange]) -> None:
    """Record a replaced value; lists of named entries are described entry by entry."""
    if isinstance(old, list) and isinstance(new, list):
        old_named, new_named = _by_name(old), _by_name(new)
        if old_named is not None and new_named is not None:
            before = len(out)
            for name in [*old_named, *(n for n in new_named if n not in old_named)]:
                _describe_entry(old_named.get(name, ABSENT), new_named.get(name, ABSENT), f"{path}[{name}]", out)
            if len(out) > before:
                return  # otherwise the entries are equal and only their order changed: report the list
    out.append(FieldChange(path, old, new))


def _describe_entry(old: Any, new: Any, path: str, out: list[FieldChange]) -> None:
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            _describe_entry(old.get(key, ABSENT), new.get(key, ABSENT), _join(path, str(key)), out)
        return
    _describe(old, new, path, out)


def _by_name(items: list[Any]) -> dict[str, Any] | None:
    """The list as ``{name: item}`` when every item is an object with a distinct string name, else None."""
    named: dict[str, Any] = {}
    for item in items:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or name in named:
            return None
        named[name] = item
    return named


def _join(path: str, key: str) -> str:
    if _SIMPLE_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."
