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
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from harness.paths import CHART, ROOT
from tests.support.chart import (
    FULLNAME,
    LEADER_ELECTION_RULES,
    LEASE,
    MANAGER_RULES,
    METRICS_AUTH_RULES,
    NAMESPACE,
    OPERATOR_RULES,
    RELEASE,
    deployment_of,
    find,
    flag_values_of,
    granted_of,
    hardening_problems,
    helm_binary,
    helm_template,
    manager_of,
    one,
    render,
    restricted_violations,
    rule_triples,
)
from webserver_operator import __version__
from webserver_operator.api.chart import CHART_CRD_PATH
from webserver_operator.api.crd import CRD_NAME, crd_manifest, render_crd_yaml
from webserver_operator.api.models import WEBSERVERS

pytestmark = pytest.mark.tools


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
                "--set",
                "metrics.prometheusRule.enabled=true,metrics.grafanaDashboard.enabled=true",
                "--set",
                "strategy.type=Recreate,livenessProbe.periodSeconds=5",
            ],
            id="everything-on",
        ),
        pytest.param(["--set", "crds.enabled=false,rbac.create=false,leaderElection.enabled=false"], id="minimal"),
        pytest.param(["--set", "sharding.shards=8,replicaCount=3,metrics.prometheusRule.enabled=true"], id="sharded"),
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
            ("ClusterRole", f"{FULLNAME}-webserver-viewer"),
            ("ClusterRole", f"{FULLNAME}-webserver-editor"),
            ("ClusterRole", f"{FULLNAME}-webserver-admin"),
            ("ClusterRoleBinding", f"{FULLNAME}-manager"),
            ("ClusterRole", f"{FULLNAME}-metrics-auth"),
            ("ClusterRoleBinding", f"{FULLNAME}-metrics-auth"),
            ("ClusterRole", f"{FULLNAME}-metrics-reader"),
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
    spec = deployment_of(render())["spec"]["template"]["spec"]
    assert restricted_violations(spec) == []
    assert hardening_problems(spec) == []
    pod_sc = spec["securityContext"]
    assert pod_sc == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    sc = spec["containers"][0]["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True


def test_deployment_defaults() -> None:
    docs = render()
    deployment = deployment_of(docs)
    assert deployment["spec"]["replicas"] == 1
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    manager = manager_of(docs)
    assert manager["image"] == f"localhost/webserver-operator:{__version__}"
    assert manager["imagePullPolicy"] == "IfNotPresent"
    args = manager["args"]
    assert "--leader-elect" in args
    assert flag_values_of(args, "--leader-election-namespace") == [NAMESPACE]
    assert flag_values_of(args, "--leader-election-id") == [LEASE]
    assert flag_values_of(args, "--metrics-bind-address") == [":8443"]
    assert (
        "--metrics-secure" in args
    )  # HTTPS behind TokenReview/SubjectAccessReview (tests/unit/chart/test_chart_metrics.py)
    assert flag_values_of(args, "--health-probe-bind-address") == [":8081"]
    assert flag_values_of(args, "--log-format") == ["json"]
    assert flag_values_of(args, "--log-level") == ["INFO"]
    assert not flag_values_of(args, "--namespaces")
    ports = {p["name"]: p["containerPort"] for p in manager["ports"]}
    assert ports == {"metrics": 8443, "health": 8081}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert manager[probe]["httpGet"]["port"] == "health"
    service = one(docs, "Service", f"{FULLNAME}-metrics")
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8443, "targetPort": "metrics", "protocol": "TCP"}]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == FULLNAME


def test_every_flag_the_chart_passes_is_an_operator_setting() -> None:
    from webserver_operator.manager.configuration import setting_fields  # noqa: PLC0415 - only this test needs it

    known = {"--" + name.replace("_", "-") for name in setting_fields()}
    known |= {"--no-" + name.replace("_", "-") for name, f in setting_fields().items() if f.annotation is bool}
    for args in ([], ["--set", "watchNamespaces={a,b}"], ["--set", "leaderElection.enabled=false"]):
        for arg in manager_of(render(*args))["args"]:
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
    docs = render(values=values)
    deployment = deployment_of(docs)
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    manager = spec["containers"][0]
    assert deployment["spec"]["replicas"] == 2
    assert flag_values_of(manager["args"], "--log-level") == ["DEBUG"]
    assert flag_values_of(manager["args"], "--log-format") == ["text"]
    assert flag_values_of(manager["args"], "--workers") == ["8"]
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


@pytest.mark.parametrize(
    ("settings", "image"),
    [
        ([], "localhost/webserver-operator:{v}"),
        (["image.registry=ghcr.io/example"], "ghcr.io/example/webserver-operator:{v}"),
        (
            ["image.registry=ghcr.io/example", "global.imageRegistry=mirror.internal:5000"],
            "mirror.internal:5000/webserver-operator:{v}",
        ),
        (["global.imageRegistry=mirror.internal"], "mirror.internal/webserver-operator:{v}"),
        (["image.registry="], "webserver-operator:{v}"),
        # A repository that names its registry (the way the README told users to set it before image.registry).
        (["image.repository=registry.example/team/op"], "registry.example/team/op:{v}"),
        (["image.repository=localhost:5000/op", "global.imageRegistry=mirror.internal"], "localhost:5000/op:{v}"),
        (["image.repository=team/op", "image.registry=registry.example"], "registry.example/team/op:{v}"),
    ],
)
def test_image_registry_and_the_global_registry(settings: list[str], image: str) -> None:
    manager = manager_of(render(*[arg for s in settings for arg in ("--set", s)]))
    assert manager["image"] == image.format(v=__version__)


