"""Owned fields: steady state writes nothing, drift produces exactly the patch that repairs it, nothing else."""

import copy
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from tests.support.factories import webserver_model
from tests.support.fake_api import apply_merge_patch
from webserver_operator.core.jsondiff import compare
from webserver_operator.desired import desired_deployment, desired_service, owner_reference
from webserver_operator.reconcile.owned import merge_owned_deployment, merge_owned_service, selector_mismatch


def merge_patch(live: dict[str, Any], merged: dict[str, Any]) -> dict[str, Any] | None:
    return compare(live, merged).patch


def changed_paths(live: dict[str, Any], merged: dict[str, Any]) -> list[str]:
    return compare(live, merged).paths


Obj = dict[str, Any]
RV = "4711"
ALLOCATED_NODE_PORT = 31234


make_ws = partial(webserver_model, replicas=3)


# --- what the API server stores --------------------------------------------------------------------------------------

# The canonical form the API server serialises quantities in.
_CANONICAL = {"0.5": "500m", "1024Mi": "1Gi", 1073741824: "1Gi", 1: "1", "1000m": "1", "0.25": "250m"}


def canonical_resources(resources: Obj) -> Obj:
    return {kind: {name: _CANONICAL.get(q, str(q)) for name, q in values.items()} for kind, values in resources.items()}


def server_metadata(obj: Obj) -> Obj:
    meta: Obj = copy.deepcopy(obj["metadata"])
    meta.update(
        uid="child-uid",
        resourceVersion=RV,
        generation=1,
        creationTimestamp="2024-05-01T12:00:00Z",
        managedFields=[{"manager": "webserver-operator", "operation": "Update"}],
    )
    return meta


