"""Which child changes a user is waiting to see in the WebServer's status, and which may wait.

The first are reconciled before the rest; the others (a rollout's progress) after a short delay.

Why: during a bulk create the normal-priority work queue is full of changes nobody waits for: the echoes of the
operator's own status writes and a new Deployment's rollout progress (created, a pod scheduled, a pod running). A
Deployment that became available queued behind them reached the WebServer's Ready condition hundreds of milliseconds
late, most of its status lag (bench: issue 19, 2026-11-25). What a user watches (``kubectl wait --for=condition=Ready``,
Helm ``--wait``, Argo CD) is whether the pods are available, so a change in availability goes to the front of the
queue (``runtime.controller.workqueue``'s urgent priority); every other change keeps its place or waits (below).

Pure: ``availability_changed(new, old)`` compares what decides availability, as ``reconcile.status`` reads it for the
Ready verdict: the number of available replicas, whether the rollout is complete (every replica of the current
generation updated and available), the ``Available`` condition, and the two ways a rollout stalls
(``ReplicaFailure``, ``ProgressDeadlineExceeded``). Rollout progress that changes none of these (a pod created,
scheduled, running but not yet ready) does not go first. Declared for the owned Deployments in
``reconcile.setup``; the builder asks it for MODIFIED events only.

``progress_wait(new, old)``: such progress may wait ``PROGRESS_DETAIL_INTERVAL`` before it is looked at. Its only
effect is a status detail (replica counts, a message) that the reconciler writes at most once per that interval
anyway (``reconcile.status.progress_detail``), and a new Deployment reports three or four steps of it within a second
or two. Queued at once, each step cost a reconcile that only found its write held back (two reconciles in four of a
bulk create); queued after the interval, the steps make one reconcile, and none when the Deployment becomes available
first (its urgent reconcile runs the key and voids the delay). A change to anything else the reconciler reads of the
child (identity, generation, labels, owners, deletion, spec: a drift to repair) never waits.
"""

from __future__ import annotations

from typing import Any

from webserver_operator.core.vocabulary import KubeObject
from webserver_operator.reconcile.status import PROGRESS_DETAIL_INTERVAL
from webserver_operator.reconcile.triggers import identity_and_spec

__all__ = ["availability_changed", "progress_wait"]


def availability_changed(new: KubeObject, old: KubeObject) -> bool:
    """Whether a Deployment's availability, or whether its rollout has stalled, differs between ``old`` and ``new``."""
    return _availability(new) != _availability(old)


def progress_wait(new: KubeObject, old: KubeObject) -> float | None:
    """Seconds a Deployment change may wait when it only moved its rollout's progress; None when it may not wait."""
    if identity_and_spec(new) != identity_and_spec(old) or availability_changed(new, old):
        return None
    return PROGRESS_DETAIL_INTERVAL


def _availability(deployment: KubeObject) -> tuple[Any, ...]:
    status = deployment.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, dict)}
    available = conditions.get("Available") or {}
    progressing = conditions.get("Progressing") or {}
    failure = conditions.get("ReplicaFailure") or {}
    counts = [status.get(field) or 0 for field in ("replicas", "updatedReplicas", "availableReplicas")]
    generation = (deployment.get("metadata") or {}).get("generation") or 0
    complete = (
        (status.get("observedGeneration") or 0) >= generation
        and len(set(counts)) == 1
        and counts[0] == (deployment.get("spec") or {}).get("replicas", 1)
    )
    return (
        counts[2],
        complete,
        available.get("status") == "True",
        progressing.get("reason") == "ProgressDeadlineExceeded",
        failure.get("status") == "True",
    )
