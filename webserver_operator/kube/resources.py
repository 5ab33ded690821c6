"""Kubernetes resource coordinates and the REST paths built from them.

Why our own tiny type instead of kubernetes_asyncio's generated ``*Api`` classes: the operator talks JSON dicts
end to end (see ``webserver_operator.kube.client``), and a path is all the client needs. One ``Resource`` value per
kind keeps group/version/plural spelling in one place, and ``path()`` refuses the combinations the API server would
answer with a confusing 404 (a name without a namespace for a namespaced kind, a namespace for a cluster-scoped one).

``parse_path`` and ``rbac_verb`` go the other way (path -> resource, method -> RBAC verb); ``errors`` uses them to
tell a person exactly which RBAC rule a 403 is missing.

Used by every layer that builds a path; ``kube.errors`` reads paths back to word 403 messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from webserver_operator.api import models

__all__ = [
    "DEPLOYMENTS",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "SERVICES",
    "WEBSERVERS",
    "PathInfo",
    "Resource",
    "parse_path",
    "rbac_verb",
]


def _segment(value: str, *, what: str) -> str:
    if not value or "/" in value:
        raise ValueError(f"invalid {what} {value!r}: must be a non-empty string without '/'")
    return quote(value, safe="")


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``group`` is ``""`` for the core API (``/api/v1``)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``apiVersion`` as written in manifests: ``v1`` for the core group, ``<group>/<version>`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, *, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """Build the REST path.

        ``namespace=None`` on a namespaced resource addresses all namespaces, which is only meaningful for
        list/watch; addressing a single object (``name``) of a namespaced resource therefore needs a namespace.
        """
        parts = [self.base_path]
        if namespace is not None:
            if not self.namespaced:
                raise ValueError(f"{self.kind} is cluster-scoped: do not pass a namespace")
            parts.append(f"namespaces/{_segment(namespace, what='namespace')}")
        elif name is not None and self.namespaced:
            raise ValueError(f"{self.kind} is namespaced: pass the namespace of {name!r}")
        parts.append(self.plural)
        if name is not None:
            parts.append(_segment(name, what="name"))
        if subresource is not None:
            if name is None:
                raise ValueError(f"subresource {subresource!r} needs an object name")
            parts.append(_segment(subresource, what="subresource"))
        return "/".join(parts)


DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
SERVICES = Resource("", "v1", "services", "Service")
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
#: Our custom resource; its coordinates come from the API models (the CRD's single source of truth).
WEBSERVERS = Resource(models.GROUP, models.VERSION, models.PLURAL, models.KIND)

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
