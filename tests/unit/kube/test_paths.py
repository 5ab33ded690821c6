"""Paths read back (path -> resource, method -> RBAC verb), which error messages rely on."""

from __future__ import annotations

import pytest

from webserver_operator.kube.paths import PathInfo, parse_path, rbac_verb


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
