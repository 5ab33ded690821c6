"""Which child changes a user is waiting to see in the WebServer's status: they are reconciled before the rest.

Why: during a bulk create the normal-priority work queue is full of changes nobody waits for: the echoes of the
operator's own status writes and a new Deployment's rollout progress (created, a pod scheduled, a pod running). A
Deployment that became available queued behind them reached the WebServer's Ready condition hundreds of milliseconds
late, most of its status lag (bench: issue 19, 2026-11-25). What a user watches (``kubectl wait --for=condition=Ready``,
Helm ``--wait``, Argo CD) is whether the pods are available, so a change in availability goes to the front of the
queue (``runtime.workqueue``'s urgent priority); every other change keeps its place.

Pure: ``availability_changed(new, old)`` compares what decides availability, as ``reconcile.status`` reads it for the
Ready verdict: the number of available replicas, whether the rollout is complete (every replica of the current
generation updated and available), the ``Available`` condition, and the two ways a rollout stalls
(``ReplicaFailure``, ``ProgressDeadlineExceeded``). Rollout progress that changes none of these (a pod created,
scheduled, running but not yet ready) keeps normal priority. Declared for the owned Deployments in
``reconcile.setup``; the builder asks it for MODIFIED events only.
"""

from __future__ import annotations

from typing import Any

from webserver_operator.core.vocabulary import KubeObject


def availability_changed(new: KubeObject, old: KubeObject) -> bool:
    """Whether a Deployment's availability, or whether its rollout has stalled, differs between ``old`` and ``new``."""
    return _availability(new) != _availability(old)


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
