"""The reconciler's status write when the WebServer changed under it (409): retried from a fresh read, same verdict.

Everything else about the reconciler is tested against the real API server (tests/integration); this path needs a
409 at one exact moment, which a scripted API makes deterministic.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from webserver_operator.kube.errors import api_error_from_response
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.reconciler import Caches, WebServerReconciler

NS, NAME = "default", "web"
WS_PATH = f"/apis/web.webserver-operator.dev/v1/namespaces/{NS}/webservers/{NAME}"


def _status_error(code: int, reason: str, *, method: str, path: str) -> Exception:
    body = json.dumps({"kind": "Status", "status": "Failure", "reason": reason, "message": reason, "code": code})
    return api_error_from_response(code, body.encode(), method=method, path=path)


def _webserver(resource_version: str) -> dict[str, Any]:
    return {
        "apiVersion": "web.webserver-operator.dev/v1",
        "kind": "WebServer",
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "uid": "ws-uid",
            "generation": 1,
            "resourceVersion": resource_version,
        },
        "spec": {"image": "nginx:1.27", "replicas": 1, "port": 80},
    }


class ScriptedApi:
    """Answers like the API server would with a foreign Deployment named like the WebServer."""

    def __init__(self) -> None:
        self.status_puts: list[dict[str, Any]] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str | int | bool] | None = None,
        body: object | None = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        if method == "POST" and path.endswith("/deployments"):
            raise _status_error(409, "AlreadyExists", method=method, path=path)
        if method == "GET" and path.endswith(f"/deployments/{NAME}"):
            return {"metadata": {"name": NAME, "namespace": NS, "uid": "foreign", "labels": {"app": "theirs"}}}
        if method == "POST" and path.endswith("/services"):
            assert isinstance(body, dict)
            return body
        if method == "POST" and path.endswith("/events"):
            return {}
        if method == "PUT" and path == f"{WS_PATH}/status":
            assert isinstance(body, dict)
            self.status_puts.append(body)
            if len(self.status_puts) == 1:
                raise _status_error(409, "Conflict", method=method, path=path)
            return body
        if method == "GET" and path == WS_PATH:
            return _webserver("2")  # changed meanwhile (e.g. a label was added)
        raise AssertionError(f"unexpected {method} {path}")


class DictCache:
    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, key: tuple[str, str], /) -> dict[str, Any] | None:
        return self.objects.get(key)


async def test_status_retry_after_409_keeps_the_problem_the_reconcile_found() -> None:
    api = ScriptedApi()
    reconciler = WebServerReconciler(
        kube=api,
        caches=Caches(
            webservers=DictCache({(NS, NAME): _webserver("1")}), deployments=DictCache({}), services=DictCache({})
        ),
        recorder=EventRecorder(api),
        clock=lambda: datetime(2026, 11, 22, tzinfo=UTC),
    )
    result = await reconciler.reconcile((NS, NAME))

    assert result.requeue_after is not None  # a conflict is re-checked slowly
    assert len(api.status_puts) == 2
    retried = api.status_puts[1]
    assert retried["metadata"]["resourceVersion"] == "2"  # written over the fresh read, not the stale cache
    (ready,) = retried["status"]["conditions"]
    assert ready["status"] == "False"
    assert ready["reason"] == "DeploymentConflict"
    assert retried["status"]["replicas"] == 0
