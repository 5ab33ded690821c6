"""The desired children: the exact objects a WebServer turns into."""

from functools import partial
from typing import Any

import pytest

from tests.support.factories import webserver, webserver_model
from webserver_operator.api.models import API_VERSION, WebServer
from webserver_operator.desired import (
    CHILD_LABEL_SELECTOR,
    child_labels,
    desired_deployment,
    desired_pdb,
    desired_service,
    orphan_of,
    owner_reference,
    selector_labels,
    selector_string,
    selects_pre_stop_pods,
    template_revision_of,
)

make_ws = partial(webserver_model, replicas=None)  # the spec as written: an image, the rest the CRD's defaults


OWNER = {
    "apiVersion": API_VERSION,
    "kind": "WebServer",
    "name": "web",
    "uid": "uid-1",
    "controller": True,
    "blockOwnerDeletion": True,
}
LABELS = {
    "app.kubernetes.io/name": "webserver",
    "app.kubernetes.io/instance": "web",
    "app.kubernetes.io/managed-by": "webserver-operator",
    "app.kubernetes.io/component": "web-server",
}
SELECTOR = {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": "web"}
PRE_STOP = {"webserver-operator.dev/pre-stop-pause": "true"}


def test_labels_and_selector() -> None:
    assert child_labels("web") == LABELS
    assert selector_labels("web") == SELECTOR
    assert selector_string("web") == "app.kubernetes.io/instance=web,app.kubernetes.io/name=webserver"
    assert CHILD_LABEL_SELECTOR == "app.kubernetes.io/managed-by=webserver-operator"


def test_selector_does_not_depend_on_the_spec() -> None:
    a = desired_deployment(make_ws(image="nginx:1.27", replicas=1, port=80))
    b = desired_deployment(make_ws(image="httpd:2.4", replicas=7, port=8080, nodePort=30080))
    assert a["spec"]["selector"] == b["spec"]["selector"] == {"matchLabels": SELECTOR}
    assert desired_service(make_ws(image="httpd:2.4"))["spec"]["selector"] == {**SELECTOR, **PRE_STOP}
    assert desired_service(make_ws(image="httpd:2.4"), pre_stop_pods_only=False)["spec"]["selector"] == SELECTOR


def test_revision_2_pods_carry_the_pre_stop_label_the_service_can_select_and_the_deployment_does_not() -> None:
    deployment = desired_deployment(make_ws())
    assert deployment["spec"]["template"]["metadata"]["labels"] == {**LABELS, **PRE_STOP}
    assert deployment["spec"]["selector"] == {"matchLabels": SELECTOR}
    assert deployment["metadata"]["labels"] == LABELS
    assert selects_pre_stop_pods(desired_service(make_ws()))
    assert not selects_pre_stop_pods(desired_service(make_ws(), pre_stop_pods_only=False))


def test_owner_reference() -> None:
    assert owner_reference(make_ws()) == OWNER


def test_owner_reference_needs_a_uid() -> None:
    with pytest.raises(ValueError, match=r"no metadata\.uid"):
        owner_reference(WebServer.model_validate(webserver(namespace="team-a", replicas=None)))


def test_template_revision_1_is_the_0_1_0_rendering() -> None:
    assert desired_deployment(make_ws(), 1) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a", "labels": LABELS, "ownerReferences": [OWNER]},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": SELECTOR},
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                        }
                    ],
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                },
            },
        },
    }


def test_revision_2_adds_a_readiness_probe_a_pre_stop_pause_and_a_rollout_that_keeps_serving_pods() -> None:
    deployment = desired_deployment(make_ws())
    assert deployment["metadata"]["annotations"] == {"webserver-operator.dev/template-revision": "2"}
    spec = deployment["spec"]
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}}
    assert spec["minReadySeconds"] == 5
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 30
    (container,) = pod["containers"]
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/", "port": "http", "scheme": "HTTP"},
        "periodSeconds": 5,
        "timeoutSeconds": 2,
        "failureThreshold": 3,
        "successThreshold": 1,
    }
    assert "livenessProbe" not in container and "startupProbe" not in container
    assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 10}}}
    assert pod["terminationGracePeriodSeconds"] > container["lifecycle"]["preStop"]["sleep"]["seconds"]


