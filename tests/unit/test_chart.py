"""The Helm chart, rendered by the project's own helm: lint, least-privilege RBAC, restricted pod spec, values schema.

These tests need no cluster (tests/integration/test_manifests.py sends the same renders to a real API server), but
they do need the helm binary built by `make tools`: without it they fail, because a chart nobody rendered is a
chart nobody tested. The helpers at the top (expected RBAC, the restricted Pod Security checklist) are shared with
test_chart_kustomize.py and the integration tests.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import tools_bin
from webserver_operator import __version__
from webserver_operator.api.chart import CHART_CRD_PATH
from webserver_operator.api.crd import CRD_NAME, crd_manifest, render_crd_yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "webserver-operator"
RELEASE = "rel"
NAMESPACE = "ops"
FULLNAME = f"{RELEASE}-webserver-operator"
LEASE = f"{FULLNAME}-leader"
GROUP = "web.webserver-operator.dev"

Rule = tuple[str, str, str]

# Exactly what the operator does, as (apiGroup, resource, verb). Anything more is a privilege it does not need,
# anything less breaks it on some cluster.
MANAGER_RULES: frozenset[Rule] = frozenset(
    {(GROUP, "webservers", v) for v in ("get", "list", "watch")}
    | {(GROUP, "webservers/status", v) for v in ("get", "update", "patch")}
    | {(GROUP, "webservers/finalizers", "update")}
    | {("apps", "deployments", v) for v in ("get", "list", "watch", "create", "patch")}
    | {("", "services", v) for v in ("get", "list", "watch", "create", "patch")}
    | {("", "events", v) for v in ("create", "patch")}
)
LEADER_ELECTION_RULES: frozenset[Rule] = frozenset(
    {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}
)
OPERATOR_RULES: frozenset[Rule] = MANAGER_RULES | LEADER_ELECTION_RULES

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


def helm_binary() -> Path:
    """The helm built by `make tools`; fails the test (never skips) when it is missing."""
    try:
        path = tools_bin() / "helm"
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.fail(f"cannot locate the tools cache ({err}): run `make tools`", pytrace=False)
    if not path.is_file():
        pytest.fail(f"helm not found at {path}: run `make tools`", pytrace=False)
    return path


def kubectl_binary() -> Path:
    """The kubectl built by `make tools` (has `kubectl kustomize`); fails the test when it is missing."""
    try:
        path = tools_bin() / "kubectl"
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.fail(f"cannot locate the tools cache ({err}): run `make tools`", pytrace=False)
    if not path.is_file():
        pytest.fail(f"kubectl not found at {path}: run `make tools`", pytrace=False)
    return path


def helm_template(
    *args: str, release: str = RELEASE, namespace: str = NAMESPACE, check: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [str(helm_binary()), "template", release, str(CHART), "--namespace", namespace, *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"helm template {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def render(*args: str, release: str = RELEASE, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The chart's objects (including `helm test` hooks) for the given --set/-f arguments."""
    text = helm_template(*args, release=release, namespace=namespace).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


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
    """What this project asks beyond `restricted`: uid 65532, read-only root with /tmp, resources, probes."""
    problems: list[str] = []
    pod_sc = spec.get("securityContext") or {}
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    for c in spec["containers"]:
        name = c["name"]
        sc = c.get("securityContext") or {}
        if sc.get("runAsUser", pod_sc.get("runAsUser")) != 65532:
            problems.append(f"{name}: runAsUser is not 65532")
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