@pytest.mark.parametrize("setting", ["image.registry=https://ghcr.io", "global.imageRegistry=ghcr.io/Example"])
def test_schema_rejects_a_registry_that_is_no_image_name_prefix(setting: str) -> None:
    result = helm_template("--set", setting, check=False)
    assert result.returncode != 0, f"{setting} was accepted"


def test_image_digest_wins_over_tag() -> None:
    digest = "sha256:" + "0123456789abcdef" * 4
    manager = manager_of(render("--set", f"image.tag=ignored,image.digest={digest}"))
    assert manager["image"] == f"localhost/webserver-operator@{digest}"


def test_metrics_disabled_removes_the_service_and_port() -> None:
    docs = render("--set", "metrics.enabled=false")
    assert not find(docs, "Service", f"{FULLNAME}-metrics")
    manager = manager_of(docs)
    # "0" disables the endpoint; ":0" would mean "any free port" and serve metrics after all.
    assert flag_values_of(manager["args"], "--metrics-bind-address") == ["0"]
    assert not {"--metrics-secure", "--no-metrics-secure"} & set(manager["args"])
    assert [p["name"] for p in manager["ports"]] == ["health"]
    assert not find(docs, "ClusterRole", f"{FULLNAME}-metrics-auth")  # no metrics, no reviews


def _security_context_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (crd,) = find(docs, "CustomResourceDefinition", CRD_NAME)
    (version,) = crd["spec"]["versions"]
    context = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["securityContext"]
    rules: list[dict[str, Any]] = context.get("x-kubernetes-validations", [])
    return rules


def test_webservers_stay_within_baseline_unless_the_installation_opts_in() -> None:
    default = render()
    assert {r["fieldPath"] for r in _security_context_rules(default)} == {".capabilities.add", ".seccompProfile.type"}
    assert not flag_values_of(manager_of(default)["args"], "--pod-security-level")

    privileged = render("--set", "webServerPodSecurityLevel=privileged")
    assert _security_context_rules(privileged) == []
    assert flag_values_of(manager_of(privileged)["args"], "--pod-security-level") == ["privileged"]


def test_more_replicas_need_leader_election() -> None:
    result = helm_template("--set", "replicaCount=2,leaderElection.enabled=false", check=False)
    assert result.returncode != 0
    assert "leaderElection.enabled" in result.stderr
    args = manager_of(render("--set", "leaderElection.enabled=false"))["args"]
    assert "--no-leader-elect" in args
    assert "--leader-elect" not in args


# --- RBAC -----------------------------------------------------------------------------------------------------------


def test_rbac_grants_exactly_what_the_operator_uses_cluster_wide() -> None:
    docs = render()
    granted = granted_of(docs, FULLNAME)
    assert granted == {None: set(MANAGER_RULES | METRICS_AUTH_RULES), NAMESPACE: set(LEADER_ELECTION_RULES)}
    assert set().union(*granted.values()) == OPERATOR_RULES
    cluster_role = one(docs, "ClusterRole", f"{FULLNAME}-manager")
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
    assert not find(docs, "ClusterRole", f"{FULLNAME}-manager")
    # The only cluster-wide right left: the metrics reviews, which are cluster-scoped.
    assert [b["metadata"]["name"] for b in find(docs, "ClusterRoleBinding")] == [f"{FULLNAME}-metrics-auth"]
    granted = granted_of(docs, FULLNAME)
    assert granted == {
        None: set(METRICS_AUTH_RULES),
        "team-a": set(MANAGER_RULES),
        "team-b": set(MANAGER_RULES),
        NAMESPACE: set(LEADER_ELECTION_RULES),
    }
    assert flag_values_of(manager_of(docs)["args"], "--namespaces") == ["team-a,team-b"]


def test_rbac_lets_the_template_pacer_read_namespaces_only_when_it_paces() -> None:
    """``get`` on namespaces (the opt-out label, reconcile/upgrade_optout.py) only with templateUpgrade.perMinute;
    with watchNamespaces only those Namespaces, by name."""
    namespaces = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}
    assert not find(render(), "ClusterRole", f"{FULLNAME}-template-upgrade")
    docs = render("--set", "templateUpgrade.perMinute=2")
    assert one(docs, "ClusterRole", f"{FULLNAME}-template-upgrade")["rules"] == [namespaces]
    assert granted_of(docs, FULLNAME)[None] == set(MANAGER_RULES | METRICS_AUTH_RULES) | rule_triples([namespaces])
    docs = render("--set", "templateUpgrade.perMinute=2", "--set", "watchNamespaces={team-a,team-b}")
    rules = one(docs, "ClusterRole", f"{FULLNAME}-template-upgrade")["rules"]
    assert rules == [{**namespaces, "resourceNames": ["team-a", "team-b"]}]
    assert not find(
        render(
            "--set", "templateUpgrade.perMinute=2,rbac.create=false,serviceAccount.create=false,serviceAccount.name=x"
        ),
        "ClusterRole",
    )


