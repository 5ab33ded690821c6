"""ServiceAccounts bound to the repository's own ClusterRoles, and their tokens: identities for RBAC-true tests.

Why the repository's roles (config/rbac/*.yaml, or the chart's rendered ones) and not hand-written ones: the test
then proves that what users install grants what is needed, and no more. Tokens come from the TokenRequest API
(``kubectl create token``), as a pod's projected token does. ``ClusterRoleBindings.cleanup`` deletes the
cluster-scoped objects it created (namespaced ones go with the test namespace).
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import yaml

from tests.support.cluster import Cluster


def cluster_role_from(path: Path) -> dict[str, Any]:
    """The ClusterRole in ``path`` (a config/rbac file)."""
    role: dict[str, Any] = yaml.safe_load(path.read_text())
    assert role["kind"] == "ClusterRole", f"{path} holds a {role['kind']}, not a ClusterRole"
    return role


def service_account_token(cluster: Cluster, *, namespace: str, name: str, create: bool = True) -> str:
    """A TokenRequest token of ServiceAccount ``namespace/name`` (created first unless ``create=False``)."""
    if create:
        cluster.kubectl("create", "serviceaccount", name, "-n", namespace)
    return cluster.kubectl("create", "token", name, "-n", namespace, "--duration=1h").stdout.strip()


class ClusterRoleBindings:
    """Binds ServiceAccounts to copies of ClusterRoles (uniquely named, so parallel runs never share one)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.suffix = uuid.uuid4().hex[:6]
        self._created: list[tuple[str, str]] = []

    def bind(self, role: dict[str, Any], *, namespace: str, serviceaccount: str) -> str:
        """Create a copy of ``role`` and bind ``namespace/serviceaccount`` to it; return the copy's name."""
        copied = copy.deepcopy(role)
        name = f"{role['metadata']['name']}-{serviceaccount}-{self.suffix}"
        copied["metadata"] = {"name": name, "labels": {"webserver-operator.dev/test": "true"}}
        self.cluster.apply(copied)
        self._created.append(("clusterrole", name))
        self.cluster.kubectl(
            "create",
            "clusterrolebinding",
            name,
            f"--clusterrole={name}",
            f"--serviceaccount={namespace}:{serviceaccount}",
        )
        self._created.append(("clusterrolebinding", name))
        return name

    def cleanup(self) -> None:
        for kind, name in reversed(self._created):
            self.cluster.kubectl("delete", kind, name, "--ignore-not-found", check=False)
        self._created.clear()
