"""The WebServer's status: what the operator observes, computed purely from the WebServer and its live children.

Why a pure function of observations: the status must tell the truth after any crash or restart, so it is recomputed
from scratch on every reconcile (never accumulated), and compared semantically with the stored one so that steady
state writes nothing. ``Ready`` answers the one question users ask (``kubectl wait --for=condition=Ready``): are all
the requested pods of the current version available? When the answer is no, the reason says why in one CamelCase word
and the message says what to do, because the person reading it cannot see the operator's logs.

The whole decision lives here, behind one call: ``next_status(obj, seen, now=...)`` takes the stored WebServer and
what the reconciler saw (an ``Observation``: the children it just synced and the ``reconcile.problems.Problem`` it
met, if any; or a ``Refusal``: a spec it will not act on) and hands back the status body to write, or ``None`` when
the stored status already says it. The reconciler calls it once per attempt (twice when the first write meets a 409)
and only does the I/O.

``progress_detail(old, new)`` says whether a status to write only refines an in-progress story (replica counts,
reason, message) without changing what a tool acts on (observedGeneration, nodePort, the status of any condition).
A new Deployment passes through three such states within a second (the Deployment controller has not acted, no pod
yet, a pod not yet ready) before it is available; writing each costs a write and tells nobody anything the next
write does not. The reconciler holds those back for ``PROGRESS_DETAIL_INTERVAL`` after its previous status write
(``WebServerReconciler._write_status``): the last one is written when the interval is over, unless a write that
changes a condition's status (Ready, Stalled) or observedGeneration, which always goes at once, supersedes it.
"""

import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from webserver_operator.api.models import WebServer
from webserver_operator.core.vocabulary import KubeObject
from webserver_operator.desired import PORT_NAME, selector_string
from webserver_operator.reconcile.conditions import ConditionDict, format_time, parse_time, set_condition
from webserver_operator.reconcile.problems import Problem

__all__ = [
    "PROGRESS_DETAIL_INTERVAL",
    "READY",
    "Observation",
    "Refusal",
    "beyond_baseline",
    "child_status_reads",
    "compute_status",
    "invalid_spec",
    "next_status",
    "progress_detail",
    "ready_verdict",
    "status_changed",
]

READY: Final = "Ready"
_RECONCILING: Final = "Reconciling"
_STALLED: Final = "Stalled"
#: Ready=False reasons that need a person (kstatus Failed), besides every stalled ``Problem``.
_STALLED_REASONS: Final = frozenset({"ProgressDeadlineExceeded", "ReplicaFailure", "InvalidSpec"})
#: Seconds after a status write during which a further ``progress_detail`` write waits (see the module docstring).
PROGRESS_DETAIL_INTERVAL: Final = 2.0
#: The fields outside the conditions whose change is never held back.
_DECISIVE_FIELDS: Final = ("observedGeneration", "selector", "nodePort")


@dataclass(frozen=True)
class Observation:
    """The children as the reconciler left them (None: absent, or not ours to describe) and the first problem met."""

    deployment: KubeObject | None
    service: KubeObject | None
    problem: Problem | None = None
    #: The kubelet's newest probe failure of a pod of the Deployment (``reconcile.probes``), while pods are unready.
    probe_failure: str | None = None


@dataclass(frozen=True)
class Refusal:
    """A spec the operator will not act on: Ready=False and Stalled, with ``reason`` and ``message``."""

    reason: str
    message: str


