"""Chart rendering helpers and the expectations shared by the chart, kustomize and manifest tests.

The RBAC rules the operator needs and the restricted Pod Security checklist live here once, so the unit tests
(rendered templates), the kustomize tests and the integration tests (real API server) check the same thing.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.paths import CHART, tools_bin
from tests.support.markers import require_tools_marker

RELEASE = "rel"
NAMESPACE = "ops"
FULLNAME = f"{RELEASE}-webserver-operator"
LEASE = f"{FULLNAME}-leader"
GROUP = "web.webserver-operator.dev"
KUSTOMIZE_NAMESPACE = "webserver-operator-system"
"""Where config/default installs the operator (kubebuilder's ``<project>-system``)."""
KUSTOMIZE_PREFIX = "webserver-operator-"
"""config/default's ``namePrefix``."""

Rule = tuple[str, str, str]

# Exactly what the operator does, as (apiGroup, resource, verb). Anything more is a privilege it does not need,
# anything less breaks it on some cluster.
MANAGER_RULES: frozenset[Rule] = frozenset(
    {(GROUP, "webservers", v) for v in ("get", "list", "watch")}
    | {(GROUP, "webservers/status", "update")}
    | {(GROUP, "webservers/finalizers", "update")}
    | {("apps", "deployments", v) for v in ("get", "list", "watch", "create", "patch")}
    | {("", "services", v) for v in ("get", "list", "watch", "create", "patch")}
    | {("policy", "poddisruptionbudgets", v) for v in ("get", "list", "watch", "create", "patch", "delete")}
    | {("", "events", v) for v in ("list", "create", "patch")}
)
# Unsharded: get and update the leader Lease (by name), create it, and list the Leases of the release namespace to
# see whether sharded replicas still hold shard Leases (a change of --shards in progress; list cannot be limited by
# name).
LEADER_ELECTION_RULES: frozenset[Rule] = frozenset(
    {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update", "list")}
)
# Sharded (--shards > 1): every replica lists the shard and member Leases by label, creates and renews them, and
# deletes member Leases (its own on shutdown, dead replicas' ones); member Lease names are not known in advance.
SHARDED_LEADER_ELECTION_RULES: frozenset[Rule] = frozenset(
    {("coordination.k8s.io", "leases", v) for v in ("get", "list", "create", "update", "delete")}
)
# Secure metrics: the operator reviews each scraper's token and its right to get /metrics (cluster-scoped reviews).
METRICS_AUTH_RULES: frozenset[Rule] = frozenset(
    {("authentication.k8s.io", "tokenreviews", "create"), ("authorization.k8s.io", "subjectaccessreviews", "create")}
)
OPERATOR_RULES: frozenset[Rule] = MANAGER_RULES | LEADER_ELECTION_RULES | METRICS_AUTH_RULES

# What people get on WebServers through the aggregated ClusterRoles (chart and config/rbac): readers see WebServers,
# their status and scale; editors and admins also create, change, scale and delete them. Nobody but the operator
# writes status, nobody touches finalizers.
USER_READ_RULES: frozenset[Rule] = frozenset(
    (GROUP, resource, verb)
    for resource in ("webservers", "webservers/status", "webservers/scale")
    for verb in ("get", "list", "watch")
)
USER_WRITE_RULES: frozenset[Rule] = frozenset(
    {(GROUP, "webservers", v) for v in ("create", "update", "patch", "delete", "deletecollection")}
    | {(GROUP, "webservers/scale", v) for v in ("update", "patch")}
)
# role suffix -> (the Kubernetes user-facing role it aggregates into, its rules)
USER_ROLES: dict[str, tuple[str, frozenset[Rule]]] = {
    "webserver-viewer": ("view", USER_READ_RULES),
    "webserver-editor": ("edit", USER_READ_RULES | USER_WRITE_RULES),
    "webserver-admin": ("admin", USER_READ_RULES | USER_WRITE_RULES),
}
AGGREGATE_LABEL = "rbac.authorization.k8s.io/aggregate-to-{}"

# Pod Security Standards, restricted profile (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
_RESTRICTED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


# --- helpers shared with the other chart/manifest tests -----------------------------------------------------------


def built_tool(name: str) -> Path:
    """A binary built by `make tools` (helm, kubectl...); fails the test (never skips) when it is missing.

    Only tests marked ``tools`` (or integration/e2e) may ask: `make test-unit` deselects exactly those.
    """
    require_tools_marker(name)
    try:
        path = tools_bin() / name
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.fail(f"cannot locate the tools cache ({err}): run `make tools`", pytrace=False)
    if not path.is_file():
        pytest.fail(f"{name} not found at {path}: run `make tools`", pytrace=False)
    return path


def helm_binary() -> Path:
    return built_tool("helm")


def kubectl_binary() -> Path:
    """kubectl has `kubectl kustomize` built in."""
    return built_tool("kubectl")


def docs_of(text: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML stream (helm template, kubectl kustomize), empty documents left out."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def helm_template(
    *args: str,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    values: Mapping[str, Any] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`helm template` of the chart; ``values`` are passed as a values file on stdin (``-f -``)."""
    cmd = [str(helm_binary()), "template", release, str(CHART), "--namespace", namespace]
    if values is not None:
        cmd += ["-f", "-"]
    cmd += args
    stdin = None if values is None else json.dumps(values)
    result = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"helm template {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def render(
    *args: str, release: str = RELEASE, namespace: str = NAMESPACE, values: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The chart's objects (including `helm test` hooks) for the given --set/-f arguments and ``values``."""
    return docs_of(helm_template(*args, release=release, namespace=namespace, values=values).stdout)


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize <directory>` offline: the objects a kustomization renders."""
    result = subprocess.run(
        [str(kubectl_binary()), "kustomize", str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed: {result.stderr}"
    return docs_of(result.stdout)


def find(docs: Iterable[Mapping[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [dict(d) for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: Iterable[Mapping[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
    return found[0]


def rule_triples(rules: Iterable[Mapping[str, Any]]) -> set[Rule]:
    """Flatten RBAC rules into (apiGroup, resource, verb); wildcards and non-resource URLs are errors."""
    out: set[Rule] = set()
    for rule in rules:
        assert "nonResourceURLs" not in rule, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    assert "*" not in (group, resource, verb), f"wildcard in {rule}"
                    out.add((group, resource, verb))
    return out


def _containers(spec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def restricted_violations(spec: Mapping[str, Any]) -> list[str]:
    """Everything in a pod spec that the `restricted` Pod Security Standard forbids (baseline included)."""
    problems: list[str] = []
    pod_sc = spec.get("securityContext") or {}
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(host):
            problems.append(f"{host} is set")
    for volume in spec.get("volumes") or []:
        types = set(volume) - {"name"}
        if not types <= _RESTRICTED_VOLUME_TYPES:
            problems.append(f"volume {volume['name']} uses {sorted(types - _RESTRICTED_VOLUME_TYPES)}")
    if pod_sc.get("runAsUser") == 0:
        problems.append("pod runAsUser is 0")
    if pod_sc.get("sysctls"):
        problems.append("pod sets sysctls")
    if pod_sc.get("seLinuxOptions", {}).get("type") not in (None, "container_t", "container_init_t", "container_kvm_t"):
        problems.append("pod seLinuxOptions.type is not allowed")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    if pod_seccomp not in (None, "RuntimeDefault", "Localhost"):
        problems.append(f"pod seccompProfile is {pod_seccomp}")
    if pod_sc.get("appArmorProfile", {}).get("type") == "Unconfined":
        problems.append("pod appArmorProfile is Unconfined")
    for c in _containers(spec):
        name = c["name"]
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            problems.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"{name}: capabilities.drop lacks ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: adds capabilities {caps.get('add')}")
        run_as_non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if run_as_non_root is not True:
            problems.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser") == 0:
            problems.append(f"{name}: runAsUser is 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccompProfile is {seccomp}")
        if sc.get("procMount") not in (None, "Default"):
            problems.append(f"{name}: procMount {sc['procMount']}")
        if sc.get("appArmorProfile", {}).get("type") == "Unconfined":
            problems.append(f"{name}: appArmorProfile is Unconfined")
        if sc.get("windowsOptions", {}).get("hostProcess"):
            problems.append(f"{name}: hostProcess")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                problems.append(f"{name}: hostPort {port['hostPort']}")
    return problems


def hardening_problems(spec: Mapping[str, Any]) -> list[str]:
    """What this project asks beyond `restricted`: the image's own non-root user, read-only root with /tmp, resources,
    probes.

    No fixed runAsUser/runAsGroup: the image runs as 65532 (Dockerfile USER), runAsNonRoot makes the kubelet check
    it, and platforms that pick a UID per namespace (OpenShift restricted-v2) reject a fixed one.
    """
    problems: list[str] = []
    pod_sc = spec.get("securityContext") or {}
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    for c in spec["containers"]:
        name = c["name"]
        sc = c.get("securityContext") or {}
        for field in ("runAsUser", "runAsGroup"):
            if field in sc or field in pod_sc:
                problems.append(f"{name}: {field} is hard-coded (the image's user must apply)")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{name}: readOnlyRootFilesystem is not true")
        tmp = [m for m in c.get("volumeMounts") or [] if m["mountPath"] == "/tmp"]
        if len(tmp) != 1 or "emptyDir" not in volumes.get(tmp[0]["name"], {}):
            problems.append(f"{name}: /tmp is not an emptyDir")
        resources = c.get("resources") or {}
        for part in ("requests", "limits"):
            if not {"cpu", "memory"} <= set(resources.get(part) or {}):
                problems.append(f"{name}: resources.{part} lacks cpu or memory")
        probes = {
            kind: (c.get(kind) or {}).get("httpGet", {}).get("path") for kind in ("livenessProbe", "readinessProbe")
        }
        if probes != {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}:
            problems.append(f"{name}: probes are {probes}")
    return problems


def flag_values_of(args: Iterable[str], flag: str) -> list[str]:
    return [a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")]


def deployment_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(docs, "Deployment", FULLNAME)


def manager_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = deployment_of(docs)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["manager"]
    return dict(containers[0])


def user_roles_of(docs: Iterable[Mapping[str, Any]], prefix: str) -> dict[str, tuple[str, frozenset[Rule]]]:
    """The aggregated user ClusterRoles among ``docs``: {suffix: (aggregated-into role, rules)}, shaped as USER_ROLES.

    Each must carry exactly one aggregate-to-* label.
    """
    found: dict[str, tuple[str, frozenset[Rule]]] = {}
    for doc in docs:
        name = doc["metadata"]["name"]
        if doc["kind"] != "ClusterRole" or not name.startswith(prefix) or name[len(prefix) :] not in USER_ROLES:
            continue
        labels = doc["metadata"].get("labels") or {}
        targets = [k.rsplit("-", 1)[1] for k, v in labels.items() if k.startswith(AGGREGATE_LABEL.format("")) and v]
        assert len(targets) == 1, f"{name}: aggregate-to labels {targets}"
        assert labels[AGGREGATE_LABEL.format(targets[0])] == "true", name
        found[name[len(prefix) :]] = (targets[0], frozenset(rule_triples(doc["rules"])))
    return found


def granted_of(docs: list[dict[str, Any]], service_account: str) -> dict[str | None, set[Rule]]:
    """Rules bound to the ServiceAccount: {namespace or None (cluster-wide): triples}."""
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs}
    granted: dict[str | None, set[Rule]] = {}
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        subjects = binding["subjects"]
        assert subjects == [{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}], subjects
        ref = binding["roleRef"]
        ns = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        role = roles[(ref["kind"], None if ref["kind"] == "ClusterRole" else ns, ref["name"])]
        granted.setdefault(ns, set()).update(rule_triples(role["rules"]))
    return granted


# --- lint and render ------------------------------------------------------------------------------------------------