def test_rbac_can_be_left_to_the_user() -> None:
    docs = render("--set", "rbac.create=false,serviceAccount.create=false,serviceAccount.name=existing")
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"):
        assert not find(docs, kind), kind
    assert deployment_of(docs)["spec"]["template"]["spec"]["serviceAccountName"] == "existing"
    docs = render("--set", "leaderElection.enabled=false")
    assert not find(docs, "Role")
    assert granted_of(docs, FULLNAME) == {None: set(MANAGER_RULES | METRICS_AUTH_RULES)}


# --- values schema ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting",
    [
        "unknownKey=1",
        "image.host=docker.io",
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
        "metrics.maxConnections=0",
        "webServerPodSecurityLevel=restricted",
    ],
)
def test_schema_rejects_bad_values(setting: str) -> None:
    result = helm_template("--set", setting, check=False)
    assert result.returncode != 0, f"{setting} was accepted"


def test_schema_accepts_global_values() -> None:
    assert render("--set", "global.imageRegistry=example.com")
    assert render(values={"global": {"anything": {"nested": True}, "list": [1, 2]}})


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
    assert pdb["spec"]["selector"] == deployment_of(docs)["spec"]["selector"]


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
    selector = deployment_of(docs)["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"][0]["targetPort"] == "health"
    assert not selector.items() <= pod["metadata"]["labels"].items(), "the test pod must not look like the operator"
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert restricted_violations(spec) == []
    command = spec["containers"][0]["command"]
    assert command[-1] == f"http://{FULLNAME}-healthz-test.{NAMESPACE}.svc:8081/healthz"
    assert spec["containers"][0]["image"] == manager_of(docs)["image"]
    assert not find(render("--set", "test.enabled=false"), "Pod")


# --- the image --------------------------------------------------------------------------------------------------------


def test_dockerfile_and_chart_agree() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    user = re.search(r"^USER (\d+):(\d+)$", dockerfile, flags=re.MULTILINE)
    assert user, "the Dockerfile must set a numeric USER uid:gid (runAsNonRoot can only verify a numeric user)"
    assert int(user[1]) != 0
    assert int(user[2]) != 0
    # The chart relies on the image's user instead of pinning one (OpenShift's restricted-v2 rejects fixed UIDs).
    for context in ("podSecurityContext", "securityContext"):
        assert values[context]["runAsNonRoot"] is True
        assert not {"runAsUser", "runAsGroup"} & set(values[context]), context
    assert 'ENTRYPOINT ["webserver-operator", "run"]' in dockerfile
    assert re.search(r"^ARG PYTHON_VERSION=3\.11$", dockerfile, flags=re.MULTILINE)
    assert f"ARG VERSION={__version__}" in dockerfile
    kustomize = yaml.safe_load((ROOT / "config" / "manager" / "kustomization.yaml").read_text())
    assert kustomize["images"] == [
        {
            "name": "controller",
            "newName": f"{values['image']['registry']}/{values['image']['repository']}",
            "newTag": __version__,
        }
    ]


# --- the tenant quota -----------------------------------------------------------------------------------------------


def test_the_tenant_quota_caps_webservers_and_node_ports_in_each_tenant_namespace() -> None:
    assert not find(render(), "ResourceQuota"), "off by default"
    docs = render("--set", "tenantQuota.enabled=true,tenantQuota.webServers=20,tenantQuota.nodePorts=5",
                  "--set", "tenantQuota.namespaces={team-a,team-b}")  # fmt: skip
    quotas = find(docs, "ResourceQuota")
    assert [q["metadata"]["namespace"] for q in quotas] == ["team-a", "team-b"]
    for quota in quotas:
        assert quota["metadata"]["name"] == f"{FULLNAME}-tenant"
        assert quota["spec"]["hard"] == {"count/webservers.web.webserver-operator.dev": "20", "services.nodeports": "5"}
    watched = render("--set", "tenantQuota.enabled=true", "--set", "watchNamespaces={team-c}")
    assert [q["metadata"]["namespace"] for q in find(watched, "ResourceQuota")] == ["team-c"]


def test_the_tenant_quota_without_namespaces_fails_with_what_to_set() -> None:
    result = helm_template("--set", "tenantQuota.enabled=true", check=False)
    assert result.returncode != 0
    assert "set tenantQuota.namespaces (or watchNamespaces)" in result.stderr, result.stderr


def test_the_tenant_quota_names_the_crds_group() -> None:
    group = WEBSERVERS.group
    quota = one(render("--set", "tenantQuota.enabled=true,tenantQuota.namespaces={a}"), "ResourceQuota")
    assert f"count/{WEBSERVERS.plural}.{group}" in quota["spec"]["hard"]
