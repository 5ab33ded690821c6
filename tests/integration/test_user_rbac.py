"""People's rights on WebServers through Kubernetes' own roles, judged by a real API server.

The chart's (and config/rbac's) ClusterRoles webserver-viewer/-editor/-admin carry aggregate-to-view/edit/admin
labels; the controller-manager's aggregation controller copies their rules into `view`, `edit` and `admin`. Here
ServiceAccounts get nothing but a RoleBinding to `view`, `edit` or `admin` in a namespace, and then act with their
own tokens through kubectl, as a person would:

- an `edit` user creates, scales (the scale subresource, as `kubectl scale` does), patches and deletes WebServers,
  and `kubectl get all` works for them (WebServers are in the `all` category);
- a `view` user reads WebServers, their status and their scale, and is refused every write;
- neither can write status, and `kubectl auth can-i --list` shows exactly the rights in tests/support/chart.py's
  USER_ROLES on the WebServer API group, nothing more.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.paths import CONFIG
from tests.support.chart import GROUP, USER_ROLES, Rule, user_roles_of
from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver
from tests.support.manifests import helm_template, kustomize_overlay
from tests.support.rbac import can_i_list

KUBERNETES_ROLES = ("view", "edit", "admin")


@dataclass
class User:
    """A ServiceAccount bound to one of Kubernetes' user-facing roles in one namespace, with its own kubeconfig."""

    cluster: Cluster
    name: str
    namespace: str
    kubeconfig: Path

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.cluster.kubectl_path), "--kubeconfig", str(self.kubeconfig), "-n", self.namespace, *args]
        return subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=60, check=False)

    def ok(self, *args: str, input: str | None = None) -> str:
        result = self.kubectl(*args, input=input)
        assert result.returncode == 0, f"{self.name}: kubectl {' '.join(args)} failed: {result.stderr}"
        return result.stdout

    def refused(self, *args: str, input: str | None = None) -> None:
        result = self.kubectl(*args, input=input)
        assert result.returncode != 0, f"{self.name}: kubectl {' '.join(args)} was allowed: {result.stdout}"
        assert "Forbidden" in result.stderr or "forbidden" in result.stderr, result.stderr

    def webserver_rights(self) -> dict[Rule, set[str]]:
        user = f"system:serviceaccount:{self.namespace}:{self.name}"
        granted = can_i_list(self.cluster, user=user, namespace=self.namespace)
        return {rule: names for rule, names in granted.items() if rule[0] == GROUP}


def _user_roles_from_chart(cluster: Cluster, release: str) -> list[dict[str, Any]]:
    docs = helm_template(cluster, release, "default")
    return [d for d in docs if d["kind"] == "ClusterRole" and not d["metadata"]["name"].endswith("-manager")]


def _user_roles_from_config(cluster: Cluster, prefix: str, tmp_path: Path) -> list[dict[str, Any]]:
    docs = kustomize_overlay(cluster, tmp_path, {"namePrefix": prefix}, bases=(CONFIG / "rbac",))
    return [d for d in docs if d["kind"] == "ClusterRole" and "webserver-" in d["metadata"]["name"]]


def _aggregated_webserver_rules(cluster: Cluster, role: str) -> set[Rule]:
    rules = cluster.get_json("clusterrole", role).get("rules") or []
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups", [])
        if group == GROUP
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


def _wait_aggregated(cluster: Cluster, role: str, rules: frozenset[Rule]) -> None:
    wait_until(
        lambda: _aggregated_webserver_rules(cluster, role) == rules,
        timeout=30,
        message=f"ClusterRole {role} aggregating exactly the WebServer rules {sorted(rules)}",
    )


def _leftover_user_roles(cluster: Cluster) -> list[str]:
    """ClusterRoles on the WebServer group, aggregated into others, that some other install left behind."""
    return leftovers_of(cluster.get_json("clusterroles")["items"])


