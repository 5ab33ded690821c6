"""Audit log reading: one count per request, by user agent, verb and resource."""

import json
from pathlib import Path

from harness import audit


def line(audit_id: str, stage: str, verb: str, resource: str, agent: str, sub: str = "") -> str:
    ref = {"resource": resource, "namespace": "bench", "name": "web"}
    if sub:
        ref["subresource"] = sub
    return json.dumps(
        {
            "auditID": audit_id,
            "stage": stage,
            "verb": verb,
            "userAgent": agent,
            "objectRef": ref,
            "responseStatus": {"code": 200},
            "requestReceivedTimestamp": "2026-11-23T10:00:00.250000Z",
        }
    )


def test_requests_are_counted_once_and_attributed_by_agent(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_text(
        "\n".join(
            [
                line("1", "ResponseStarted", "watch", "deployments", "webserver-operator/0.1.0"),
                line("1", "ResponseComplete", "watch", "deployments", "webserver-operator/0.1.0"),
                line("2", "ResponseComplete", "update", "webservers", "webserver-operator/0.1.0", sub="status"),
                line("3", "ResponseComplete", "create", "deployments", "kube-controller-manager/v1.36"),
            ]
        )
        + "\n"
        + line("4", "ResponseComplete", "get", "services", "webserver-operator/0.1.0")[:20]  # partial line
    )
    log = audit.AuditLog(path)
    ours = audit.by_agent(log.read(), ("webserver-operator/",))
    assert audit.summary(ours) == {
        "total": 2,
        "writes": 1,
        "reads": 0,
        "watches": 1,
        "by_verb_resource": {"watch deployments": 1, "update webservers/status": 1},
    }
    assert ours[0].received == 1795428000.25
    with path.open("a") as fh:
        fh.write(line("4", "ResponseComplete", "get", "services", "webserver-operator/0.1.0")[20:] + "\n")
    assert [r.verb for r in log.read()] == ["get"]
