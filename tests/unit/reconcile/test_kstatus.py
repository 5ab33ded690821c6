"""The status the operator writes, read by kstatus as Helm 4 ``--wait`` and Flux read it.

Current only when ready at the observed generation; InProgress while creating, scaling, rolling out or before the
new generation is observed; Failed on a stall that needs a person.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest

from tests.support.factories import deployment, webserver
from tests.support.kstatus import verdicts
from webserver_operator.api.models import WebServer
from webserver_operator.reconcile.problems import Problem
from webserver_operator.reconcile.status import compute_status

pytestmark = pytest.mark.tools

NOW = datetime(2026, 11, 23, tzinfo=UTC)


WS = webserver(namespace="ns", uid="u", generation=2, replicas=3)
observed_deployment = partial(deployment, generation=1, observed=1, omit_zero=False)


SERVICE = {"spec": {"ports": [{"name": "http", "nodePort": 30080}]}}


def with_status(obj: dict[str, Any], **children: Any) -> dict[str, Any]:
    return {**obj, "status": compute_status(WebServer.model_validate(obj), now=NOW, **children)}


CASES = {
    "Creating": (with_status(WS, deployment=None, service=None, problem=None), "InProgress"),
    "Scaling": (
        with_status(WS, deployment=observed_deployment(spec_replicas=1, replicas=1), service=SERVICE, problem=None),
        "InProgress",
    ),
    "RollingOut": (
        with_status(
            WS, deployment=observed_deployment(replicas=4, updated=1, available=3), service=SERVICE, problem=None
        ),
        "InProgress",
    ),
    "Conflict": (
        with_status(
            WS,
            deployment=None,
            service=SERVICE,
            problem=Problem("DeploymentConflict", "a Deployment named web already exists; delete or rename it"),
        ),
        "Failed",
    ),
    "Ready": (with_status(WS, deployment=observed_deployment(), service=SERVICE, problem=None), "Current"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_kstatus_verdict(case: str) -> None:
    obj, expected = CASES[case]
    (verdict,) = verdicts([obj])
    assert verdict["status"] == expected, verdict


def test_a_new_generation_is_in_progress_until_observed() -> None:
    ready, _ = CASES["Ready"]
    newer = {**ready, "metadata": {**ready["metadata"], "generation": 3}}
    (verdict,) = verdicts([newer])
    assert verdict["status"] == "InProgress"
    assert "latest observed generation is 2" in verdict["message"]