def leftovers_of(roles: list[dict[str, Any]]) -> list[str]:
    """The names of ``roles`` that aggregate WebServer rules into Kubernetes' roles.

    Roles with an ``aggregationRule`` are not counted: their rules are what the aggregation controller copied from
    the roles they select. Kubernetes' own ``edit`` is one (and is aggregated into ``admin``): right after another
    install was removed it still shows that install's WebServer rules until the controller catches up.
    """
    return [
        r["metadata"]["name"]
        for r in roles
        if "aggregationRule" not in r
        and any(k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in r["metadata"].get("labels") or {})
        and any(GROUP in rule.get("apiGroups", []) for rule in r.get("rules") or [])
    ]


def test_roles_that_kubernetes_aggregates_are_no_leftovers() -> None:
    """Kubernetes' ``edit`` still holding a removed install's rules is the controller catching up, not a leftover."""
    webserver_rule = {"apiGroups": [GROUP], "resources": ["webservers"], "verbs": ["get"]}
    edit = {
        "metadata": {"name": "edit", "labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
        "aggregationRule": {
            "clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}]
        },
        "rules": [webserver_rule],
    }
    editor = {
        "metadata": {
            "name": "other-webserver-editor",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"},
        },
        "rules": [webserver_rule],
    }
    unrelated = {
        "metadata": {"name": "foo-editor", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [{"apiGroups": ["foo.example"], "resources": ["foos"], "verbs": ["get"]}],
    }
    assert leftovers_of([edit, editor, unrelated]) == ["other-webserver-editor"]
    assert leftovers_of([edit]) == []


@pytest.fixture(params=["chart", "config"])
def user_roles(
    request: pytest.FixtureRequest, cluster: Cluster, crd: str, tmp_path: Path
) -> Iterator[list[dict[str, Any]]]:
    """The aggregated roles of one install path, applied to the cluster; Kubernetes' roles wait for their rules."""
    leftovers = _leftover_user_roles(cluster)
    assert not leftovers, (
        f"aggregated ClusterRoles on {GROUP} from another install are present ({leftovers}): they would hide whether "
        "these roles aggregate. Uninstall that release (or delete them) and run again."
    )
    tag = uuid.uuid4().hex[:6]
    if request.param == "chart":
        docs = _user_roles_from_chart(cluster, f"urbac-{tag}")
        prefix = f"urbac-{tag}-webserver-operator-"
    else:
        prefix = f"urbac-{tag}-"
        docs = _user_roles_from_config(cluster, prefix, tmp_path)
    assert user_roles_of(docs, prefix) == USER_ROLES
    cluster.apply(yaml.safe_dump_all(docs))
    try:
        expected = {"view": USER_ROLES["webserver-viewer"][1]}
        expected["edit"] = expected["view"] | USER_ROLES["webserver-editor"][1]
        expected["admin"] = expected["edit"] | USER_ROLES["webserver-admin"][1]
        for role, rules in expected.items():
            _wait_aggregated(cluster, role, rules)
        yield docs
    finally:
        for doc in docs:
            cluster.kubectl("delete", "clusterrole", doc["metadata"]["name"], "--ignore-not-found", check=False)


@pytest.fixture
def users(cluster: Cluster, namespace: str, tmp_path: Path) -> dict[str, User]:
    """One ServiceAccount per Kubernetes user-facing role, bound to it in the test namespace only."""
    out: dict[str, User] = {}
    for role in KUBERNETES_ROLES:
        name = f"{role}-user"
        cluster.kubectl("create", "serviceaccount", name, "-n", namespace)
        cluster.kubectl(
            "create",
            "rolebinding",
            name,
            f"--clusterrole={role}",
            f"--serviceaccount={namespace}:{name}",
            "-n",
            namespace,
        )
        path = cluster.serviceaccount_kubeconfig(namespace=namespace, serviceaccount=name, path=tmp_path / name)
        out[role] = User(cluster=cluster, name=name, namespace=namespace, kubeconfig=path)
    return out


def _spec(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = cluster.get_json("webserver", name, namespace=namespace)["spec"]
    return spec


@pytest.mark.usefixtures("user_roles")
def test_edit_user_creates_scales_patches_and_deletes_webservers(
    cluster: Cluster, namespace: str, users: dict[str, User]
) -> None:
    editor = users["edit"]
    editor.ok("create", "-f", "-", input=json.dumps(webserver("web", replicas=1)))
    editor.ok("scale", "webserver/web", "--replicas=3")
    assert _spec(cluster, namespace, "web")["replicas"] == 3
    scale = json.loads(editor.ok("get", "webserver/web", "--subresource=scale", "-o", "json"))
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 3
    editor.ok("patch", "webserver/web", "--type=merge", "-p", '{"spec":{"image":"nginx:1.28"}}')
    assert _spec(cluster, namespace, "web")["image"] == "nginx:1.28"
    listing = editor.ok("get", "all")
    assert "webserver.web.webserver-operator.dev/web" in listing, listing
    editor.refused("patch", "webserver/web", "--subresource=status", "--type=merge", "-p", '{"status":{"replicas":9}}')
    editor.ok("delete", "webserver/web", "--wait=false")
    wait_until(
        lambda: cluster.get_or_none("webserver", "web", namespace=namespace) is None,
        timeout=30,
        message="the WebServer the edit user deleted",
    )


@pytest.mark.usefixtures("user_roles")
def test_view_user_reads_webservers_and_their_status_and_writes_nothing(
    cluster: Cluster, namespace: str, users: dict[str, User]
) -> None:
    cluster.apply(webserver("web", replicas=2), namespace=namespace)
    status = {"observedGeneration": 1, "replicas": 2, "readyReplicas": 1, "selector": "app=web"}
    cluster.kubectl(
        "patch", "webserver/web", "-n", namespace, "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": status}),
    )  # fmt: skip
    viewer = users["view"]
    obj = json.loads(viewer.ok("get", "webserver/web", "-o", "json"))
    assert obj["spec"]["replicas"] == 2
    assert obj["status"]["readyReplicas"] == 1
    path = f"/apis/{GROUP}/v1/namespaces/{namespace}/webservers/web/status"
    assert json.loads(viewer.ok("get", "--raw", path))["status"]["replicas"] == 2
    scale = json.loads(viewer.ok("get", "webserver/web", "--subresource=scale", "-o", "json"))
    assert scale["status"] == {"replicas": 2, "selector": "app=web"}
    assert "webserver.web.webserver-operator.dev/web" in viewer.ok("get", "all")
    assert "webserver.web.webserver-operator.dev/web" in viewer.ok("get", "webservers", "-o", "name", "--watch=false")
    viewer.refused("create", "-f", "-", input=json.dumps(webserver("other")))
    viewer.refused("scale", "webserver/web", "--replicas=5")
    viewer.refused("patch", "webserver/web", "--type=merge", "-p", '{"spec":{"replicas":5}}')
    viewer.refused("patch", "webserver/web", "--subresource=status", "--type=merge", "-p", '{"status":{"replicas":9}}')
    viewer.refused("delete", "webserver/web")
    assert _spec(cluster, namespace, "web")["replicas"] == 2


@pytest.mark.usefixtures("user_roles")
def test_each_role_has_exactly_its_webserver_rights(users: dict[str, User]) -> None:
    expected = {
        "view": USER_ROLES["webserver-viewer"][1],
        "edit": USER_ROLES["webserver-editor"][1],
        "admin": USER_ROLES["webserver-admin"][1],
    }
    for role, user in users.items():
        granted = user.webserver_rights()
        assert set(granted) == set(expected[role]), (
            f"{role}: more {sorted(set(granted) - expected[role])}, missing {sorted(expected[role] - set(granted))}"
        )
        assert all(names == set() for names in granted.values()), f"{role}: rights limited to names: {granted}"
