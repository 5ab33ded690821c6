"""Resource paths and their inverse (path -> resource, method -> RBAC verb), which error messages rely on."""

from __future__ import annotations

import pytest

from webserver_operator.kube.resources import (
    DEPLOYMENTS,
    EVENTS,
    LEASES,
    NAMESPACES,
    SERVICES,
    WEBSERVERS,
    PathInfo,
    Resource,
    parse_path,
    rbac_verb,
)

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


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/apis/apps/v1/deployments", PathInfo("apps", "v1", "deployments")),
        (
            "/apis/apps/v1/namespaces/d/deployments/web/status?x=1",
            PathInfo("apps", "v1", "deployments", "d", "web", "status"),
        ),
        ("/api/v1/namespaces/d/services", PathInfo("", "v1", "services", "d")),
        ("/api/v1/namespaces", PathInfo("", "v1", "namespaces")),
        ("/api/v1/namespaces/d", PathInfo("", "v1", "namespaces", None, "d")),
        ("/api/v1/namespaces/d/status", PathInfo("", "v1", "namespaces", None, "d", "status")),
        ("/version", None),
        ("/apis/apps", None),
        ("/api/v1", None),
    ],
)
def test_parse_path(path: str, expected: PathInfo | None) -> None:
    assert parse_path(path) == expected


@pytest.mark.parametrize(
    ("method", "path", "watch", "verb"),
    [
        ("GET", "/apis/apps/v1/namespaces/d/deployments/web", False, "get"),
        ("GET", "/apis/apps/v1/namespaces/d/deployments", False, "list"),
        ("GET", "/apis/apps/v1/deployments", True, "watch"),
        ("post", "/api/v1/namespaces/d/services", False, "create"),
        ("PUT", "/api/v1/namespaces/d/services/s", False, "update"),
        ("PATCH", "/api/v1/namespaces/d/services/s", False, "patch"),
        ("DELETE", "/api/v1/namespaces/d/services/s", False, "delete"),
        ("DELETE", "/api/v1/namespaces/d/services", False, "deletecollection"),
        ("GET", "/version", False, "get"),
    ],
)
def test_rbac_verb(method: str, path: str, watch: bool, verb: str) -> None:
    assert rbac_verb(method, path, watch=watch) == verb