def _flag_values(args: Iterable[str], flag: str) -> list[str]:
    return [a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")]


def _deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(docs, "Deployment", FULLNAME)


def _manager(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = _deployment(docs)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["manager"]
    return dict(containers[0])


def _granted(docs: list[dict[str, Any]], service_account: str) -> dict[str | None, set[Rule]]:
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


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="defaults"),
        pytest.param(["--set", "watchNamespaces={team-a,team-b}"], id="watchNamespaces"),
        pytest.param(
            [
                "--set",
                "metrics.serviceMonitor.enabled=true,podDisruptionBudget.enabled=true,replicaCount=2",
                "--set",
                "crds.keep=false,image.digest=sha256:" + "a" * 64,
            ],
            id="everything-on",
        ),
        pytest.param(["--set", "crds.enabled=false,rbac.create=false,leaderElection.enabled=false"], id="minimal"),
    ],
)
def test_helm_lint_strict_is_clean(args: list[str]) -> None:
    result = subprocess.run(
        [str(helm_binary()), "lint", "--strict", str(CHART), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "[WARNING]" not in output, output
    assert "[ERROR]" not in output, output


def test_default_render_has_the_expected_objects() -> None:
    docs = render()
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == sorted(
        [
            ("ClusterRole", f"{FULLNAME}-manager"),
            ("ClusterRoleBinding", f"{FULLNAME}-manager"),
            ("CustomResourceDefinition", CRD_NAME),
            ("Deployment", FULLNAME),
            ("Pod", f"{FULLNAME}-healthz-test"),
            ("Role", f"{FULLNAME}-leader-election"),
            ("RoleBinding", f"{FULLNAME}-leader-election"),
            ("Service", f"{FULLNAME}-healthz-test"),
            ("Service", f"{FULLNAME}-metrics"),
            ("ServiceAccount", FULLNAME),
        ]
    )
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
    for doc in docs:
        expected = None if doc["kind"] in cluster_scoped else NAMESPACE
        assert doc["metadata"].get("namespace") == expected, doc["metadata"]
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_chart_version_matches_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == project["version"] == __version__


# --- the operator's pod -----------------------------------------------------------------------------------------------


def test_deployment_pod_spec_passes_restricted_pod_security() -> None:
    spec = _deployment(render())["spec"]["template"]["spec"]
    assert restricted_violations(spec) == []
    assert hardening_problems(spec) == []
    pod_sc = spec["securityContext"]
    assert pod_sc["runAsNonRoot"] is True
    assert pod_sc["runAsUser"] == 65532
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = spec["containers"][0]["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True


def test_deployment_defaults() -> None:
    docs = render()
    deployment = _deployment(docs)
    assert deployment["spec"]["replicas"] == 1
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    manager = _manager(docs)
    assert manager["image"] == f"ghcr.io/webserver-operator/webserver-operator:{__version__}"
    assert manager["imagePullPolicy"] == "IfNotPresent"
    args = manager["args"]
    assert "--leader-elect" in args
    assert _flag_values(args, "--leader-election-namespace") == [NAMESPACE]
    assert _flag_values(args, "--leader-election-id") == [LEASE]
    assert _flag_values(args, "--metrics-bind-address") == [":8080"]
    assert _flag_values(args, "--health-probe-bind-address") == [":8081"]
    assert _flag_values(args, "--log-format") == ["json"]
    assert _flag_values(args, "--log-level") == ["INFO"]
    assert not _flag_values(args, "--namespaces")
    ports = {p["name"]: p["containerPort"] for p in manager["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert manager[probe]["httpGet"]["port"] == "health"
    service = one(docs, "Service", f"{FULLNAME}-metrics")
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == FULLNAME


def test_every_flag_the_chart_passes_is_an_operator_setting() -> None:
    from webserver_operator.manager.settings import Settings  # noqa: PLC0415 - only this test needs it

    known = {"--" + name.replace("_", "-") for name in Settings.model_fields}
    known |= {"--no-" + name.replace("_", "-") for name, f in Settings.model_fields.items() if f.annotation is bool}
    for args in ([], ["--set", "watchNamespaces={a,b}"], ["--set", "leaderElection.enabled=false"]):
        for arg in _manager(render(*args))["args"]:
            assert arg.split("=", 1)[0] in known, arg


def test_values_reach_the_pod() -> None:
    values = {
        "replicaCount": 2,
        "logLevel": "DEBUG",
        "logFormat": "text",
        "workers": 8,
        "extraArgs": ["--resync-period=3600"],
        "extraEnv": [{"name": "WEBSERVER_OPERATOR_QPS", "value": "50"}],
        "podAnnotations": {"example.com/a": "1"},
        "podLabels": {"team": "web"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
        "priorityClassName": "system-cluster-critical",
        "imagePullSecrets": [{"name": "regcred"}],
        "image": {"repository": "registry.example/op", "tag": "dev", "pullPolicy": "Always"},
        "commonLabels": {"example.com/owner": "me"},
    }
    docs = _render_values(values)
    deployment = _deployment(docs)
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    manager = spec["containers"][0]
    assert deployment["spec"]["replicas"] == 2
    assert _flag_values(manager["args"], "--log-level") == ["DEBUG"]
    assert _flag_values(manager["args"], "--log-format") == ["text"]
    assert _flag_values(manager["args"], "--workers") == ["8"]
    assert manager["args"][-1] == "--resync-period=3600"
    assert {"name": "WEBSERVER_OPERATOR_QPS", "value": "50"} in manager["env"]
    assert pod["metadata"]["annotations"]["example.com/a"] == "1"
    assert pod["metadata"]["labels"]["team"] == "web"
    assert "team" not in deployment["spec"]["selector"]["matchLabels"]
    assert spec["nodeSelector"] == values["nodeSelector"]
    assert spec["tolerations"] == values["tolerations"]
    assert spec["affinity"] == values["affinity"]
    assert spec["topologySpreadConstraints"] == values["topologySpreadConstraints"]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert manager["image"] == "registry.example/op:dev"
    assert manager["imagePullPolicy"] == "Always"
    assert all(d["metadata"]["labels"]["example.com/owner"] == "me" for d in docs)


def _render_values(values: Mapping[str, Any], *args: str) -> list[dict[str, Any]]:
    cmd = [str(helm_binary()), "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", "-", *args]
    result = subprocess.run(cmd, input=json.dumps(values), capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_image_digest_wins_over_tag() -> None:
    digest = "sha256:" + "0123456789abcdef" * 4
    manager = _manager(render("--set", f"image.tag=ignored,image.digest={digest}"))
    assert manager["image"] == f"ghcr.io/webserver-operator/webserver-operator@{digest}"


def test_metrics_disabled_removes_the_service_and_port() -> None:
    docs = render("--set", "metrics.enabled=false")
    assert not find(docs, "Service", f"{FULLNAME}-metrics")
    manager = _manager(docs)
    assert _flag_values(manager["args"], "--metrics-bind-address") == [":0"]
    assert [p["name"] for p in manager["ports"]] == ["health"]


def test_more_replicas_need_leader_election() -> None:
    result = helm_template("--set", "replicaCount=2,leaderElection.enabled=false", check=False)
    assert result.returncode != 0
    assert "leaderElection.enabled" in result.stderr
    args = _manager(render("--set", "leaderElection.enabled=false"))["args"]
    assert "--no-leader-elect" in args
    assert "--leader-elect" not in args


# --- RBAC -----------------------------------------------------------------------------------------------------------


def test_rbac_grants_exactly_what_the_operator_uses_cluster_wide() -> None:
    docs = render()
    granted = _granted(docs, FULLNAME)
    assert granted == {None: set(MANAGER_RULES), NAMESPACE: set(LEADER_ELECTION_RULES)}
    assert set().union(*granted.values()) == OPERATOR_RULES
    cluster_role = one(docs, "ClusterRole")
    assert all("resourceNames" not in rule for rule in cluster_role["rules"])
    leader = one(docs, "Role", f"{FULLNAME}-leader-election")
    named = [r for r in leader["rules"] if "resourceNames" in r]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [LEASE],
            "verbs": ["get", "update"],
        }
    ]


def test_rbac_with_watch_namespaces_uses_one_role_per_namespace() -> None:
    docs = render("--set", "watchNamespaces={team-a,team-b}")
    assert not find(docs, "ClusterRole")
    assert not find(docs, "ClusterRoleBinding")
    granted = _granted(docs, FULLNAME)
    assert granted == {
        "team-a": set(MANAGER_RULES),
        "team-b": set(MANAGER_RULES),
        NAMESPACE: set(LEADER_ELECTION_RULES),
    }
    assert _flag_values(_manager(docs)["args"], "--namespaces") == ["team-a,team-b"]


def test_rbac_can_be_left_to_the_user() -> None:
    docs = render("--set", "rbac.create=false,serviceAccount.create=false,serviceAccount.name=existing")
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"):
        assert not find(docs, kind), kind
    assert _deployment(docs)["spec"]["template"]["spec"]["serviceAccountName"] == "existing"
    docs = render("--set", "leaderElection.enabled=false")
    assert not find(docs, "Role")
    assert _granted(docs, FULLNAME) == {None: set(MANAGER_RULES)}


# --- values schema ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting",
    [
        "unknownKey=1",
        "image.registry=docker.io",
        "crds.install=true",
        "leaderElection.namespace=x",
        "metrics.serviceMonitor.relabelings=x",
        "podDisruptionBudget.foo=1",
        "test.image=busybox",
    ],
)
def test_schema_rejects_unknown_keys(setting: str) -> None:
    result = helm_template("--set", setting, check=False)
    assert result.returncode != 0, f"{setting} was accepted"
    assert "additional properties" in result.stderr, result.stderr


@pytest.mark.parametrize(
    "setting",
    [
        "logLevel=verbose",
        "logFormat=xml",
        "watchNamespaces={Not_A_Namespace}",
        "image.pullPolicy=Sometimes",
        "image.digest=latest",
        "workers=0",
        "metrics.port=70000",
    ],
)
def test_schema_rejects_bad_values(setting: str) -> None:
    result = helm_template("--set", setting, check=False)
    assert result.returncode != 0, f"{setting} was accepted"


def test_schema_accepts_global_values() -> None:
    assert render("--set", "global.imageRegistry=example.com")
    assert _render_values({"global": {"anything": {"nested": True}, "list": [1, 2]}})


def test_schema_is_closed_at_every_level() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())

    def walk(node: Mapping[str, Any], path: str) -> Iterator[str]:
        if "properties" in node:
            if node.get("additionalProperties") is not False:
                yield path or "(root)"
            for key, child in node["properties"].items():
                if key != "global":
                    yield from walk(child, f"{path}.{key}".lstrip("."))
        if isinstance(node.get("items"), Mapping):
            yield from walk(node["items"], f"{path}[]")

    assert list(walk(schema, "")) == []
    assert "global" in schema["properties"]


def _schema_leaves(node: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """Value paths the chart documents: a schema node without `properties` is one value (e.g. resources)."""
    for key, child in node.get("properties", {}).items():
        if key == "global":
            continue
        full = f"{path}.{key}".lstrip(".")
        if "properties" in child:
            yield from _schema_leaves(child, full)
        else:
            yield full


def _values_paths(values: Mapping[str, Any], schema: Mapping[str, Any], path: str = "") -> Iterator[str]:
    for key, value in values.items():
        full = f"{path}.{key}".lstrip(".")
        child = schema["properties"][key]
        if "properties" in child:
            yield from _values_paths(value, child, full)
        else:
            yield full


def test_readme_values_yaml_and_schema_list_the_same_values() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    documented = re.findall(r"^\| `([^`]+)` \|", readme, flags=re.MULTILINE)
    leaves = list(_schema_leaves(schema))
    assert sorted(documented) == sorted(leaves), "README values table differs from values.schema.json"
    assert sorted(_values_paths(values, schema)) == sorted(leaves), "values.yaml differs from values.schema.json"
    assert "crds.keep=false" in readme
    assert "deletes **every" in readme


# --- the CRD --------------------------------------------------------------------------------------------------------


def test_chart_crd_file_is_the_generated_one() -> None:
    path = CHART / CHART_CRD_PATH
    assert path.is_file(), f"{path} missing: run `make manifests`"
    assert path.read_text(encoding="utf-8") == render_crd_yaml(), (
        f"{path.relative_to(ROOT)} is stale: run `make manifests` (it is generated from webserver_operator/api)"
    )
    committed = ROOT / "config" / "crd" / "bases" / CHART_CRD_PATH.name
    assert path.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8")


def test_rendered_crd_is_the_generated_crd_plus_helm_metadata() -> None:
    crd = one(render(), "CustomResourceDefinition")
    generated = crd_manifest()
    assert crd["apiVersion"] == generated["apiVersion"]
    assert crd["metadata"]["name"] == CRD_NAME
    # toYaml/fromYaml in the template must not change a single value (numbers, patterns, CEL rules).
    assert crd["spec"] == generated["spec"]
    assert generated["metadata"]["labels"].items() <= crd["metadata"]["labels"].items()
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


def test_crd_keep_and_enabled_switches() -> None:
    crd = one(render("--set", "crds.keep=false"), "CustomResourceDefinition")
    assert "helm.sh/resource-policy" not in (crd["metadata"].get("annotations") or {})
    assert not find(render("--set", "crds.enabled=false"), "CustomResourceDefinition")


def _notes(*args: str) -> str:
    cmd = [str(helm_binary()), "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("NOTES:", 1)[1]


def test_notes_warn_loudly_when_the_crd_is_not_kept() -> None:
    warning = _notes("--set", "crds.keep=false")
    assert "WARNING: crds.keep=false" in warning
    assert "EVERY WebServer" in warning
    assert "garbage collection" in warning
    kept = _notes()
    assert "WARNING" not in kept
    assert "helm.sh/resource-policy=keep" in kept


# --- optional objects -------------------------------------------------------------------------------------------------


def test_service_monitor_and_pdb_are_off_by_default() -> None:
    docs = render()
    assert not find(docs, "ServiceMonitor")
    assert not find(docs, "PodDisruptionBudget")


def test_service_monitor_selects_the_metrics_service() -> None:
    docs = render("--set", "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.labels.release=prom")
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service", f"{FULLNAME}-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("podDisruptionBudget.enabled=true", {"maxUnavailable": 1}),
        ("podDisruptionBudget.enabled=true,podDisruptionBudget.minAvailable=1", {"minAvailable": 1}),
        ("podDisruptionBudget.enabled=true,podDisruptionBudget.maxUnavailable=50%", {"maxUnavailable": "50%"}),
    ],
)
def test_pod_disruption_budget(setting: str, expected: dict[str, Any]) -> None:
    docs = render("--set", setting)
    pdb = one(docs, "PodDisruptionBudget")
    assert {k: v for k, v in pdb["spec"].items() if k != "selector"} == expected
    assert pdb["spec"]["selector"] == _deployment(docs)["spec"]["selector"]


# --- helm test --------------------------------------------------------------------------------------------------------


def test_helm_test_hook_checks_healthz() -> None:
    docs = render()
    pod = one(docs, "Pod", f"{FULLNAME}-healthz-test")
    service = one(docs, "Service", f"{FULLNAME}-healthz-test")
    for hook in (pod, service):
        assert hook["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert int(service["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        pod["metadata"]["annotations"]["helm.sh/hook-weight"]
    )
    selector = _deployment(docs)["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"][0]["targetPort"] == "health"
    assert not selector.items() <= pod["metadata"]["labels"].items(), "the test pod must not look like the operator"
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert restricted_violations(spec) == []
    command = spec["containers"][0]["command"]
    assert command[-1] == f"http://{FULLNAME}-healthz-test.{NAMESPACE}.svc:8081/healthz"
    assert spec["containers"][0]["image"] == _manager(docs)["image"]
    assert not find(render("--set", "test.enabled=false"), "Pod")


# --- the image --------------------------------------------------------------------------------------------------------


def test_dockerfile_and_chart_agree() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    user = re.search(r"^USER (\d+):(\d+)$", dockerfile, flags=re.MULTILINE)
    assert user, "the Dockerfile must set a numeric USER uid:gid"
    assert int(user[1]) == values["podSecurityContext"]["runAsUser"] == values["securityContext"]["runAsUser"]
    assert int(user[2]) == values["podSecurityContext"]["runAsGroup"]
    assert 'ENTRYPOINT ["webserver-operator", "run"]' in dockerfile
    assert re.search(r"^ARG PYTHON_VERSION=3\.11$", dockerfile, flags=re.MULTILINE)
    assert f"ARG VERSION={__version__}" in dockerfile
    kustomize = yaml.safe_load((ROOT / "config" / "manager" / "kustomization.yaml").read_text())
    assert kustomize["images"] == [
        {"name": "controller", "newName": values["image"]["repository"], "newTag": __version__}
    ]