def invalid_spec(err: ValidationError) -> Refusal:
    """The API server stored a spec the models reject (typically under a CRD older than the operator)."""
    details = "; ".join(f"spec.{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in err.errors())
    return Refusal(
        "InvalidSpec",
        f"the WebServer's spec is invalid: {details}. Fix the spec (`kubectl explain webserver.spec` lists the "
        "fields); the CRD may be older than the operator: upgrade it with `kubectl apply --server-side`",
    )


def beyond_baseline(violations: Sequence[str]) -> Refusal:
    """The rendered pods would be beyond the Pod Security baseline level (``core.podsecurity``)."""
    return Refusal(
        "ExceedsPodSecurityBaseline",
        f"the WebServer asks for pods beyond the Pod Security baseline level: {'; '.join(violations)}. Nothing was "
        "written to its Deployment. Remove that from spec.securityContext (the CRD refuses it since the operator's "
        "upgrade; this WebServer was stored before), or have the cluster admin allow privileged WebServers "
        "(--pod-security-level=privileged, chart value webServerPodSecurityLevel: a risk, see docs/security.md)",
    )


def next_status(
    obj: KubeObject, seen: Observation | Refusal, *, now: datetime, parsed: WebServer | None = None
) -> dict[str, Any] | None:
    """The status to write on the stored WebServer ``obj`` after ``seen``; None when the stored one already says it.

    For an ``Observation``, None too when ``obj``'s spec no longer parses (it changed since the children were synced:
    the next reconcile reports it). ``now`` stamps condition transitions. ``parsed``: ``obj`` as the caller already
    validated it (the reconciler validates every WebServer before syncing its children), to save a second validation.
    """
    if isinstance(seen, Refusal):
        status = _refused(obj, seen, now=now)
    else:
        if parsed is None:
            try:
                parsed = WebServer.model_validate(obj)
            except ValidationError:
                return None
        ws = parsed
        status = compute_status(
            ws,
            deployment=seen.deployment,
            service=seen.service,
            problem=seen.problem,
            now=now,
            probe_failure=seen.probe_failure,
        )
    return status if status_changed(obj.get("status"), status) else None


def _refused(obj: KubeObject, refusal: Refusal, *, now: datetime) -> dict[str, Any]:
    """The stored status with the refusal's verdict; the children's figures stay as last observed."""
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    old = obj.get("status") or {}
    return {
        **old,
        "observedGeneration": generation,
        "conditions": _with_kstatus_conditions(
            list(old.get("conditions") or []),
            _verdict("False", refusal.reason, refusal.message),
            stalled=True,
            generation=generation,
            now=now,
        ),
    }


def _verdict(status: str, reason: str, message: str) -> ConditionDict:
    return {"type": READY, "status": status, "reason": reason, "message": message}


def compute_status(
    ws: WebServer,
    *,
    deployment: KubeObject | None,
    service: KubeObject | None,
    problem: Problem | None,
    now: datetime,
    probe_failure: str | None = None,
) -> dict[str, Any]:
    """The full status (camelCase JSON) of ``ws`` given its live children; ``now`` stamps condition transitions."""
    deployment_status = (deployment or {}).get("status") or {}
    status: dict[str, Any] = {
        "observedGeneration": ws.generation,
        "replicas": _count(deployment_status, "replicas"),
        "readyReplicas": _count(deployment_status, "readyReplicas"),
        "selector": selector_string(ws.name),
    }
    node_port = _service_node_port(service)
    if node_port is not None:
        status["nodePort"] = node_port
    verdict = ready_verdict(ws, deployment=deployment, service=service, problem=problem, probe_failure=probe_failure)
    stalled = (problem is not None and problem.stalled) or verdict["reason"] in _STALLED_REASONS
    status["conditions"] = _with_kstatus_conditions(
        _existing_conditions(ws), verdict, stalled=stalled, generation=ws.generation, now=now
    )
    return status


def _with_kstatus_conditions(
    conditions: list[ConditionDict] | None,
    ready: ConditionDict,
    *,
    stalled: bool,
    generation: int,
    now: datetime,
) -> list[ConditionDict]:
    """``conditions`` with Ready set from ``ready``, and Reconciling and Stalled as the kstatus rules read them.

    kstatus (cli-utils, which Helm 4's ``--wait`` and Flux use) reports InProgress while ``observedGeneration`` lags
    or ``Reconciling`` is True, Failed while ``Stalled`` is True, and otherwise follows ``Ready``. So exactly one
    holds: Ready=True (Current), Reconciling=True (creating, scaling, rolling out, recreating a child) or
    Stalled=True (only a person can help: a conflict, a rejected child, a deadline). The other two are False with
    the same reason, so ``kubectl get -o wide`` and dashboards read the same story from any of them.
    """
    is_ready = ready["status"] == "True"
    reconciling = not is_ready and not stalled
    result = list(conditions or [])
    for condition_type, value in (
        (READY, is_ready),
        (_RECONCILING, reconciling),
        (_STALLED, not is_ready and stalled),
    ):
        result = set_condition(
            result,
            type=condition_type,
            status="True" if value else "False",
            reason=ready["reason"],
            message=ready["message"],
            observed_generation=generation,
            now=now,
        )
    return result


def _service_node_port(service: KubeObject | None) -> int | None:
    """The node port of the Service's ``http`` port, or None (no Service, or no port allocated yet)."""
    for port in ((service or {}).get("spec") or {}).get("ports") or []:
        if port.get("name") == PORT_NAME and port.get("nodePort"):
            return int(port["nodePort"])
    return None


def ready_verdict(
    ws: WebServer,
    *,
    deployment: KubeObject | None,
    service: KubeObject | None,
    problem: Problem | None,
    probe_failure: str | None = None,
) -> ConditionDict:
    """The Ready condition's type, status, reason and message; the most actionable cause of not-Ready wins.

    A probe failure (``reconcile.probes``) turns an unexplained wait (``RollingOut``, ``Scaling``) into
    ``ProbeFailing`` with the kubelet's answer, and is added to ``ProgressDeadlineExceeded``'s message; it is not a
    stall by itself: a server may still be starting. The Deployment's deadline makes it one.
    """
    if problem is not None:
        return _verdict("False", problem.reason, problem.message)
    first_time = ws.status is None or ws.status.observed_generation is None
    if deployment is None:
        return _missing(ws, "Deployment", first_time=first_time)
    if service is None:
        return _missing(ws, "Service", first_time=first_time)
    verdict = _deployment_verdict(ws, deployment)
    if probe_failure is None or verdict["status"] == "True":
        return verdict
    if verdict["reason"] in _WAITS:
        status = deployment.get("status") or {}
        return _verdict(
            "False",
            "ProbeFailing",
            f"{_count(status, 'availableReplicas')}/{ws.spec.replicas} pods available; pods of the current version "
            f"fail their probe ({probe_failure}). Check that the image serves {_probe_path(ws)} on port "
            f"{ws.spec.port} (spec.port, spec.health.path); pods that never pass are never sent traffic, and the "
            "old ones keep serving.",
        )
    if verdict["reason"] == "ProgressDeadlineExceeded":
        return _verdict("False", verdict["reason"], f"{verdict['message']} Last probe failure: {probe_failure}.")
    return verdict


#: Not-ready reasons that only say "waiting": a probe failure explains them better.
_WAITS: Final = frozenset({"RollingOut", "Scaling"})


def _probe_path(ws: WebServer) -> str:
    return ws.spec.health.path if ws.spec.health is not None else "/"


def _missing(ws: WebServer, kind: str, *, first_time: bool) -> ConditionDict:
    if first_time:
        return _verdict("False", "Creating", f"Creating the Deployment and Service {ws.name}.")
    return _verdict(
        "False",
        f"{kind}Missing",
        f"{kind} {ws.name} does not exist; the operator is recreating it. If this persists, check the WebServer's "
        f"Events (kubectl -n {ws.namespace} describe webserver {ws.name}) and the operator's logs.",
    )


def _deployment_verdict(ws: WebServer, deployment: KubeObject) -> ConditionDict:
    name, desired = ws.name, ws.spec.replicas
    status = deployment.get("status") or {}
    pods = f"kubectl -n {ws.namespace} get pods -l {selector_string(ws.name)}"
    generation = int((deployment.get("metadata") or {}).get("generation") or 0)
    observed = _count(status, "observedGeneration")
    if observed < generation:
        return _verdict(
            "False",
            "RollingOut",
            f"Waiting for the Deployment controller to act on the latest change to Deployment {name} (generation "
            f"{generation}, observed {observed}). If this persists, check that kube-controller-manager is running.",
        )
    failure = _deployment_condition(deployment, "ReplicaFailure")
    if failure is not None and failure.get("status") == "True":
        return _verdict(
            "False",
            "ReplicaFailure",
            f"Pods of Deployment {name} cannot be created. Fix the cause (the namespace's Pod Security level, a "
            f"ResourceQuota or LimitRange, or the WebServer's spec.resources): {failure.get('message', '')}",
        )
    progressing = _deployment_condition(deployment, "Progressing")
    if (
        progressing is not None
        and progressing.get("status") == "False"
        and progressing.get("reason") == "ProgressDeadlineExceeded"
    ):
        return _verdict(
            "False",
            "ProgressDeadlineExceeded",
            f"Deployment {name} made no progress within its deadline ({_count(status, 'availableReplicas')}/"
            f"{desired} pods available): {progressing.get('message', '')}. Look for image pull errors, crashing or "
            f"unschedulable pods with `{pods}` and `kubectl describe pod`, then fix the image or the cluster.",
        )
    return _rollout_verdict(name, desired=desired, deployment=deployment, pods=pods)


def _rollout_verdict(name: str, *, desired: int, deployment: KubeObject, pods: str) -> ConditionDict:
    status = deployment.get("status") or {}
    replicas = _count(status, "replicas")
    updated = _count(status, "updatedReplicas")
    available = _count(status, "availableReplicas")
    spec_replicas = (deployment.get("spec") or {}).get("replicas", 1)
    if spec_replicas != desired:
        return _verdict("False", "Scaling", f"Scaling Deployment {name} from {spec_replicas} to {desired} pods.")
    if replicas > updated:
        return _verdict(
            "False",
            "RollingOut",
            f"Rolling out a new version: {updated}/{desired} pods updated, {available}/{desired} available, "
            f"{replicas - updated} old pods still running. If this does not finish, check the new pods with `{pods}`.",
        )
    if replicas > desired:
        return _verdict("False", "Scaling", f"Scaling down to {desired} pods: {replicas} still running.")
    if updated != desired or available != desired or replicas != desired:
        return _verdict(
            "False",
            "Scaling",
            f"{available}/{desired} pods available. Pods that stay unavailable usually cannot pull the image, crash, "
            f"or cannot be scheduled: check them with `{pods}`.",
        )
    if desired == 0:
        return _verdict("True", "Available", "Scaled to zero: spec.replicas is 0, no pods requested.")
    return _verdict("True", "Available", f"{available}/{desired} pods available.")


def child_status_reads(child: KubeObject) -> tuple[Any, ...]:
    """Every field of a child's ``status`` that the decision above reads (``reconcile.triggers`` compares them).

    A child event that leaves these, the child's metadata the reconciler reads and its spec as they were cannot change
    the status: a Deployment's ``unavailableReplicas``, ``collisionCount`` or a condition's ``lastUpdateTime`` are
    never read. Keep this in step with ``_deployment_verdict`` and ``compute_status``.
    """
    status = child.get("status") or {}
    counts = ("observedGeneration", "replicas", "readyReplicas", "updatedReplicas", "availableReplicas")
    conditions = tuple(
        (c.get("status"), c.get("reason"), c.get("message")) if c is not None else None
        for c in (_deployment_condition(child, "ReplicaFailure"), _deployment_condition(child, "Progressing"))
    )
    return (*(_count(status, key) for key in counts), *conditions)


def _deployment_condition(deployment: KubeObject, condition_type: str) -> dict[str, Any] | None:
    conditions = (deployment.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == condition_type), None)


