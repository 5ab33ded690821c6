"""The WebServer pydantic models: what parses, what defaults, and which images the shared pattern rejects.

The image pattern is the same string in the CRD schema (see test_crd_manifest.py), so the table below is also what the
API server accepts; the integration suite checks the server side.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import partial

import pytest
from pydantic import ValidationError

from tests.support.factories import webserver
from webserver_operator.api.models import (
    IMAGE_PATTERN,
    MAX_REPLICAS,
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    NODE_PORT_MAX,
    NODE_PORT_MIN,
    Condition,
    ResourceRequirements,
    WebServer,
    WebServerSpec,
    WebServerStatus,
)

DIGEST = "sha256:" + "a" * 64


_webserver = partial(webserver, namespace="default", uid="u-1", generation=4, replicas=None)  # the CRD's defaults


def test_minimal_webserver_parses_with_defaults() -> None:
    ws = WebServer.model_validate(_webserver())
    assert ws.spec.image == "nginx:1.27"
    assert ws.spec.replicas == 1
    assert ws.spec.port == 80
    assert ws.spec.node_port is None
    assert ws.spec.resources is None
    assert ws.spec.image_pull_secrets is None
    assert ws.status is None
    assert (ws.name, ws.namespace, ws.uid, ws.generation) == ("web", "default", "u-1", 4)


def test_full_webserver_round_trips_on_the_wire_names() -> None:
    raw = _webserver(
        replicas=3,
        port=8080,
        nodePort=30080,
        resources={"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": 1}},
        imagePullSecrets=[{"name": "regcred"}],
    )
    raw["status"] = {
        "observedGeneration": 4,
        "replicas": 3,
        "readyReplicas": 2,
        "selector": "app.kubernetes.io/instance=web",
        "nodePort": 30080,
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "PodsNotReady",
                "message": "2/3 pods ready",
                "observedGeneration": 4,
                "lastTransitionTime": "2024-05-01T10:00:00Z",
            }
        ],
    }
    ws = WebServer.model_validate(raw)
    assert ws.spec.node_port == 30080
    assert ws.spec.resources == ResourceRequirements(limits={"cpu": "500m", "memory": "256Mi"}, requests={"cpu": 1})
    assert ws.status is not None
    assert ws.status.conditions is not None
    assert ws.status.conditions[0].last_transition_time == datetime(2024, 5, 1, 10, tzinfo=UTC)
    dumped = ws.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["spec"]["nodePort"] == 30080
    assert dumped["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert dumped["status"]["readyReplicas"] == 2


def test_unknown_fields_are_ignored() -> None:
    ws = WebServer.model_validate(_webserver(futureField=True))
    assert ws.spec == WebServerSpec(image="nginx:1.27")


def test_condition_message_defaults_to_empty() -> None:
    condition = Condition.model_validate(
        {"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2024-05-01T10:00:00Z"}
    )
    assert condition.message == ""
    assert WebServerStatus().conditions is None


@pytest.mark.parametrize(
    "image",
    [
        "nginx",
        "nginx:1.27",
        "nginx:latest",
        "library/nginx",
        "docker.io/library/nginx:1.27-alpine",
        "registry:5000/a/b:c",
        "localhost:5000/web",
        "Registry.Example.COM/team/web",
        "ghcr.io/org/my_app__x/web-server.v2:v1.2.3_rc.1",
        f"repo@{DIGEST}",
        f"registry.example.com/team/web:1.0@{DIGEST}",
        "a" * 255,
    ],
)
def test_valid_images(image: str) -> None:
    assert WebServerSpec(image=image).image == image
    assert re.fullmatch(IMAGE_PATTERN, image)


@pytest.mark.parametrize(
    "image",
    [
        "",
        "NGINX",
        "nginx:",
        "a//b",
        "/nginx",
        "nginx/",
        ":1.27",
        "nginx:1.27\n",
        " nginx",
        "nginx 1.27",
        "nginx:-1",
        "nginx:" + "a" * 129,
        "repo@sha256:abc",
        "repo@" + "a" * 64,
        "my-.repo",
        "http://nginx",
        "a" * 513,
    ],
)
def test_invalid_images_are_rejected(image: str) -> None:
    with pytest.raises(ValidationError, match="image"):
        WebServerSpec(image=image)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("replicas", -1),
        ("replicas", MAX_REPLICAS + 1),
        ("port", 0),
        ("port", 65536),
        ("nodePort", NODE_PORT_MIN - 1),
        ("nodePort", NODE_PORT_MAX + 1),
        ("imagePullSecrets", [{"name": "Bad_Name"}]),
        ("imagePullSecrets", [{"name": f"s{i}"} for i in range(17)]),
        ("resources", {"limits": {f"r{i}": 1 for i in range(17)}}),
    ],
)
def test_out_of_range_spec_fields_are_rejected(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        WebServerSpec.model_validate({"image": "nginx", field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [("replicas", 0), ("replicas", MAX_REPLICAS), ("nodePort", NODE_PORT_MIN), ("nodePort", NODE_PORT_MAX)],
)
def test_range_bounds_are_inclusive(field: str, value: int) -> None:
    spec = WebServerSpec.model_validate({"image": "nginx", field: value})
    assert spec.model_dump(by_alias=True)[field] == value


def test_spec_is_required() -> None:
    raw = _webserver()
    del raw["spec"]
    with pytest.raises(ValidationError, match="spec"):
        WebServer.model_validate(raw)


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("web", True),
        ("web-1", True),
        ("a", True),
        ("a" * NAME_MAX_LENGTH, True),
        ("1web", False),
        ("web-", False),
        ("Web", False),
        ("web.example", False),
        ("", False),
    ],
)
def test_name_pattern_is_dns_1035(name: str, valid: bool) -> None:
    assert bool(re.fullmatch(NAME_PATTERN, name)) is valid
