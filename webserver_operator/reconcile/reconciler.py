"""Reconcile one WebServer: make its Deployment and Service match, then tell the truth in its status.

Level-triggered and idempotent: every call starts from the cached state of the WebServer and its children and does
the same thing for the same inputs; there are no create/update/delete event branches. Reads come from the informer
caches (zero polling reads); a write is sent only when the pure functions say an owned field differs, so a converged
WebServer costs no writes at all, on any number of resyncs.

Ownership rules (see docs in DESIGN.md):
- a missing child is created with a create request (never an apply that could overwrite a foreign object);
- 409 AlreadyExists: read the object; ours (not yet in the cache) is fine; anything controlled by someone else, or
  without our labels, is never adopted or written: Ready=False names the conflict, one Warning Event per generation,
  and a slow capped requeue (the label-filtered cache will not tell us when it goes away);
- an object with our labels and no controller (left by ``--cascade=orphan``) is adopted;
- drift is repaired with an optimistic-concurrency merge patch of just the owned fields (others' labels,
  annotations and ``kubectl rollout restart`` survive);
- no finalizers: the garbage collector deletes the children through their ownerReference.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from webserver_operator import metrics
from webserver_operator.api.models import WebServer
from webserver_operator.builders import (
    INSTANCE_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    controller_of,
    desired_deployment,
    desired_service,
)
from webserver_operator.kube.errors import ApiError, Conflict, Forbidden, Invalid, NotFound, TransportError
from webserver_operator.kube.resources import DEPLOYMENTS, SERVICES, WEBSERVERS, Resource
from webserver_operator.reconcile.conditions import set_condition
from webserver_operator.reconcile.events import EventRecorder, RequestSender
from webserver_operator.reconcile.owned import (
    changed_paths,
    merge_owned_deployment,
    merge_owned_service,
    merge_patch,
    selector_mismatch,
)
from webserver_operator.reconcile.result import Result
from webserver_operator.reconcile.status import READY, Problem, compute_status, status_changed

log = logging.getLogger(__name__)

KubeObject = dict[str, Any]
ObjectKey = tuple[str, str]

MERGE_PATCH = "application/merge-patch+json"
PROBLEM_REQUEUE_BASE = 15.0
PROBLEM_REQUEUE_CAP = 300.0
"""A conflict or an invalid child is re-checked slowly (15 s doubling to 5 min): the cause may clear without any
event we watch (the foreign object is deleted, the other Service frees its nodePort)."""


class ObjectReader(Protocol):
    """Read-only cache view (mirrors webserver_operator.controller.view.ObjectReader; structural typing)."""

    def get(self, key: ObjectKey, /) -> KubeObject | None: ...


@dataclass(frozen=True)
class Caches:
    webservers: ObjectReader
    deployments: ObjectReader
    services: ObjectReader


@dataclass(frozen=True)
class _Child:
    resource: Resource
    cache: ObjectReader
    desired: Callable[[WebServer], KubeObject]
    merge: Callable[[KubeObject, KubeObject], KubeObject]


def _forbidden(kind: str, name: str, verb: str, err: Forbidden) -> ChildProblemError:
    """403 on a child: missing RBAC, a terminating namespace, or an admission or quota denial.

    Only a person can fix it, so it becomes Ready=False with the API's own message (naming the missing permission).
    """
    return ChildProblemError(
        Problem(reason=f"{kind}Forbidden", message=f"cannot {verb} {kind} {name}: {err}"),
        event_reason=f"{kind}Forbidden",
    )


class ChildProblemError(Exception):
    """A child cannot be brought in line for a reason only a person can fix; becomes Ready=False + an Event."""

    def __init__(self, problem: Problem, *, event_reason: str) -> None:
        super().__init__(problem.message)
        self.problem = problem
        self.event_reason = event_reason


class WebServerReconciler:
    """``reconcile((namespace, name)) -> Result``; safe to call concurrently for different keys."""

    def __init__(
        self,
        *,
        kube: RequestSender,
        caches: Caches,
        recorder: EventRecorder,
        clock: Callable[[], datetime] = lambda: datetime.now(tz=UTC),
    ) -> None:
        self._kube = kube
        self._caches = caches
        self._recorder = recorder
        self._clock = clock
        self._problem_streak: dict[ObjectKey, int] = {}
        self._children = (
            _Child(DEPLOYMENTS, caches.deployments, desired_deployment, merge_owned_deployment),
            _Child(SERVICES, caches.services, desired_service, merge_owned_service),
        )

    def keys_with_problems(self) -> list[ObjectKey]:
        """WebServers currently waiting on a problem (a conflict, a rejected child).

        Worth a look when a child goes away: a deleted Service frees the nodePort another WebServer is waiting for.
        """
        return list(self._problem_streak)

    async def reconcile(self, key: ObjectKey) -> Result:
        obj = self._caches.webservers.get(key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            # Deleted (or being deleted): the garbage collector removes the children via their ownerReferences.
            self._problem_streak.pop(key, None)
            return Result()
        try:
            ws = WebServer.model_validate(obj)
        except ValidationError as err:
            return await self._invalid_spec(obj, err)

        live: dict[str, KubeObject | None] = {}
        problem: Problem | None = None
        for child in self._children:
            try:
                live[child.resource.kind] = await self._ensure_child(ws, obj, child)
            except ChildProblemError as err:
                live[child.resource.kind] = None
                problem = problem or err.problem
                await self._recorder.emit(
                    obj,
                    type_="Warning",
                    reason=err.event_reason,
                    message=err.problem.message,
                    once_key=f"{err.problem.reason}/{ws.generation}/{err.problem.message}",
                )
            except (ApiError, TransportError) as err:
                # Retried with backoff by the controller; tell the user once per distinct error, not per retry.
                if not isinstance(err, Conflict | NotFound):
                    await self._recorder.emit(
                        obj,
                        type_="Warning",
                        reason="ReconcileError",
                        message=f"{child.resource.kind} {ws.name}: {err} (retrying with backoff)",
                        once_key=f"error/{ws.generation}/{type(err).__name__}/{getattr(err, 'status', '')}",
                    )
                raise

        def status_of(current: WebServer) -> dict[str, Any]:
            return compute_status(
                current,
                deployment=live[DEPLOYMENTS.kind],
                service=live[SERVICES.kind],
                problem=problem,
                now=self._clock(),
            )

        status = status_of(ws)
        if status_changed(obj.get("status"), status):
            await self._write_status(obj, status, recompute=status_of)

        if problem is None:
            self._problem_streak.pop(key, None)
            return Result()
        streak = self._problem_streak.get(key, 0)
        self._problem_streak[key] = streak + 1
        return Result(requeue_after=min(PROBLEM_REQUEUE_CAP, PROBLEM_REQUEUE_BASE * 2**streak))

    async def _ensure_child(self, ws: WebServer, ws_obj: KubeObject, child: _Child) -> KubeObject:
        kind = child.resource.kind
        desired = child.desired(ws)
        key = (ws.namespace, ws.name)
        live = child.cache.get(key)
        if live is None:
            created = await self._create(ws, ws_obj, child, desired)
            if created is not None:
                return created
            # It exists but the cache has not seen it (ours, just created) or cannot (not our labels): read it.
            # A NotFound here (deleted since the 409) propagates and the retry creates it.
            live = await self._kube.request("GET", child.resource.path(namespace=ws.namespace, name=ws.name))
        self._check_ownership(ws, kind, live)
        if kind == DEPLOYMENTS.kind and selector_mismatch(live, desired):
            raise ChildProblemError(
                Problem(
                    reason="DeploymentSelectorMismatch",
                    message=(
                        f"Deployment {ws.name} has a selector the operator did not set and cannot change (selectors "
                        f"are immutable): delete the Deployment (kubectl delete deployment {ws.name} -n "
                        f"{ws.namespace}) and the operator recreates it"
                    ),
                ),
                event_reason="SelectorMismatch",
            )
        merged = child.merge(live, desired)
        paths = changed_paths(live, merged)
        if not paths:
            return live
        patch = merge_patch(live, merged)
        if patch is None:
            return live
        adopting = controller_of(live) is None
        try:
            updated = await self._kube.request(
                "PATCH",
                child.resource.path(namespace=ws.namespace, name=ws.name),
                body=patch,
                content_type=MERGE_PATCH,
            )
        except Invalid as err:
            raise ChildProblemError(
                Problem(reason=f"{kind}Invalid", message=f"the API server rejected the {kind} update: {err.message}"),
                event_reason=f"{kind}Invalid",
            ) from err
        except Forbidden as err:
            raise _forbidden(kind, ws.name, "update", err) from err
        # Conflict (stale cache) and NotFound (deleted meanwhile) propagate: the retry starts from fresh state.
        what = "adopted orphaned" if adopting else "repaired drift in"
        metrics.DRIFT_REPAIRS.labels(kind=kind).inc()
        log.info(
            "%s %s: %s",
            what,
            kind,
            ", ".join(paths),
            extra={"namespace": ws.namespace, "object_name": ws.name, "kind": kind, "fields": paths},
        )
        await self._recorder.emit(
            ws_obj,
            type_="Normal",
            reason="Adopted" if adopting else "Repaired",
            message=f"{what.capitalize()} {kind} {ws.name}: {', '.join(paths)}",
        )
        return updated

    async def _create(self, ws: WebServer, ws_obj: KubeObject, child: _Child, desired: KubeObject) -> KubeObject | None:
        """Create the child; None when it already exists (the caller reads and checks it)."""
        kind = child.resource.kind
        try:
            created = await self._kube.request("POST", child.resource.path(namespace=ws.namespace), body=desired)
        except Conflict as err:
            if err.already_exists:
                return None
            raise
        except Invalid as err:
            raise ChildProblemError(
                Problem(
                    reason=f"{kind}Invalid",
                    message=f"the API server rejected {kind} {ws.name}: {err.message}; fix the WebServer's spec",
                ),
                event_reason=f"{kind}Invalid",
            ) from err
        except Forbidden as err:
            raise _forbidden(kind, ws.name, "create", err) from err
        log.info("created %s", kind, extra={"namespace": ws.namespace, "object_name": ws.name, "kind": kind})
        await self._recorder.emit(ws_obj, type_="Normal", reason="Created", message=f"Created {kind} {ws.name}")
        return created

    def _check_ownership(self, ws: WebServer, kind: str, live: KubeObject) -> None:
        owner = controller_of(live)
        if owner is not None:
            if owner.get("uid") == ws.uid:
                return
            holder = f"{owner.get('kind')}/{owner.get('name')}"
            detail = f"it is controlled by {holder}"
        else:
            labels = (live.get("metadata") or {}).get("labels") or {}
            if labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE and labels.get(INSTANCE_LABEL) == ws.name:
                return  # orphaned child of ours (e.g. kubectl delete --cascade=orphan): adopt it
            detail = "it was not created by webserver-operator"
        raise ChildProblemError(
            Problem(
                reason=f"{kind}Conflict",
                message=(
                    f"a {kind} named {ws.name} already exists in namespace {ws.namespace} and {detail}; the operator "
                    f"will not modify it. Delete or rename that {kind}, or rename the WebServer"
                ),
            ),
            event_reason=f"{kind}Conflict",
        )

    async def _write_status(
        self,
        obj: KubeObject,
        status: dict[str, Any],
        *,
        recompute: Callable[[WebServer], dict[str, Any]] | None = None,
    ) -> None:
        """PUT the status; on 409 retry once from a fresh read.

        A 409 means the WebServer changed since the cache saw it. ``recompute`` rebuilds the status for the fresh
        object from the same verdict inputs (children, problem); without it the 409 propagates and the controller
        retries the whole reconcile.
        """
        meta = obj["metadata"]
        path = WEBSERVERS.path(namespace=meta["namespace"], name=meta["name"], subresource="status")
        body = copy.deepcopy(obj)
        body["status"] = status
        try:
            await self._kube.request("PUT", path, body=body)
        except Conflict:
            if recompute is None:
                raise
            fresh = await self._fresh_webserver(obj)
            if fresh is None:
                return
            try:
                redo = recompute(WebServer.model_validate(fresh))
            except ValidationError:
                return  # the spec changed into something invalid: the next reconcile reports it
            if not status_changed(fresh.get("status"), redo):
                return
            body = copy.deepcopy(fresh)
            body["status"] = redo
            await self._kube.request("PUT", path, body=body)
        except NotFound:
            log.debug("WebServer deleted before its status was written", extra={"object_name": meta["name"]})

    async def _fresh_webserver(self, obj: KubeObject) -> KubeObject | None:
        meta = obj["metadata"]
        try:
            return await self._kube.request("GET", WEBSERVERS.path(namespace=meta["namespace"], name=meta["name"]))
        except NotFound:
            return None

    async def _invalid_spec(self, obj: KubeObject, err: ValidationError) -> Result:
        """The API server accepted something our models reject (e.g. an older CRD): report, do not touch children."""
        details = "; ".join(f"spec.{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in err.errors())
        message = (
            f"the WebServer's spec is invalid: {details}. Fix the spec (`kubectl explain webserver.spec` lists the "
            "fields); the CRD may be older than the operator: upgrade it with `kubectl apply --server-side`"
        )
        meta = obj.get("metadata") or {}
        generation = int(meta.get("generation") or 0)
        old_status = obj.get("status") or {}
        status = dict(old_status)
        status["observedGeneration"] = generation
        status["conditions"] = set_condition(
            list(old_status.get("conditions") or []),
            type=READY,
            status="False",
            reason="InvalidSpec",
            message=message,
            observed_generation=generation,
            now=self._clock(),
        )
        if status_changed(old_status or None, status):
            await self._write_status(obj, status)
        await self._recorder.emit(
            obj, type_="Warning", reason="InvalidSpec", message=message, once_key=f"invalid/{generation}"
        )
        log.warning(
            "invalid WebServer spec: %s",
            details,
            extra={"namespace": meta.get("namespace"), "object_name": meta.get("name")},
        )
        return Result()
