"""Who the operators run as: audited ServiceAccounts with the project's own RBAC, their tokens, and APF starvation.

Why ServiceAccounts of one fixed namespace: ``hack/audit-policy.yaml`` records every request of the group
``system:serviceaccounts:webserver-operator-audited``, reads and watches included, and each replica gets its own
ServiceAccount, so the audit log says which replica sent each request (the request rate, the 429s, the writes of a
deposed leader). The permissions are the ones users install (``config/rbac/role.yaml`` and
``leader_election_role.yaml``), not a cluster-admin shortcut that would hide a missing rule.

Tokens come from the TokenRequest API bound to a Secret, so deleting the Secret invalidates the token at once: that is
how a rotation is made to bite. The audit log names each token by its ``JTI`` (``user.extra``), which tells which
token a request used.

Sharded replicas (``--shards``) hold a member Lease of their own and the shard Leases, whose names depend on the
replica and the shard count, so the Lease rules limited by name do not cover them: ``grant(..., shard_leases=True)``
adds a Role of this harness's own (``<prefix>-shards``: get, list, create, update, delete on Leases in the audited
namespace, no names), the rule a sharded install needs. It lives here, not in config/rbac, so the unsharded runs keep
judging the RBAC users install.

API Priority and Fairness: ``starve`` installs a PriorityLevelConfiguration with zero nominal shares, no borrowing and
``Reject`` (the API server then runs at most one of its requests at a time and answers the rest 429 with
Retry-After), and a FlowSchema that sends the replicas' ServiceAccounts to it.

Used by ``scenario`` and ``faults``.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.kubeapi import KubeApi
from harness.paths import ROOT

AUDITED_NAMESPACE = "webserver-operator-audited"
"""Must match the userGroups of hack/audit-policy.yaml (system:serviceaccounts:<this namespace>)."""
STARVED = "chaos-starved"


def username(serviceaccount: str) -> str:
    return f"system:serviceaccount:{AUDITED_NAMESPACE}:{serviceaccount}"


def _rules(path: Path) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = yaml.safe_load(path.read_text())["rules"]
    return rules


SHARD_LEASE_RULES = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "list", "create", "update", "delete"],
    }
]


async def grant(
    api: KubeApi, *, prefix: str, serviceaccounts: list[str], lease_name: str, shard_leases: bool = False
) -> None:
    """The ServiceAccounts, bound to the operator's ClusterRole rules and to the Lease Role in the audited namespace.

    ``shard_leases``: also the Role for member and shard Leases (``SHARD_LEASE_RULES``) that sharded replicas need.
    """
    await api.apply_object(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": AUDITED_NAMESPACE}}
    )
    manager_rules = _rules(ROOT / "config" / "rbac" / "role.yaml")
    lease_rules = _rules(ROOT / "config" / "rbac" / "leader_election_role.yaml")
    for rule in lease_rules:
        if "resourceNames" in rule:
            rule["resourceNames"] = [lease_name]
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    await api.apply_object(
        f"{rbac}/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": prefix},
            "rules": manager_rules,
        },
    )
    await api.apply_object(
        f"{rbac}/namespaces/{AUDITED_NAMESPACE}/roles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": prefix},
            "rules": lease_rules,
        },
    )
    subjects = [{"kind": "ServiceAccount", "name": sa, "namespace": AUDITED_NAMESPACE} for sa in serviceaccounts]
    for sa in serviceaccounts:
        await api.apply_object(
            f"/api/v1/namespaces/{AUDITED_NAMESPACE}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}},
        )
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "name": prefix}
    if shard_leases:
        await _namespaced_role(api, f"{prefix}-shards", SHARD_LEASE_RULES, subjects)
    await api.apply_object(
        f"{rbac}/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": prefix},
            "roleRef": {**role_ref, "kind": "ClusterRole"},
            "subjects": subjects,
        },
    )
    await api.apply_object(
        f"{rbac}/namespaces/{AUDITED_NAMESPACE}/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": prefix},
            "roleRef": {**role_ref, "kind": "Role"},
            "subjects": subjects,
        },
    )


async def _namespaced_role(
    api: KubeApi, name: str, rules: list[dict[str, Any]], subjects: list[dict[str, str]]
) -> None:
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{AUDITED_NAMESPACE}"
    meta = {"name": name}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules}
    await api.apply_object(f"{rbac}/roles", role)
    await api.apply_object(
        f"{rbac}/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subjects,
        },
    )


async def revoke(api: KubeApi, *, prefix: str, serviceaccounts: list[str]) -> None:
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    await api.delete(f"{rbac}/namespaces/{AUDITED_NAMESPACE}/rolebindings/{prefix}-shards")
    await api.delete(f"{rbac}/namespaces/{AUDITED_NAMESPACE}/roles/{prefix}-shards")
    await api.delete(f"{rbac}/clusterrolebindings/{prefix}")
    await api.delete(f"{rbac}/clusterroles/{prefix}")
    await api.delete(f"{rbac}/namespaces/{AUDITED_NAMESPACE}/rolebindings/{prefix}")
    await api.delete(f"{rbac}/namespaces/{AUDITED_NAMESPACE}/roles/{prefix}")
    for sa in serviceaccounts:
        await api.delete(f"/api/v1/namespaces/{AUDITED_NAMESPACE}/serviceaccounts/{sa}")


@dataclass(frozen=True)
class Token:
    value: str
    jti: str
    secret: str  # deleting this Secret invalidates the token


async def issue_token(api: KubeApi, serviceaccount: str, *, secret: str, seconds: int = 7200) -> Token:
    """A TokenRequest token for ``serviceaccount`` bound to a new Secret ``secret``."""
    ns_path = f"/api/v1/namespaces/{AUDITED_NAMESPACE}"
    bound = await api.apply_object(
        f"{ns_path}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret}, "type": "Opaque"},
    )
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": seconds,
            "boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": secret, "uid": bound["metadata"]["uid"]},
        },
    }
    result = await api.create(f"{ns_path}/serviceaccounts/{serviceaccount}/token", request)
    value = str(result["status"]["token"])
    return Token(value=value, jti=_jti(value), secret=secret)


async def invalidate(api: KubeApi, token: Token) -> None:
    await api.delete(f"/api/v1/namespaces/{AUDITED_NAMESPACE}/secrets/{token.secret}")


def _jti(token: str) -> str:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["jti"])


def write_kubeconfig(path: Path, *, server: str, ca_file: str, token: str) -> Path:
    """A kubeconfig that authenticates with ``token`` (the ServiceAccount) against ``server``."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "chaos", "cluster": {"server": server, "certificate-authority": ca_file}}],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "chaos", "context": {"cluster": "chaos", "user": "operator"}}],
        "current-context": "chaos",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass(frozen=True)
