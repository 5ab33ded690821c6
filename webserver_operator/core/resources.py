"""Kubernetes resource coordinates and the REST paths built from them; the built-in kinds the operator touches.

Why our own tiny type instead of kubernetes_asyncio's generated ``*Api`` classes: the operator talks JSON dicts
end to end (see ``webserver_operator.kube.client``), and a path is all the client needs. One ``Resource`` value per
kind keeps group/version/plural spelling in one place, and ``path()`` refuses the combinations the API server would
answer with a confusing 404 (a name without a namespace for a namespaced kind, a namespace for a cluster-scoped one).
Generic: the WebServer's own coordinates are declared with its API (``api.models.WEBSERVERS``).

Used by every layer that builds a path; ``kube.paths`` reads paths back to word 403 messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

__all__ = ["DEPLOYMENTS", "EVENTS", "LEASES", "NAMESPACES", "PODDISRUPTIONBUDGETS", "SERVICES", "Resource"]


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
PODDISRUPTIONBUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
