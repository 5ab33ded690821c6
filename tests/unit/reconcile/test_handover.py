"""When the Service stops sending traffic to pods without the preStop pause (``reconcile.handover``)."""

from typing import Any

import pytest

from webserver_operator.desired import PRE_STOP_POD_LABEL, TEMPLATE_REVISION_ANNOTATION
from webserver_operator.reconcile.handover import pre_stop_pod_serves, pre_stop_pods_only

SELECTS_ALL = {"spec": {"selector": {"app.kubernetes.io/instance": "web"}}}
SELECTS_PRE_STOP = {"spec": {"selector": {"app.kubernetes.io/instance": "web", PRE_STOP_POD_LABEL: "true"}}}


def deployment(
    revision: int, *, replicas: int, updated: int, ready: int, generation: int = 2, observed: int = 2
) -> dict[str, Any]:
    annotations = {TEMPLATE_REVISION_ANNOTATION: str(revision)} if revision > 1 else {}
    return {
        "metadata": {"generation": generation, "annotations": annotations},
        "status": {
            "observedGeneration": observed,
            "replicas": replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
        },
    }


@pytest.mark.parametrize(
    ("live", "serves"),
    [
        # 0.1.0's Deployment, not moved yet: its pods have no label.
        (deployment(1, replicas=2, updated=2, ready=2), False),
        # Moved, but the controller has not seen the new template: the counts are the old template's.
        (deployment(2, replicas=2, updated=2, ready=2, generation=3, observed=2), False),
        # Moved, one new pod surged and starting: two old pods serve, none of the new.
        (deployment(2, replicas=3, updated=1, ready=2), False),
        # The new pod is ready: three ready, two of them old, so one new pod serves.
        (deployment(2, replicas=3, updated=1, ready=3), True),
        # Three old pods, one of them not ready, and the new one ready: cannot tell which are ready, so wait.
        (deployment(2, replicas=4, updated=1, ready=3), False),
        # Rolled: every pod has the label (even when none is ready, there is none without it to keep).
        (deployment(2, replicas=2, updated=2, ready=2), True),
        (deployment(2, replicas=2, updated=2, ready=0), True),
        (deployment(2, replicas=0, updated=0, ready=0), True),
    ],
)
def test_a_pre_stop_pod_serves_once_one_is_ready_or_no_old_pod_is_left(live: dict[str, Any], serves: bool) -> None:
    assert pre_stop_pod_serves(live) is serves


def test_revision_1_never_selects_the_label_its_pods_do_not_have() -> None:
    assert not pre_stop_pods_only(1, deployment(1, replicas=1, updated=1, ready=1), SELECTS_ALL)
    assert not pre_stop_pods_only(1, None, None)


def test_a_new_webserver_selects_pre_stop_pods_from_the_start() -> None:
    assert pre_stop_pods_only(2, None, None)


def test_the_switch_waits_for_a_ready_pod_with_the_pause_then_stays() -> None:
    starting = deployment(2, replicas=2, updated=1, ready=1)
    assert not pre_stop_pods_only(2, starting, SELECTS_ALL)
    assert not pre_stop_pods_only(2, starting, None)  # a Service re-created mid-move: the old pods still serve
    assert pre_stop_pods_only(2, deployment(2, replicas=2, updated=1, ready=2), SELECTS_ALL)
    # Once the Service selects the label it keeps it, whatever the rollout looks like (a restart mid-move).
    assert pre_stop_pods_only(2, starting, SELECTS_PRE_STOP)