def test_health_sets_the_path_and_timings_of_every_probe_and_can_turn_readiness_off() -> None:
    health = {
        "path": "/healthz?full=1",
        "readiness": {"enabled": False},
        "liveness": {"periodSeconds": 20, "timeoutSeconds": 5, "failureThreshold": 6},
        "startup": {"initialDelaySeconds": 3, "failureThreshold": 60},
    }
    (container,) = desired_deployment(make_ws(health=health))["spec"]["template"]["spec"]["containers"]
    assert "readinessProbe" not in container
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/healthz?full=1", "port": "http", "scheme": "HTTP"},
        "periodSeconds": 20,
        "timeoutSeconds": 5,
        "failureThreshold": 6,
        "successThreshold": 1,
    }
    assert container["startupProbe"]["initialDelaySeconds"] == 3
    assert container["startupProbe"]["failureThreshold"] == 60


def test_probes_only_ever_get_the_pods_own_http_port() -> None:
    """No host, exec, tcpSocket or grpc handler can come from a WebServer: Pod Security baseline forbids probe hosts."""
    health = {"path": "/", "liveness": {}, "startup": {}, "host": "169.254.169.254", "exec": {"command": ["sh"]}}
    (container,) = desired_deployment(make_ws(health=health))["spec"]["template"]["spec"]["containers"]
    for key in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert set(container[key]) - {"httpGet", "periodSeconds", "timeoutSeconds", "failureThreshold"} == {
            "successThreshold"
        }
        assert container[key]["httpGet"] == {"path": "/", "port": "http", "scheme": "HTTP"}


def test_an_unknown_template_revision_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown template revision 3"):
        desired_deployment(make_ws(), 3)


@pytest.mark.parametrize(
    ("annotations", "revision"),
    [
        (None, 1),
        ({"webserver-operator.dev/template-revision": "2"}, 2),
        ({"webserver-operator.dev/template-revision": "9"}, 2),
        ({"webserver-operator.dev/template-revision": "x"}, 1),
    ],
)
def test_the_recorded_revision_is_read_from_the_deployment_metadata(
    annotations: dict[str, str] | None, revision: int
) -> None:
    assert template_revision_of({"metadata": {"annotations": annotations}}) == revision


def test_a_pdb_allows_one_eviction_at_a_time_from_two_replicas_and_none_below() -> None:
    assert desired_pdb(make_ws(replicas=1)) is None
    assert desired_pdb(make_ws(replicas=0)) is None
    assert desired_pdb(make_ws(replicas=2)) == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "team-a", "labels": LABELS, "ownerReferences": [OWNER]},
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": SELECTOR},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def test_desired_deployment_full() -> None:
    ws = make_ws(
        replicas=3,
        port=8080,
        resources={"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": 1}},
        imagePullSecrets=[{"name": "regcred"}, {"name": "other"}],
    )
    spec = desired_deployment(ws)["spec"]
    assert spec["replicas"] == 3
    assert spec["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other"}]
    (container,) = spec["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["resources"] == {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": 1}}


@pytest.mark.parametrize("resources", [None, {}, {"limits": None}])
def test_empty_resources_are_left_out(resources: dict[str, Any] | None) -> None:
    (container,) = desired_deployment(make_ws(resources=resources))["spec"]["template"]["spec"]["containers"]
    assert "resources" not in container


def test_no_security_context_is_set() -> None:
    pod_spec = desired_deployment(make_ws())["spec"]["template"]["spec"]
    assert "securityContext" not in pod_spec
    assert all("securityContext" not in c for c in pod_spec["containers"])


def test_desired_service_allocated_node_port() -> None:
    assert desired_service(make_ws(port=8080), pre_stop_pods_only=False) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "team-a", "labels": LABELS, "ownerReferences": [OWNER]},
        "spec": {
            "type": "NodePort",
            "selector": SELECTOR,
            "ports": [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def test_desired_service_fixed_node_port() -> None:
    assert desired_service(make_ws(nodePort=30080))["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP", "nodePort": 30080}
    ]


def test_an_orphan_belongs_to_the_webserver_its_instance_label_names_only_with_our_managed_by_label() -> None:
    ours = {"metadata": {"labels": child_labels("web")}}
    assert orphan_of(ours) == "web"
    foreign = {"metadata": {"labels": {"app.kubernetes.io/instance": "web"}}}
    assert orphan_of(foreign) is None
    assert orphan_of({"metadata": {}}) is None