def _count(status: dict[str, Any], key: str) -> int:
    return int(status.get(key) or 0)


def _existing_conditions(ws: WebServer) -> list[dict[str, Any]]:
    """The stored conditions as JSON dicts, so transition times survive when a status does not change."""
    if ws.status is None or not ws.status.conditions:
        return []
    return [
        {
            "type": c.type,
            "status": c.status,
            **({"observedGeneration": c.observed_generation} if c.observed_generation is not None else {}),
            "lastTransitionTime": _canonical_time(c.last_transition_time),
            "reason": c.reason,
            "message": c.message,
        }
        for c in ws.status.conditions
    ]


@functools.lru_cache(maxsize=1024)
def _canonical_time(moment: datetime) -> str:
    """``moment`` in the form ``set_condition`` writes; cached: a bulk create's conditions share a few seconds."""
    return format_time(parse_time(moment))


def status_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether writing ``new`` would change the stored status ``old`` (semantic compare, not byte compare).

    Absent and null fields are equal, conditions are compared by type regardless of order, and timestamps are
    compared as instants (``...00Z`` equals ``...00.000000+00:00``).
    """
    if old == new:  # the usual answer: the new status was computed from the stored one and nothing moved
        return False
    return _normalise_status(old or {}) != _normalise_status(new)


def progress_detail(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether writing ``new`` over ``old`` only updates the details of a rollout still in progress.

    True when both say Reconciling=True and every condition keeps its status, with the same observedGeneration,
    selector and nodePort: only replica counts, reasons and messages move. kstatus, ``kubectl wait`` and the scale
    subresource's selector read the same verdict from both; the details still reach the stored status, later.
    """
    if not old:
        return False
    if any(old.get(field) != new.get(field) for field in _DECISIVE_FIELDS):
        return False
    before = {c.get("type"): c.get("status") for c in old.get("conditions") or []}
    after = {c.get("type"): c.get("status") for c in new.get("conditions") or []}
    return before == after and after.get(_RECONCILING) == "True"


def _normalise_status(status: dict[str, Any]) -> dict[str, Any]:
    result = {key: value for key, value in status.items() if value is not None and key != "conditions"}
    conditions = status.get("conditions") or []
    if conditions:
        result["conditions"] = {c.get("type"): _normalise_condition(c) for c in conditions}
    return result


def _normalise_condition(condition: dict[str, Any]) -> dict[str, Any]:
    result = {key: value for key, value in condition.items() if value is not None}
    result.setdefault("message", "")
    transition = result.get("lastTransitionTime")
    if isinstance(transition, str | datetime):
        with contextlib.suppress(ValueError):  # not a timestamp: compare the raw value
            result["lastTransitionTime"] = parse_time(transition)
    return result