class ServiceAccountDir:
    """What kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount: token, ca.crt, namespace."""

    path: Path

    def populate(self, *, token: str, ca_file: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "ca.crt").write_bytes(Path(ca_file).read_bytes())
        (self.path / "namespace").write_text(AUDITED_NAMESPACE)
        self.rotate(token)

    def rotate(self, token: str) -> None:
        """Replace the token file atomically, as kubelet does when it refreshes a projected token."""
        tmp = self.path / ".token.new"
        tmp.write_text(token)
        os.replace(tmp, self.path / "token")


async def starve(api: KubeApi, serviceaccounts: list[str]) -> None:
    """Send every request of ``serviceaccounts`` to a priority level with no concurrency of its own (429s)."""
    fc = "/apis/flowcontrol.apiserver.k8s.io/v1"
    await api.apply_object(
        f"{fc}/prioritylevelconfigurations",
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": STARVED},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 0,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
                    "limitResponse": {"type": "Reject"},
                },
            },
        },
    )
    subjects = [
        {"kind": "ServiceAccount", "serviceAccount": {"name": sa, "namespace": AUDITED_NAMESPACE}}
        for sa in serviceaccounts
    ]
    await api.apply_object(
        f"{fc}/flowschemas",
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": STARVED},
            "spec": {
                "priorityLevelConfiguration": {"name": STARVED},
                "matchingPrecedence": 100,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": subjects,
                        "resourceRules": [
                            {
                                "verbs": ["*"],
                                "apiGroups": ["*"],
                                "resources": ["*"],
                                "namespaces": ["*"],
                                "clusterScope": True,
                            }
                        ],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        },
    )


async def unstarve(api: KubeApi) -> None:
    fc = "/apis/flowcontrol.apiserver.k8s.io/v1"
    await api.delete(f"{fc}/flowschemas/{STARVED}")
    await api.delete(f"{fc}/prioritylevelconfigurations/{STARVED}")
