"""Resource coordinates and the REST paths built from them."""

from __future__ import annotations

import pytest

from webserver_operator.api.models import WEBSERVERS
from webserver_operator.core.resources import DEPLOYMENTS, EVENTS, LEASES, NAMESPACES, SERVICES, Resource

EXAMPLE = Resource("example.com", "v1", "webservers", "WebServer")


def test_api_version() -> None:
    assert DEPLOYMENTS.api_version == "apps/v1"
    assert SERVICES.api_version == "v1"
    assert LEASES.api_version == "coordination.k8s.io/v1"
    assert EVENTS.api_version == "v1"
    assert EVENTS.kind == "Event"
    assert WEBSERVERS.api_version == "web.webserver-operator.dev/v1"
    assert WEBSERVERS.path(namespace="a", name="w") == "/apis/web.webserver-operator.dev/v1/namespaces/a/webservers/w"


@pytest.mark.parametrize(
    ("resource", "kwargs", "expected"),
    [
        (DEPLOYMENTS, {}, "/apis/apps/v1/deployments"),
        (DEPLOYMENTS, {"namespace": "default"}, "/apis/apps/v1/namespaces/default/deployments"),
        (DEPLOYMENTS, {"namespace": "default", "name": "web"}, "/apis/apps/v1/namespaces/default/deployments/web"),
        (
            DEPLOYMENTS,
            {"namespace": "ns", "name": "web", "subresource": "scale"},
            "/apis/apps/v1/namespaces/ns/deployments/web/scale",
        ),
        (SERVICES, {"namespace": "ns"}, "/api/v1/namespaces/ns/services"),
        (SERVICES, {}, "/api/v1/services"),
        (LEASES, {"namespace": "ops", "name": "lock"}, "/apis/coordination.k8s.io/v1/namespaces/ops/leases/lock"),
        (NAMESPACES, {}, "/api/v1/namespaces"),
        (NAMESPACES, {"name": "default"}, "/api/v1/namespaces/default"),
        (
            EXAMPLE,
            {"namespace": "a", "name": "w", "subresource": "status"},
            "/apis/example.com/v1/namespaces/a/webservers/w/status",
        ),
    ],
)
def test_path(resource: Resource, kwargs: dict[str, str], expected: str) -> None:
    assert resource.path(**kwargs) == expected


def test_path_refuses_ambiguous_requests() -> None:
    with pytest.raises(ValueError, match="namespaced"):
        DEPLOYMENTS.path(name="web")
    with pytest.raises(ValueError, match="cluster-scoped"):
        NAMESPACES.path(namespace="x", name="y")
    with pytest.raises(ValueError, match="needs an object name"):
        DEPLOYMENTS.path(namespace="x", subresource="status")
    with pytest.raises(ValueError, match="without '/'"):
        DEPLOYMENTS.path(namespace="x", name="a/b")
    with pytest.raises(ValueError, match="non-empty"):
        DEPLOYMENTS.path(namespace="", name="a")