def stored_deployment(desired: Obj) -> Obj:
    """``desired`` as a GET returns it after a create: server defaults added, quantities canonicalised."""
    live = copy.deepcopy(desired)
    live["metadata"] = server_metadata(desired)
    live["metadata"]["annotations"] = {
        **desired["metadata"].get("annotations", {}),
        "deployment.kubernetes.io/revision": "1",
    }
    spec = live["spec"]
    spec.update(progressDeadlineSeconds=600, revisionHistoryLimit=10)
    spec.setdefault(
        "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    )
    spec["template"]["metadata"]["creationTimestamp"] = None
    pod = spec["template"]["spec"]
    pod.update(
        dnsPolicy="ClusterFirst",
        restartPolicy="Always",
        schedulerName="default-scheduler",
        securityContext={},
    )
    pod.setdefault("terminationGracePeriodSeconds", 30)
    for container in pod["containers"]:
        container.update(
            imagePullPolicy="IfNotPresent",
            terminationMessagePath="/dev/termination-log",
            terminationMessagePolicy="File",
            resources=canonical_resources(container.get("resources", {})),
        )
    live["status"] = {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3}
    return live


def stored_service(desired: Obj) -> Obj:
    live = copy.deepcopy(desired)
    live["metadata"] = server_metadata(desired)
    live["spec"].update(
        clusterIP="10.96.12.34",
        clusterIPs=["10.96.12.34"],
        ipFamilies=["IPv4"],
        ipFamilyPolicy="SingleStack",
        sessionAffinity="None",
        externalTrafficPolicy="Cluster",
        internalTrafficPolicy="Cluster",
    )
    for port in live["spec"]["ports"]:
        port.setdefault("nodePort", ALLOCATED_NODE_PORT)
    live["status"] = {"loadBalancer": {}}
    return live


def touched_by_others(deployment: Obj) -> Obj:
    """What other actors add over time: labels, annotations, a rollout restart, an injected sidecar."""
    live = copy.deepcopy(deployment)
    live["metadata"]["labels"]["team"] = "payments"
    live["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] = "1"
    template = live["spec"]["template"]
    template["metadata"]["annotations"] = {"kubectl.kubernetes.io/restartedAt": "2024-05-02T10:00:00Z"}
    template["metadata"]["labels"]["sidecar.istio.io/inject"] = "true"
    template["spec"]["containers"].append({"name": "istio-proxy", "image": "istio/proxyv2:1.22"})
    template["spec"]["containers"][0]["imagePullPolicy"] = "Always"
    live["spec"]["paused"] = False
    live["spec"]["progressDeadlineSeconds"] = 300
    return live


# --- steady state ----------------------------------------------------------------------------------------------------

SPECS: dict[str, Obj] = {
    "minimal": {},
    "scaled-to-zero": {"replicas": 0},
    "fixed-node-port": {"nodePort": 30080, "port": 8080},
    "resources": {"resources": {"limits": {"cpu": "0.5", "memory": 1073741824}, "requests": {"cpu": 1}}},
    "resources-canonical-already": {"resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}},
    "resources-requests-only": {"resources": {"requests": {"cpu": "0.25", "memory": "1024Mi"}}},
    "pull-secrets": {"imagePullSecrets": [{"name": "regcred"}, {"name": "mirror"}]},
    "everything": {
        "replicas": 5,
        "port": 8443,
        "nodePort": 32000,
        "resources": {"limits": {"cpu": "1000m"}, "requests": {"cpu": "0.5"}},
        "imagePullSecrets": [{"name": "regcred"}],
    },
}


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_stored_deployment_needs_no_write(spec: Obj) -> None:
    desired = desired_deployment(make_ws(**spec))
    for live in (stored_deployment(desired), touched_by_others(stored_deployment(desired))):
        merged = merge_owned_deployment(live, desired)
        assert merged == live
        assert changed_paths(live, merged) == []
        assert merge_patch(live, merged) is None
        assert not selector_mismatch(live, desired)


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_stored_service_needs_no_write(spec: Obj) -> None:
    desired = desired_service(make_ws(**spec))
    live = stored_service(desired)
    live["metadata"]["labels"]["team"] = "payments"
    live["metadata"]["annotations"] = {"metallb.universe.tf/address-pool": "default"}
    live["spec"]["ports"][0]["appProtocol"] = "http"
    merged = merge_owned_service(live, desired)
    assert merged == live
    assert changed_paths(live, merged) == []
    assert merge_patch(live, merged) is None


def test_after_repair_the_next_reconcile_is_quiet() -> None:
    """Apply the repair patch like the API server would: the result must need no further write."""
    desired = desired_deployment(make_ws(resources={"limits": {"cpu": "0.5"}}))
    live = stored_deployment(desired)
    live["spec"]["replicas"] = 9
    del live["spec"]["template"]["spec"]["containers"][0]["resources"]
    patch = merge_patch(live, merge_owned_deployment(live, desired))
    assert patch is not None
    repaired = apply_merge_patch(live, patch)
    repaired["spec"]["template"]["spec"]["containers"][0]["resources"] = canonical_resources(
        repaired["spec"]["template"]["spec"]["containers"][0]["resources"]
    )
    assert merge_patch(repaired, merge_owned_deployment(repaired, desired)) is None


# --- Deployment drift ------------------------------------------------------------------------------------------------


def _container(live: Obj, name: str = "web") -> Obj:
    return next(c for c in live["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def _containers_patch(live: Obj, **changes: Any) -> Obj:
    """The patch that replaces the containers list with the live one, ``web`` changed by ``changes``."""
    containers = copy.deepcopy(live["spec"]["template"]["spec"]["containers"])
    for container in containers:
        if container["name"] == "web":
            for key, value in changes.items():
                if value is None:
                    container.pop(key, None)
                else:
                    container[key] = value
    return {"spec": {"template": {"spec": {"containers": containers}}}}


def _set(path: str, value: Any) -> Callable[[Obj], None]:
    def mutate(live: Obj) -> None:
        *parents, last = path.split(".")
        target = live
        for key in parents:
            target = target[key]
        if value is None:
            del target[last]
        else:
            target[last] = value

    return mutate


OWNER = owner_reference(make_ws())
FOREIGN_NON_CONTROLLER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": "cm-uid"}

# (id, WebServer spec, mutation of the stored Deployment, expected patch without resourceVersion (a function of the
# mutated live object), expected changed paths)
DEPLOYMENT_DRIFT: list[tuple[str, Obj, Callable[[Obj], None], Callable[[Obj], Obj], list[str]]] = [
    (
        "replicas-changed-by-hand",
        {},
        _set("spec.replicas", 5),
        lambda live: {"spec": {"replicas": 3}},
        ["spec.replicas"],
    ),
    (
        "image-changed",
        {},
        lambda live: _container(live).update(image="nginx:1.25"),
        lambda live: _containers_patch(live, image="nginx:1.27"),
        ["spec.template.spec.containers[web].image"],
    ),
    (
        "port-changed",
        {},
        lambda live: _container(live).update(ports=[{"name": "http", "containerPort": 8080, "protocol": "TCP"}]),
        lambda live: _containers_patch(live, ports=[{"name": "http", "containerPort": 80, "protocol": "TCP"}]),
        ["spec.template.spec.containers[web].ports[http].containerPort"],
    ),
    (
        "extra-container-port-removed",
        {},
        lambda live: _container(live)["ports"].append({"name": "metrics", "containerPort": 9090, "protocol": "TCP"}),
        lambda live: _containers_patch(live, ports=[{"name": "http", "containerPort": 80, "protocol": "TCP"}]),
        ["spec.template.spec.containers[web].ports[metrics]"],
    ),
    (
        "pod-template-label-removed",
        {},
        lambda live: live["spec"]["template"]["metadata"]["labels"].pop("app.kubernetes.io/component"),
        lambda live: {"spec": {"template": {"metadata": {"labels": {"app.kubernetes.io/component": "web-server"}}}}},
        ["spec.template.metadata.labels[app.kubernetes.io/component]"],
    ),
    (
        "our-label-value-edited-others-kept",
        {},
        lambda live: live["metadata"]["labels"].update({"app.kubernetes.io/managed-by": "helm", "team": "x"}),
        lambda live: {"metadata": {"labels": {"app.kubernetes.io/managed-by": "webserver-operator"}}},
        ["metadata.labels[app.kubernetes.io/managed-by]"],
    ),
    (
        "orphan-adopted",
        {},
        lambda live: live["metadata"].pop("ownerReferences"),
        lambda live: {"metadata": {"ownerReferences": [OWNER]}},
        ["metadata.ownerReferences"],
    ),
    (
        "orphan-adopted-other-refs-kept",
        {},
        _set("metadata.ownerReferences", [FOREIGN_NON_CONTROLLER]),
        lambda live: {"metadata": {"ownerReferences": [FOREIGN_NON_CONTROLLER, OWNER]}},
        ["metadata.ownerReferences[web]"],
    ),
    (
        "owner-reference-lost-block-owner-deletion",
        {},
        _set("metadata.ownerReferences", [{**OWNER, "blockOwnerDeletion": False}]),
        lambda live: {"metadata": {"ownerReferences": [OWNER]}},
        ["metadata.ownerReferences[web].blockOwnerDeletion"],
    ),
    (
        "resources-removed-from-webserver",
        {},
        lambda live: _container(live).update(resources={"limits": {"cpu": "500m"}}),
        lambda live: _containers_patch(live, resources=None),
        ["spec.template.spec.containers[web].resources"],
    ),
    (
        "resources-changed",
        {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
        lambda live: _container(live).update(resources={"limits": {"cpu": "500m", "memory": "1Gi"}}),
        lambda live: _containers_patch(live, resources={"limits": {"cpu": "1", "memory": "1Gi"}}),
        ["spec.template.spec.containers[web].resources.limits.cpu"],
    ),
    (
        "resources-added-by-hand",
        {"resources": {"limits": {"cpu": "1"}}},
        lambda live: _container(live).update(resources={"limits": {"cpu": "1"}, "requests": {"cpu": "100m"}}),
        lambda live: _containers_patch(live, resources={"limits": {"cpu": "1"}}),
        ["spec.template.spec.containers[web].resources.requests"],
    ),
    (
        "sidecar-kept-while-image-repaired",
        {},
        lambda live: (
            live["spec"]["template"]["spec"]["containers"].insert(0, {"name": "proxy", "image": "envoy:1"})
            or _container(live).update(image="evil:latest")
        ),
        lambda live: _containers_patch(live, image="nginx:1.27"),
        ["spec.template.spec.containers[web].image"],
    ),
    (
        "web-container-renamed-away",
        {},
        lambda live: _container(live).update(name="server"),
        lambda live: {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            *live["spec"]["template"]["spec"]["containers"],
                            desired_deployment(make_ws())["spec"]["template"]["spec"]["containers"][0],
                        ]
                    }
                }
            }
        },
        ["spec.template.spec.containers[web]"],
    ),
    (
        "pull-secret-added-to-webserver",
        {"imagePullSecrets": [{"name": "regcred"}]},
        lambda live: live["spec"]["template"]["spec"].pop("imagePullSecrets"),
        lambda live: {"spec": {"template": {"spec": {"imagePullSecrets": [{"name": "regcred"}]}}}},
        ["spec.template.spec.imagePullSecrets"],
    ),
    (
        "pull-secret-removed-from-webserver",
        {},
        _set("spec.template.spec.imagePullSecrets", [{"name": "regcred"}]),
        lambda live: {"spec": {"template": {"spec": {"imagePullSecrets": None}}}},
        ["spec.template.spec.imagePullSecrets"],
    ),
    (
        "pull-secret-swapped",
        {"imagePullSecrets": [{"name": "a"}, {"name": "b"}]},
        _set("spec.template.spec.imagePullSecrets", [{"name": "a"}, {"name": "c"}]),
        lambda live: {"spec": {"template": {"spec": {"imagePullSecrets": [{"name": "a"}, {"name": "b"}]}}}},
        ["spec.template.spec.imagePullSecrets[c]", "spec.template.spec.imagePullSecrets[b]"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "mutate", "expected_patch", "expected_paths"),
    [case[1:] for case in DEPLOYMENT_DRIFT],
    ids=[case[0] for case in DEPLOYMENT_DRIFT],
)
def test_deployment_drift(
    spec: Obj, mutate: Callable[[Obj], None], expected_patch: Callable[[Obj], Obj], expected_paths: list[str]
) -> None:
    desired = desired_deployment(make_ws(**spec))
    live = touched_by_others(stored_deployment(desired))
    mutate(live)
    before, desired_before = copy.deepcopy(live), copy.deepcopy(desired)

    merged = merge_owned_deployment(live, desired)

    assert live == before, "the live (cached) object must not be modified"
    assert desired == desired_before, "the merge shares parts of desired: it must not modify them"
    want = expected_patch(live)
    want.setdefault("metadata", {})["resourceVersion"] = RV
    assert merge_patch(live, merged) == want
    assert changed_paths(live, merged) == expected_paths
    assert apply_merge_patch(live, want) == merged
    # What others own survives the repair.
    template = merged["spec"]["template"]
    assert template["metadata"]["annotations"] == {"kubectl.kubernetes.io/restartedAt": "2024-05-02T10:00:00Z"}
    assert merged["metadata"]["annotations"] == live["metadata"]["annotations"]
    assert merged["spec"]["progressDeadlineSeconds"] == 300
    assert _container(merged, "istio-proxy") == {"name": "istio-proxy", "image": "istio/proxyv2:1.22"}


# --- template revision 2: probes, preStop, grace period, strategy --------------------------------------------------

REVISION_2_DRIFT: list[tuple[str, Obj, Callable[[Obj], None], list[str]]] = [
    (
        "readiness-probe-removed-by-hand",
        {},
        lambda live: _container(live).pop("readinessProbe"),
        ["spec.template.spec.containers[web].readinessProbe"],
    ),
    (
        "readiness-probe-path-edited",
        {},
        lambda live: _container(live)["readinessProbe"]["httpGet"].update(path="/other"),
        ["spec.template.spec.containers[web].readinessProbe.httpGet.path"],
    ),
    (
        "readiness-turned-off-in-the-webserver",
        {"health": {"readiness": {"enabled": False}}},
        lambda live: _container(live).update(
            readinessProbe={"httpGet": {"path": "/", "port": "http", "scheme": "HTTP"}, "periodSeconds": 5}
        ),
        ["spec.template.spec.containers[web].readinessProbe"],
    ),
    (
        "pre-stop-pause-removed",
        {},
        lambda live: _container(live).pop("lifecycle"),
        ["spec.template.spec.containers[web].lifecycle"],
    ),
    (
        "grace-period-cut",
        {},
        _set("spec.template.spec.terminationGracePeriodSeconds", 1),
        ["spec.template.spec.terminationGracePeriodSeconds"],
    ),
    (
        "strategy-set-to-recreate",
        {},
        _set("spec.strategy", {"type": "Recreate"}),
        ["spec.strategy.type", "spec.strategy.rollingUpdate"],
    ),
    ("min-ready-seconds-dropped", {}, _set("spec.minReadySeconds", None), ["spec.minReadySeconds"]),
    (
        "revision-annotation-removed",
        {},
        lambda live: live["metadata"]["annotations"].pop("webserver-operator.dev/template-revision"),
        ["metadata.annotations[webserver-operator.dev/template-revision]"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "mutate", "expected_paths"),
    [case[1:] for case in REVISION_2_DRIFT],
    ids=[case[0] for case in REVISION_2_DRIFT],
)
def test_revision_2_fields_are_owned(spec: Obj, mutate: Callable[[Obj], None], expected_paths: list[str]) -> None:
    desired = desired_deployment(make_ws(**spec))
    live = stored_deployment(desired)
    mutate(live)
    merged = merge_owned_deployment(live, desired)
    assert changed_paths(live, merged) == expected_paths
    patch = merge_patch(live, merged)
    assert patch is not None
    assert merge_patch(apply_merge_patch(live, patch), merged) is None


def test_probes_stored_with_the_api_servers_defaults_need_no_write() -> None:
    """The API server fills what a probe leaves out; a probe rendered with those values explicit is not drift."""
    desired = desired_deployment(make_ws(health={"liveness": {}}))
    live = stored_deployment(desired)
    live["spec"]["strategy"]["rollingUpdate"] = {"maxSurge": "25%", "maxUnavailable": 0}
    probe = _container(live)["livenessProbe"]
    probe["httpGet"].pop("scheme")
    probe.update(initialDelaySeconds=0)
    assert merge_patch(live, merge_owned_deployment(live, desired)) is None


def test_revision_1_leaves_probes_pre_stop_grace_and_strategy_to_others() -> None:
    """An existing Deployment rendered at revision 1 is never moved by a new operator writing revision 2's fields."""
    desired = desired_deployment(make_ws(), 1)
    live = stored_deployment(desired)
    live["spec"]["strategy"] = {"type": "Recreate"}
    live["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 5
    _container(live)["readinessProbe"] = {"tcpSocket": {"port": 80}}
    assert merge_patch(live, merge_owned_deployment(live, desired)) is None


@pytest.mark.parametrize("name", ["ports", "imagePullSecrets"])
def test_order_only_differences_are_not_drift(name: str) -> None:
    desired = desired_deployment(make_ws(imagePullSecrets=[{"name": "a"}, {"name": "b"}]))
    live = stored_deployment(desired)
    if name == "imagePullSecrets":
        live["spec"]["template"]["spec"]["imagePullSecrets"].reverse()
    else:
        _container(live)["ports"] = [{"containerPort": 80, "name": "http"}]  # protocol defaulted: same port
    assert merge_patch(live, merge_owned_deployment(live, desired)) is None


def test_absent_replicas_mean_one() -> None:
    desired = desired_deployment(make_ws(replicas=1))
    live = stored_deployment(desired)
    del live["spec"]["replicas"]
    assert merge_patch(live, merge_owned_deployment(live, desired)) is None
    desired = desired_deployment(make_ws(replicas=2))
    assert merge_patch(live, merge_owned_deployment(live, desired)) == {
        "metadata": {"resourceVersion": RV},
        "spec": {"replicas": 2},
    }


def test_host_port_zero_is_not_drift() -> None:
    desired = desired_deployment(make_ws())
    live = stored_deployment(desired)
    _container(live)["ports"][0]["hostPort"] = 0
    assert merge_patch(live, merge_owned_deployment(live, desired)) is None


def test_foreign_controller_is_never_touched() -> None:
    desired = desired_deployment(make_ws())
    live = stored_deployment(desired)
    live["metadata"]["ownerReferences"] = [{**OWNER, "kind": "Rollout", "name": "other", "uid": "other-uid"}]
    with pytest.raises(ValueError, match="controlled by Rollout other"):
        merge_owned_deployment(live, desired)
    with pytest.raises(ValueError, match="controlled by Rollout other"):
        merge_owned_service(stored_service(desired_service(make_ws())) | {"metadata": live["metadata"]}, desired)


@pytest.mark.parametrize(
    ("selector", "mismatch"),
    [
        ({"matchLabels": {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": "web"}}, False),
        (
            {
                "matchLabels": {"app.kubernetes.io/instance": "web", "app.kubernetes.io/name": "webserver"},
                "matchExpressions": [],
            },
            False,
        ),
        ({"matchLabels": {"app.kubernetes.io/instance": "web"}}, True),
        ({"matchLabels": {"app": "web"}}, True),
        (
            {
                "matchLabels": {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": "web"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}],
            },
            True,
        ),
    ],
)
def test_selector_mismatch(selector: Obj, mismatch: bool) -> None:
    desired = desired_deployment(make_ws())
    live = stored_deployment(desired)
    live["spec"]["selector"] = selector
    assert selector_mismatch(live, desired) is mismatch
    assert "selector" not in (merge_patch(live, merge_owned_deployment(live, desired)) or {}).get("spec", {})


# --- Service drift ---------------------------------------------------------------------------------------------------


def _http(node_port: int | None = ALLOCATED_NODE_PORT, port: int = 80, **extra: Any) -> Obj:
    entry: Obj = {"name": "http", "port": port, "targetPort": "http", "protocol": "TCP", **extra}
    if node_port is not None:
        entry["nodePort"] = node_port
    return entry


SERVICE_DRIFT: list[tuple[str, Obj, Callable[[Obj], None], Obj, list[str]]] = [
    (
        "port-edited-allocated-node-port-kept",
        {},
        lambda live: live["spec"]["ports"][0].update(port=8080),
        {"spec": {"ports": [_http()]}},
        ["spec.ports[http].port"],
    ),
    (
        "target-port-numeric",
        {},
        lambda live: live["spec"]["ports"][0].update(targetPort=80),
        {"spec": {"ports": [_http()]}},
        ["spec.ports[http].targetPort"],
    ),
    (
        "protocol-udp",
        {},
        lambda live: live["spec"]["ports"][0].update(protocol="UDP"),
        {"spec": {"ports": [_http()]}},
        ["spec.ports[http].protocol"],
    ),
    (
        "type-clusterip-node-port-cleared-by-server",
        {},
        lambda live: live["spec"].update(type="ClusterIP") or live["spec"]["ports"][0].pop("nodePort"),
        {"spec": {"type": "NodePort"}},
        ["spec.type"],
    ),
    (
        "type-clusterip-with-fixed-node-port",
        {"nodePort": 30080},
        lambda live: live["spec"].update(type="ClusterIP") or live["spec"]["ports"][0].pop("nodePort"),
        {"spec": {"type": "NodePort", "ports": [_http(30080)]}},
        ["spec.type", "spec.ports[http].nodePort"],
    ),
    (
        "fixed-node-port-changed-in-webserver",
        {"nodePort": 30080},
        lambda live: live["spec"]["ports"][0].update(nodePort=30099),
        {"spec": {"ports": [_http(30080)]}},
        ["spec.ports[http].nodePort"],
    ),
    (
        "extra-port-removed",
        {},
        lambda live: live["spec"]["ports"].append(
            {"name": "debug", "port": 9999, "protocol": "TCP", "nodePort": 31000}
        ),
        {"spec": {"ports": [_http()]}},
        ["spec.ports[debug]"],
    ),
    (
        "port-renamed-keeps-its-node-port",
        {},
        lambda live: live["spec"]["ports"][0].update(name="web"),
        {"spec": {"ports": [_http()]}},
        ["spec.ports[web]", "spec.ports[http]"],
    ),
    (
        "selector-key-added-by-hand",
        {},
        lambda live: live["spec"]["selector"].update(tier="front"),
        {"spec": {"selector": {"tier": None}}},
        ["spec.selector.tier"],
    ),
    (
        "selector-value-edited",
        {},
        lambda live: live["spec"]["selector"].update({"app.kubernetes.io/instance": "other"}),
        {"spec": {"selector": {"app.kubernetes.io/instance": "web"}}},
        ["spec.selector[app.kubernetes.io/instance]"],
    ),
    (
        "orphan-adopted",
        {},
        lambda live: live["metadata"].pop("ownerReferences"),
        {"metadata": {"ownerReferences": [OWNER]}},
        ["metadata.ownerReferences"],
    ),
    (
        "label-removed",
        {},
        lambda live: live["metadata"]["labels"].pop("app.kubernetes.io/name"),
        {"metadata": {"labels": {"app.kubernetes.io/name": "webserver"}}},
        ["metadata.labels[app.kubernetes.io/name]"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "mutate", "expected_patch", "expected_paths"),
    [case[1:] for case in SERVICE_DRIFT],
    ids=[case[0] for case in SERVICE_DRIFT],
)
def test_service_drift(
    spec: Obj, mutate: Callable[[Obj], None], expected_patch: Obj, expected_paths: list[str]
) -> None:
    desired = desired_service(make_ws(**spec))
    live = stored_service(desired)
    mutate(live)
    before, desired_before = copy.deepcopy(live), copy.deepcopy(desired)

    merged = merge_owned_service(live, desired)

    assert live == before
    assert desired == desired_before
    want = copy.deepcopy(expected_patch)
    want.setdefault("metadata", {})["resourceVersion"] = RV
    assert merge_patch(live, merged) == want
    assert changed_paths(live, merged) == expected_paths
    assert apply_merge_patch(live, want) == merged
    for key in ("clusterIP", "clusterIPs", "ipFamilies", "sessionAffinity", "externalTrafficPolicy"):
        assert merged["spec"][key] == live["spec"][key]


def test_node_port_dropped_from_webserver_keeps_the_port_in_use() -> None:
    live = stored_service(desired_service(make_ws(nodePort=30080)))
    desired = desired_service(make_ws())
    assert merge_patch(live, merge_owned_service(live, desired)) is None


def test_app_protocol_survives_a_port_repair() -> None:
    desired = desired_service(make_ws())
    live = stored_service(desired)
    live["spec"]["ports"][0].update(appProtocol="kubernetes.io/h2c", port=81)
    patch = merge_patch(live, merge_owned_service(live, desired))
    assert patch == {"metadata": {"resourceVersion": RV}, "spec": {"ports": [_http(appProtocol="kubernetes.io/h2c")]}}
