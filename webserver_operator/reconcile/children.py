"""Sync one WebServer's children: create, check, adopt, repair or retire its Deployment, Service and budget.

The child half of a reconcile (``reconcile.reconciler`` is the orchestrator and writes the status). ``ChildSync.sync``
brings every child to what ``desired`` says, concurrently, and returns an ``Observation``: what each looks like now and
the first ``Problem`` met. Syncing one child:
- missing: create it (never an apply that could overwrite a foreign object); a 409 AlreadyExists means ours, not
  yet in the cache, or a foreign object: read it and check;
- missing again seconds after this replica created it for the same WebServer uid: read the WebServer first, and
  requeue instead when the cache is behind it (``reconcile.recreates``: a stale uid would make a create/GC loop);
- controlled by someone else, or without our labels: never adopted or written; a ``Problem`` (Ready=False, one
  Warning per generation, a slow requeue: the label-filtered cache will not tell us when it goes away);
- our labels and no controller (left by ``--cascade=orphan``): adopted, unless the orphan as it would be after the
  patch grants more than a WebServer may ask for (``reconcile.adoption``: beyond Pod Security baseline, a projected
  token, a Service with ``externalIPs`` ...): then a ``Problem``, and no write;
- drift: an optimistic-concurrency merge patch of just the owned fields (others' labels, annotations and
  ``kubectl rollout restart`` survive); repeated drift repairs of one child are a fight with another controller
  (``reconcile.fights``), reported with the other writer's name;
- the PodDisruptionBudget below two replicas: ours deleted (uid and resourceVersion preconditions), a foreign one kept.

Every write's answer is recorded in ``own_writes``, so that its echo from the watch queues no second reconcile
(``reconcile.triggers``). Per-WebServer memories (namesakes, the versions found clean, an owner found behind, the drift
repairs of ``reconcile.fights``) live in the reconciler's ``reconcile.memory.Memory``; the re-create window keeps its
own order and is attached to it, so ``Memory.forget`` drops a WebServer's entries there too. Writes go through the
no-retry client view, so failures go back to the work queue's per-key backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from webserver_operator import metrics
from webserver_operator.api.models import WEBSERVERS, WebServer
from webserver_operator.core.jsondiff import Difference, compare
from webserver_operator.core.podsecurity import PodSecurityLevel
from webserver_operator.core.resources import DEPLOYMENTS, PODDISRUPTIONBUDGETS, SERVICES, Resource
from webserver_operator.core.vocabulary import (
    MERGE_PATCH,
    ApiRequests,
    KubeObject,
    ObjectReader,
    api_group,
    controller_of,
)
from webserver_operator.desired import (
    PRE_STOP_POD_LABEL,
    child_name,
    desired_deployment,
    desired_pdb,
    desired_service,
    orphan_of,
    selects_pre_stop_pods,
    template_revision_of,
)
from webserver_operator.kube.client import FIELD_MANAGER
from webserver_operator.kube.errors import ApiError, Conflict, NotFound, TooManyRequests, TransportError
from webserver_operator.reconcile.adoption import deployment_refusals, service_refusals
from webserver_operator.reconcile.cached import WEBSERVER_SKIM
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.fights import FightLog, last_writer
from webserver_operator.reconcile.handover import pre_stop_pods_only
from webserver_operator.reconcile.memory import Memory
from webserver_operator.reconcile.owned import (
    merge_owned_budget,
    merge_owned_deployment,
    merge_owned_service,
    selector_mismatch,
)
from webserver_operator.reconcile.problems import GARBAGE_COLLECTION, GC_PATIENCE, Problem, from_api_error
from webserver_operator.reconcile.recreates import RecentCreates
from webserver_operator.reconcile.status import Observation
from webserver_operator.reconcile.triggers import OwnWrites

__all__ = ["ChildSync", "OwnerBehind", "involved"]

log = logging.getLogger(__name__)


class OwnerBehind(Conflict):
    """The cached WebServer is older than the API server's (deleted, or recreated under a new uid): a requeue."""


