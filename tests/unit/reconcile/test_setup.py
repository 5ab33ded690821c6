"""The bookkeeping declared next to the reconciler: the per-WebServer readiness gauge, as cert-manager's."""

from __future__ import annotations

from typing import Any

from tests.support import factories
from webserver_operator import metrics
from webserver_operator.reconcile.setup import publish_ready


def sample(name: str, condition: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(
        "webserver_operator_webserver_ready_status", {"namespace": "ns", "name": name, "condition": condition}
    )


def webserver(name: str, ready: str | None) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": ready}] if ready else []
    return factories.webserver(name, namespace="ns", spec=None, status={"conditions": conditions})


def test_one_series_per_status_value_the_current_one_is_1() -> None:
    publish_ready("ADDED", webserver("gauge-a", None))
    assert (sample("gauge-a", "Unknown"), sample("gauge-a", "True")) == (1, 0)
    publish_ready("MODIFIED", webserver("gauge-a", "False"))
    assert (sample("gauge-a", "True"), sample("gauge-a", "False"), sample("gauge-a", "Unknown")) == (0, 1, 0)
    publish_ready("MODIFIED", webserver("gauge-a", "True"))
    assert (sample("gauge-a", "True"), sample("gauge-a", "False")) == (1, 0)


def test_a_deleted_webserver_leaves_no_series() -> None:
    publish_ready("ADDED", webserver("gauge-b", "True"))
    publish_ready("DELETED", webserver("gauge-b", "True"))
    assert all(sample("gauge-b", c) is None for c in ("True", "False", "Unknown"))


def test_a_webserver_deleted_and_created_again_gets_its_series_back() -> None:
    publish_ready("ADDED", webserver("gauge-c", "True"))
    publish_ready("MODIFIED", webserver("gauge-c", "True"))  # unchanged: the series stay as they are
    assert (sample("gauge-c", "True"), sample("gauge-c", "False")) == (1, 0)
    publish_ready("DELETED", webserver("gauge-c", "True"))
    publish_ready("ADDED", webserver("gauge-c", "True"))
    assert (sample("gauge-c", "True"), sample("gauge-c", "False"), sample("gauge-c", "Unknown")) == (1, 0, 0)
