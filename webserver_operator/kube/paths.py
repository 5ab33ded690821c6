"""REST paths read back: which resource, namespace and object a path addresses, and the RBAC verb a request needs.

Why: a 403 should tell a person exactly which rule is missing (``verb`` on ``resource`` in ``group``), and the
request only knows its method and path. The inverse of ``core.resources.Resource.path``.

Used by ``kube.errors`` to word its messages.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PathInfo", "parse_path", "rbac_verb"]

# Subresources of a Namespace object: /api/v1/namespaces/<name>/<sub> (not a namespaced resource called <sub>).
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True)
class PathInfo:
    """What a REST path addresses (the inverse of ``Resource.path``), used to word error messages."""

    group: str
    version: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_path(path: str) -> PathInfo | None:
    """Parse ``/api/v1/...`` or ``/apis/<group>/<version>/...``; ``None`` for anything else (``/version``...)."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES):
        namespace, rest = rest[1], rest[2:]
    return PathInfo(
        group=group,
        version=version,
        resource=rest[0],
        namespace=namespace,
        name=rest[1] if len(rest) > 1 else None,
        subresource=rest[2] if len(rest) > 2 else None,
    )


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def rbac_verb(method: str, path: str, *, watch: bool = False) -> str:
    """The RBAC verb the API server checks for ``method`` on ``path`` (get/list/watch/create/.../deletecollection)."""
    method = method.upper()
    if method in _VERBS:
        return _VERBS[method]
    info = parse_path(path)
    has_name = info is not None and info.name is not None
    if method == "DELETE":
        return "delete" if has_name else "deletecollection"
    if watch:
        return "watch"
    return "get" if has_name or info is None else "list"