@dataclass(frozen=True)
class _Child:
    """One kind of child: where it lives, what it should be, and which of its fields are ours."""

    resource: Resource
    cache: ObjectReader
    desired: Callable[[WebServer], KubeObject | None]
    merge: Callable[[KubeObject, KubeObject], KubeObject]
    immutable_selector: bool = False

    @property
    def kind(self) -> str:
        return self.resource.kind

    def path(self, ws: WebServer) -> str:
        """The REST path of ``ws``'s child of this kind (named by ``desired.child_name``)."""
        return self.resource.path(namespace=ws.namespace, name=child_name(ws))


class ChildSync:
    """``sync(ws, deployment) -> Observation`` for one WebServer's children; concurrent calls for different keys."""

    def __init__(
        self,
        *,
        api: ApiRequests,
        deployments: ObjectReader,
        services: ObjectReader,
        disruption_budgets: ObjectReader | None,
        recorder: EventRecorder,
        memory: Memory,
        own_writes: OwnWrites,
        pod_security: PodSecurityLevel,
        clock: Callable[[], datetime],
    ) -> None:
        self._api = api
        #: The per-child histories: the repairs in the WebServer's memory record, the recent creates in a window of
        #: their own attached to the memory (``Memory.forget`` drops a WebServer's from both).
        self._fights = FightLog(lambda: clock().timestamp(), memory)
        self._creates = RecentCreates(lambda: clock().timestamp())
        memory.attach(self._creates)
        self._recorder = recorder
        self._memory = memory
        self.own_writes = own_writes
        self._pod_security = pod_security
        self._deployment = _Child(
            DEPLOYMENTS, deployments, desired_deployment, merge_owned_deployment, immutable_selector=True
        )
        self._service = _Child(SERVICES, services, desired_service, merge_owned_service)
        self._budget = (
            _Child(PODDISRUPTIONBUDGETS, disruption_budgets, desired_pdb, merge_owned_budget)
            if disruption_budgets is not None
            else None
        )
        self._children = tuple(c for c in (self._deployment, self._service, self._budget) if c is not None)
        # Each kind's repair counter exists at 0 from the start: a series born at 1 hides the first repair from rate().
        self._repairs = {child.kind: metrics.DRIFT_REPAIRS.labels(kind=child.kind) for child in self._children}

    def cached_deployment(self, ws: WebServer) -> KubeObject | None:
        """``ws``'s Deployment as the cache holds it (None: not there)."""
        return self._deployment.cache.get((ws.namespace, child_name(ws)))

    def current(self, ws: WebServer) -> Observation | None:
        """The cached children, when they are the versions the last sync found clean for this uid and generation.

        Clean: owned by this WebServer, selector as desired, no owned field to write, no fight. What the children
        should be depends only on the WebServer's uid, name and spec (``desired``), and a spec change moves the
        generation; anything that changes a child moves its resourceVersion. So the same versions mean the same
        answer, and the compare is skipped (None: sync them).
        """
        record = self._memory.get((ws.namespace, ws.name))
        clean = record.children_clean if record is not None else None
        if clean is None:
            return None
        name = (ws.namespace, child_name(ws))
        deployment, service = self._deployment.cache.get(name), self._service.cache.get(name)
        if deployment is None or service is None:
            return None
        budget = self._budget.cache.get(name) if self._budget is not None else None
        versions = (_resource_version(deployment), _resource_version(service), _version_or_none(budget))
        if clean != (ws.uid, ws.generation, *versions):
            return None
        return Observation(deployment=deployment, service=service)

    async def sync(self, ws: WebServer, deployment: KubeObject) -> Observation:
        """Bring every child to what ``ws`` wants, with ``deployment`` at the template revision chosen.

        The Service selects only pods with the preStop pause once ``reconcile.handover`` says so, from the cached
        Deployment and Service (a write of the Deployment in this same call is seen by the next reconcile).
        """
        name = (ws.namespace, child_name(ws))
        only = pre_stop_pods_only(
            template_revision_of(deployment), self._deployment.cache.get(name), self._service.cache.get(name)
        )
        given = {self._deployment: deployment, self._service: desired_service(ws, pre_stop_pods_only=only)}
        desired = {child: given[child] if child in given else child.desired(ws) for child in self._children}
        return await self._sync_children(ws, desired)

    async def _sync_children(self, ws: WebServer, desired: dict[_Child, KubeObject | None]) -> Observation:
        """Sync every child, concurrently (they are independent: one round trip instead of two on a create).

        Returns what each looks like now and the first problem met, in child order; other children are still synced.
        A retriable API error is reported once and raised (the first one, in child order) after all have run.
        The children this call created are reported in one ``Created`` Event: an Event is a write like any other, and
        one per child would cost a bulk create a third of its writes. The PodDisruptionBudget, which comes and goes with
        the replica count, has Events of its own (``_budget_events``).
        """
        children = self._children
        outcomes = await asyncio.gather(
            *(
                self._sync_child(ws, child, want) if want is not None else self._retire(ws, child)
                for child, want in ((child, desired[child]) for child in children)
            ),
            return_exceptions=True,
        )
        involved_ = involved(ws)
        made = [
            child
            for child, out in zip(children, outcomes, strict=True)
            if isinstance(out, _Synced) and out.created and child is not self._budget
        ]
        if made:
            # One log line and one Event for what this reconcile created, however many children that was.
            kinds = [child.kind for child in made]
            log.info(
                "created %s",
                " and ".join(kinds),
                extra={**_where(ws), "kinds": kinds},
            )
            names = " and ".join(f"{child.kind} {child_name(ws)}" for child in made)
            await self._recorder.emit(involved_, type_="Normal", reason="Created", message=f"Created {names}")
        synced: dict[_Child, _Synced] = {}
        failure: BaseException | None = None
        for child, outcome in zip(children, outcomes, strict=True):
            if isinstance(outcome, _Synced):
                synced[child] = outcome
                problem = outcome.problem
                if problem is not None and problem.stalled:
                    await self._recorder.emit(
                        involved_,
                        type_="Warning",
                        reason=problem.event_reason,
                        message=problem.message,
                        once_key=f"{problem.reason}/{ws.generation}/{problem.message}",
                    )
            elif isinstance(outcome, ApiError | TransportError):
                # Retried by the controller (with backoff; a 429 once the API server answers again: its message
                # says so); tell the user once per distinct error, not per retry.
                if not isinstance(outcome, Conflict | NotFound):
                    retry = "" if isinstance(outcome, TooManyRequests) else " (retrying with backoff)"
                    await self._recorder.emit(
                        involved_,
                        type_="Warning",
                        reason="ReconcileError",
                        message=f"{child.kind} {child_name(ws)}: {outcome}{retry}",
                        once_key=f"error/{ws.generation}/{type(outcome).__name__}/{getattr(outcome, 'status', '')}",
                    )
                failure = failure or outcome
            else:
                failure = failure or outcome
        if self._budget is not None and self._budget in synced:
            await self._budget_events(ws, synced[self._budget])
        if failure is not None:
            raise failure
        key = (ws.namespace, ws.name)
        deployment, service = synced[self._deployment], synced[self._service]
        budget = synced[self._budget] if self._budget is not None else _Synced(None, clean=True)
        if deployment.clean and service.clean and budget.clean:
            self._memory.of(key).children_clean = (
                ws.uid,
                ws.generation,
                _resource_version(deployment.live or {}),
                _resource_version(service.live or {}),
                _version_or_none(budget.live),
            )
        else:
            self._memory.of(key).children_clean = None
        return Observation(
            deployment=synced[self._deployment].live,
            service=synced[self._service].live,
            problem=next((s.problem for s in synced.values() if s.problem is not None), None),
        )

    async def _budget_events(self, ws: WebServer, synced: _Synced) -> None:
        """The PodDisruptionBudget's own Events: created (with two or more replicas) and removed (below two)."""
        name = child_name(ws)
        if synced.created:
            message = (
                f"Created PodDisruptionBudget {name}: voluntary evictions (kubectl drain, node upgrades) take at most "
                f"1 of the {ws.spec.replicas} pods at a time"
            )
        elif synced.removed:
            message = (
                f"Deleted PodDisruptionBudget {name}: with {ws.spec.replicas} replica(s) a budget could only hold "
                "node drains forever; a drain now evicts the pod at once, and its replacement serves once ready"
            )
        else:
            return
        log.info("%s", message, extra=_where(ws))
        await self._recorder.emit(
            involved(ws),
            type_="Normal",
            reason="Created" if synced.created else "Deleted",
            message=message,
        )

    async def _retire(self, ws: WebServer, child: _Child) -> _Synced:
        """Delete our child of a kind the WebServer no longer needs (the budget below two replicas).

        Only a child controlled by this WebServer's uid is deleted, with the cached uid and resourceVersion as
        preconditions: a foreign namesake, or one changed since, is never deleted (a 409, retried from fresh state).
        Absent, or not ours: nothing to do (clean).
        """
        live = child.cache.get((ws.namespace, child_name(ws)))
        owner = controller_of(live) if live is not None else None
        if live is None or owner is None or owner.get("uid") != ws.uid:
            return _Synced(None, clean=True)
        meta = live.get("metadata") or {}
        preconditions = {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        with contextlib.suppress(NotFound):  # gone already: what we wanted
            await self._api.request("DELETE", child.path(ws), body={"preconditions": preconditions})
        return _Synced(None, removed=True)

    async def _sync_child(self, ws: WebServer, child: _Child, desired: KubeObject) -> _Synced:
        """Create, check and repair one child: what it looks like now, whether this call created it, any problem.

        A child that is not ours (or has a selector we cannot fix) is reported and not described (``live`` None); a
        child whose update the API server rejected is described as it still is.
        """
        live = child.cache.get((ws.namespace, child_name(ws)))
        record = self._memory.get((ws.namespace, ws.name))
        if live is None and record is not None and child.kind in record.not_ours:
            live = await self._read(child, ws)
        if live is None:
            try:
                new = await self._create_checked(ws, child, desired)
            except Problem as problem:
                return _Synced(None, problem)
            if new is not None:
                return _Synced(new, created=True)
            # It exists but the cache has not seen it (ours, just created) or cannot (not our labels): read it.
            # A NotFound here (deleted since the 409) propagates and the retry creates it.
            live = await self._api.request("GET", child.path(ws))
        try:
            self._check_ownership(ws, child, live)
        except Problem as problem:
            return _Synced(None, problem)
        if child.immutable_selector and selector_mismatch(live, desired):
            return _Synced(
                None,
                Problem(
                    "DeploymentSelectorMismatch",
                    f"Deployment {ws.name} has a selector the operator did not set and cannot change (selectors are "
                    f"immutable): delete the Deployment (kubectl delete deployment {ws.name} -n {ws.namespace}) and "
                    "the operator recreates it",
                    event_reason="SelectorMismatch",
                ),
            )
        merged = child.merge(live, desired)
        if controller_of(live) is None:
            refused = self._adoption_refused(ws, child, live, merged)
            if refused is not None:
                return _Synced(None, refused)
        difference = compare(live, merged)
        if difference.patch is not None:
            try:
                live = await self._repair(ws, child, live, difference)
            except Problem as problem:
                return _Synced(live, problem)  # rejected: the old child still exists and serves
        fight = self._fights.ongoing((ws.namespace, ws.name, child.kind))
        if fight is not None:
            return _Synced(live, Problem("FightingAnotherController", fight.message))
        return _Synced(live, clean=difference.patch is None)

    def _adoption_refused(self, ws: WebServer, child: _Child, live: KubeObject, merged: KubeObject) -> Problem | None:
        """Why the orphan ``live`` may not be adopted, judged as it would be after the patch (``reconcile.adoption``).

        A refusal is a ``Problem``: Stalled, one Warning per generation, no write to the orphan, a slow recheck (and
        the orphan's own events wake the WebServer: it carries our labels, so the child cache sees it).
        """
        if child is self._deployment:
            refusals = deployment_refusals(merged, pod_security=self._pod_security)
        else:
            refusals = service_refusals(live, merged)
        if not refusals:
            return None
        kind, where = child.kind, f"{child_name(ws)} -n {ws.namespace}"
        return Problem(
            f"{kind}AdoptionRefused",
            f"{kind} {child_name(ws)} has this operator's labels and no controller (an orphan), but adopting it would "
            f"give the WebServer's pods or port what a WebServer may not ask for: {'; '.join(refusals)}. The operator "
            f"will not adopt or modify it: delete it (kubectl delete {kind.lower()} {where}) and the operator creates "
            f"its own, or remove those fields from it",
        )

    async def _create_checked(self, ws: WebServer, child: _Child, desired: KubeObject) -> KubeObject | None:
        """Create the child; a second create within ``RECREATE_WINDOW`` also reads the owner (``reconcile.recreates``).

        The read goes beside the create, not before it: the usual reason for a quick re-create is someone deleting a
        brand-new child, and the repair should not wait a round trip for a check that passes. When the check fails
        (the cached WebServer is gone or replaced on the API server), the child just created is owned by a uid that
        no longer exists and the garbage collector removes it; ``OwnerBehind`` is raised, and from then on, until a
        check passes, the owner is read before any create of its children. So a stale cache costs at most one more
        short-lived child, and never a loop of them.
        """
        key = (ws.namespace, ws.name)
        if not self._creates.again_soon((ws.namespace, ws.name, child.kind), ws.uid):
            return await self._create(ws, child, desired)
        record = self._memory.get(key)
        if record is not None and record.owner_behind == ws.uid:
            await self._confirm_owner(ws, child)
            record.owner_behind = None
            return await self._create(ws, child, desired)
        created, confirmed = await asyncio.gather(
            self._create(ws, child, desired), self._confirm_owner(ws, child), return_exceptions=True
        )
        if isinstance(confirmed, BaseException):
            if isinstance(confirmed, OwnerBehind):
                self._memory.of(key).owner_behind = ws.uid
            raise confirmed
        if isinstance(created, BaseException):
            raise created
        return created

    async def _create(self, ws: WebServer, child: _Child, desired: KubeObject) -> KubeObject | None:
        """Create the child; None when it already exists (the caller reads and checks it)."""
        try:
            created = await self._api.request("POST", child.resource.path(namespace=ws.namespace), body=desired)
        except Conflict as err:
            if err.already_exists:
                return None
            raise
        except ApiError as err:
            problem = from_api_error(err, kind=child.kind, name=ws.name, verb="create")
            if problem is None:
                raise
            raise problem from err
        self._creates.created((ws.namespace, ws.name, child.kind), ws.uid)
        self.own_writes.record(child.kind, created)
        return created

    async def _confirm_owner(self, ws: WebServer, child: _Child) -> None:
        """Before creating a child a second time within seconds, check the cached WebServer is still the API server's.

        Raises ``OwnerBehind`` (a 409 to the work queue: a routine, rate-limited requeue) when the WebServer was
        deleted, or deleted and recreated under a new uid, since the cached copy: a child created from it would be
        owned by a uid that no longer exists and deleted by the garbage collector (``reconcile.recreates``).
        """
        path = WEBSERVERS.path(namespace=ws.namespace, name=ws.name)
        try:
            current = await self._api.request("GET", path, decode=WEBSERVER_SKIM.object)
        except NotFound:
            current = {}
        uid = (current.get("metadata") or {}).get("uid")
        if uid != ws.uid:
            now = f"uid {uid}" if uid else "deleted"
            raise OwnerBehind(
                status=409,
                reason="Conflict",
                message=(
                    f"not creating {child.kind} {child_name(ws)} again for WebServer uid {ws.uid}: the WebServer is "
                    f"{now} on the API server and the cache has not caught up yet; retried when it has"
                ),
                method="POST",
                path=child.resource.path(namespace=ws.namespace),
            )

    async def _repair(self, ws: WebServer, child: _Child, live: KubeObject, difference: Difference) -> KubeObject:
        """Write the owned fields that differ (or adopt an orphan) with one optimistic-concurrency merge patch.

        Reported as an adoption, as an update when the WebServer's spec changed since its status last said so
        (``observedGeneration`` behind ``generation``: the user asked for it), or else as a drift repair (someone
        changed the child): only those count in ``webserver_operator_drift_repairs_total``, so rolling out a new
        image to every WebServer does not look like a thousand repairs.
        """
        adopting = controller_of(live) is None
        observed = ws.status.observed_generation if ws.status is not None else None
        spec_changed = not adopting and observed != ws.generation
        fought = (ws.namespace, ws.name, child.kind)
        writer = None
        if not adopting and not spec_changed and self._fights.next_repair_is_a_fight(fought):
            # The cache drops managedFields: read who wrote the field once, when the repair makes it a fight.
            current = await self._api.request("GET", child.path(ws))
            writer = last_writer(current, difference.paths, ignore=FIELD_MANAGER)
        try:
            updated = await self._api.request(
                "PATCH",
                child.path(ws),
                body=difference.patch,
                content_type=MERGE_PATCH,
            )
        except ApiError as err:
            # Conflict (stale cache) and NotFound (deleted meanwhile) propagate: the retry starts from fresh state.
            problem = from_api_error(err, kind=child.kind, name=ws.name, verb="update")
            if problem is None:
                raise
            raise problem from err
        self.own_writes.record(child.kind, updated)
        if _resource_version(updated) == _resource_version(live):
            # The API server stored nothing new (it normalised our values to what it had): not a repair.
            log.debug("no-op write to %s %s/%s", child.kind, ws.namespace, ws.name)
            return updated
        paths = difference.paths
        if not adopting and _hands_over(live, difference):
            # Not drift: the move off revision 1 (``reconcile.handover``), once per WebServer.
            log.info("%s now selects only pods with the preStop pause", child.kind, extra=_where(ws))
            await self._recorder.emit(
                involved(ws),
                type_="Normal",
                reason="HandedOver",
                message=(
                    f"{child.kind} {child_name(ws)} now sends traffic only to pods with the preStop pause "
                    f"({PRE_STOP_POD_LABEL}); the pods started without it leave it before the rollout stops them"
                ),
            )
            return updated
        what, reason = (
            ("adopted orphaned", "Adopted")
            if adopting
            else ("updated", "Updated")
            if spec_changed
            else ("repaired drift in", "Repaired")
        )
        if reason != "Updated":
            self._repairs[child.kind].inc()
        if reason == "Repaired":
            self._fights.repaired(fought, paths, writer)
        log.info(
            "%s %s: %s",
            what,
            child.kind,
            ", ".join(paths),
            extra={**_where(ws), "kind": child.kind, "fields": paths},
        )
        await self._recorder.emit(
            involved(ws),
            type_="Normal",
            reason=reason,
            message=f"{what.capitalize()} {child.kind} {child_name(ws)}: {', '.join(paths)}",
        )
        return updated

    async def _read(self, child: _Child, ws: WebServer) -> KubeObject | None:
        try:
            return await self._api.request("GET", child.path(ws))
        except NotFound:
            record = self._memory.of((ws.namespace, ws.name))
            record.not_ours -= {child.kind}
            return None

    def _check_ownership(self, ws: WebServer, child: _Child, live: KubeObject) -> None:
        record = self._memory.of((ws.namespace, ws.name))
        try:
            self._raise_unless_ours(ws, child, live)
        except Problem:
            record.not_ours |= {child.kind}
            raise
        record.not_ours -= {child.kind}

    def _raise_unless_ours(self, ws: WebServer, child: _Child, live: KubeObject) -> None:
        owner = controller_of(live)
        if owner is not None:
            if owner.get("uid") == ws.uid:
                return
            group = api_group(str(owner.get("apiVersion") or ""))
            if owner.get("kind") == ws.kind and group == api_group(ws.api_version) and owner.get("name") == ws.name:
                raise self._garbage_collection(ws, child, owner)
            detail = f"it is controlled by {owner.get('kind')}{'.' + group if group else ''}/{owner.get('name')}"
        else:
            if orphan_of(live) == ws.name:
                return  # orphaned child of ours (e.g. kubectl delete --cascade=orphan): adopt it
            detail = "it was not created by webserver-operator"
        kind = child.kind
        raise Problem(
            f"{kind}Conflict",
            f"a {kind} named {ws.name} already exists in namespace {ws.namespace} and {detail}; the operator will not "
            f"modify it. Delete or rename that {kind}, or rename the WebServer",
        )

    def _garbage_collection(self, ws: WebServer, child: _Child, owner: KubeObject) -> Problem:
        """The child of a deleted WebServer of the same name: a wait, until it has lasted about a minute.

        The garbage collector removes such children within seconds. When it has not after ``GC_PATIENCE`` quick
        rechecks (kube-controller-manager down, a finalizer holding the child), waiting quietly would leave the
        WebServer InProgress forever for ``helm --wait`` and Flux, and a GET every second or two: it becomes a
        problem for a person instead, with a Warning and the slow recheck.
        """
        kind, where = child.kind, f"{ws.name} -n {ws.namespace}"
        record = self._memory.get((ws.namespace, ws.name))
        if (record.problem_streak if record is not None else 0) < GC_PATIENCE:
            return Problem(
                "WaitingForGarbageCollection",
                f"{kind} {ws.name} still belongs to a deleted WebServer of the same name (uid {owner.get('uid')}); "
                "the garbage collector is removing it, then the operator creates a new one",
                stalled=False,
                recheck=GARBAGE_COLLECTION,
            )
        return Problem(
            "GarbageCollectionStuck",
            f"{kind} {ws.name} still belongs to a deleted WebServer of the same name (uid {owner.get('uid')}) after "
            f"{GC_PATIENCE} checks over about a minute: the garbage collector has not removed it. Check that "
            f"kube-controller-manager runs and whether a finalizer holds it (kubectl get {kind.lower()} {where} "
            f"-o jsonpath='{{.metadata.finalizers}}'), or delete it (kubectl delete {kind.lower()} {where}); the "
            "operator then creates a new one",
        )


@dataclass(frozen=True)
class _Synced:
    """One child after its sync: as it is now (None: absent, or not ours), whether created now, and any problem."""

    live: KubeObject | None
    problem: Problem | None = None
    created: bool = False
    #: Deleted now: a child the WebServer no longer needs.
    removed: bool = False
    #: Checked and found as desired, nothing written: the same version needs no check again (``ChildSync.current``).
    clean: bool = False


def involved(ws: WebServer) -> KubeObject:
    """The WebServer as an Event's involved object (its raw metadata carries uid and resourceVersion)."""
    return {"apiVersion": ws.api_version, "kind": ws.kind, "metadata": ws.metadata}


def _hands_over(live: KubeObject, difference: Difference) -> bool:
    """Whether the patch makes a Service that selected every pod select only those with the preStop pause."""
    patch = difference.patch or {}
    selector = (patch.get("spec") or {}).get("selector") or {}
    wanted = selects_pre_stop_pods({"spec": {"selector": selector}})
    return wanted and not selects_pre_stop_pods(live)


def _where(ws: WebServer) -> dict[str, str]:
    """The log fields that name the WebServer."""
    return {"namespace": ws.namespace, "object_name": ws.name}


def _resource_version(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _version_or_none(obj: KubeObject | None) -> str | None:
    return _resource_version(obj) if obj is not None else None
