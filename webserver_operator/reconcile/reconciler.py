"""Reconcile one WebServer: make its Deployment and Service match, then tell the truth in its status.

Level-triggered and idempotent: every call starts from the cached state of the WebServer and its children and does
the same thing for the same inputs; there are no create/update/delete event branches. Reads come from the informer
caches (zero polling reads); a write is sent only when an owned field differs, so a converged WebServer costs no
writes at all, on any number of resyncs. Where each ownership rule lives is listed in docs/architecture.md.

``reconcile`` reads top to bottom: look the WebServer up, validate it (a spec the models reject, or pods beyond the
Pod Security baseline level, is a ``Refusal``: reported, no child touched), sync each child, write the status that
``reconcile.status.next_status`` decides on (it owns the whole status decision; this module only does the I/O),
decide when to look again. Each child's sync returns what the child looks like now, whether it was created and any
``Problem`` met. Syncing one child:
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
- no finalizers: the garbage collector deletes the children through their ownerReference.

Every write's answer is recorded in ``own_writes``, so that its echo from the watch queues no second reconcile
(``reconcile.triggers``). Driven by ``runtime.controller.loop.Controller`` (declared in ``reconcile.setup``); hands
writes to the API through the no-retry client view, so failures go back to the work queue's per-key backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from webserver_operator import metrics
from webserver_operator.api.models import WEBSERVERS, WebServer
from webserver_operator.core import resourceversion
from webserver_operator.core.jsondiff import Difference, compare
from webserver_operator.core.podsecurity import PodSecurityLevel, baseline_violations
from webserver_operator.core.resources import DEPLOYMENTS, PODDISRUPTIONBUDGETS, SERVICES, Resource
from webserver_operator.core.vocabulary import (
    MERGE_PATCH,
    ApiRequests,
    KubeObject,
    ObjectKey,
    ObjectReader,
    api_group,
    controller_of,
)
from webserver_operator.desired import (
    TEMPLATE_REVISION,
    child_name,
    desired_deployment,
    desired_pdb,
    desired_service,
    orphan_of,
    template_revision_of,
)
from webserver_operator.kube.client import FIELD_MANAGER
from webserver_operator.kube.errors import ApiError, Conflict, NotFound, TransportError
from webserver_operator.reconcile.adoption import deployment_refusals, service_refusals
from webserver_operator.reconcile.cached import webserver_as_cached
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.fights import FightLog, last_writer
from webserver_operator.reconcile.owned import (
    merge_owned_budget,
    merge_owned_deployment,
    merge_owned_service,
    selector_mismatch,
)
from webserver_operator.reconcile.probes import ProbeFailures
from webserver_operator.reconcile.problems import GARBAGE_COLLECTION, GC_PATIENCE, Problem, from_api_error
from webserver_operator.reconcile.recreates import RecentCreates
from webserver_operator.reconcile.revisions import (
    Pacer,
    RevisionCounts,
    pending_message,
    revision_for,
    upgrade_requested,
)
from webserver_operator.reconcile.status import (
    PROGRESS_DETAIL_INTERVAL,
    Observation,
    Refusal,
    beyond_baseline,
    invalid_spec,
    next_status,
    progress_detail,
)
from webserver_operator.reconcile.triggers import OwnWrites
from webserver_operator.reconcile.upgrade_optout import NamespaceOptOut
from webserver_operator.runtime.controller.result import Result

log = logging.getLogger(__name__)


class OwnerBehind(Conflict):
    """The cached WebServer is older than the API server's (deleted, or recreated under a new uid): a requeue."""


@dataclass(frozen=True)
class Caches:
    webservers: ObjectReader
    deployments: ObjectReader
    services: ObjectReader
    #: The PodDisruptionBudgets the operator labelled; None: budgets are not managed (a reader without that informer).
    disruption_budgets: ObjectReader | None = None


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


class WebServerReconciler:
    """``reconcile((namespace, name)) -> Result``; safe to call concurrently for different keys."""

    def __init__(
        self,
        *,
        api: ApiRequests,
        caches: Caches,
        recorder: EventRecorder,
        pod_security: PodSecurityLevel = "baseline",
        template_upgrade_rate: float = 0.0,
        clock: Callable[[], datetime] = lambda: datetime.now(tz=UTC),
    ) -> None:
        self._api = api
        self._pod_security = pod_security
        self._caches = caches
        self._recorder = recorder
        self._clock = clock
        self._problem_streak: dict[ObjectKey, int] = {}
        #: Children found to be someone else's namesake: outside the label-filtered caches, so read on the next look
        #: rather than created (a create could only be refused with 409 AlreadyExists).
        self._not_ours: set[tuple[ObjectKey, str]] = set()
        #: Our last status write per WebServer the cache may not have seen yet: the resourceVersion it replaced and
        #: the object the API server returned (see ``_latest``).
        self._status_written: dict[ObjectKey, tuple[str, KubeObject]] = {}
        #: When (clock seconds) this replica last wrote each WebServer's status: a ``progress_detail`` write waits
        #: until ``PROGRESS_DETAIL_INTERVAL`` after it. Lost on restart, which only means one write goes at once.
        self._status_put_at: dict[ObjectKey, float] = {}
        #: Per WebServer, what the last status decision read (``_status_inputs``) when it found the stored status
        #: current or made it so: ``next_status`` is a pure function of those, so while a reconcile reads the same
        #: versions (the echo of our own write, a resync, the other child's event) it is not computed again.
        self._status_current: dict[ObjectKey, _StatusInputs] = {}
        #: Per WebServer, the (uid, generation) and the children's resourceVersions the last sync found owned, with
        #: every owned field as desired and nothing to write (``_children_current``): while a reconcile reads exactly
        #: those (a Deployment's status event changes neither), the children are not compared again.
        self._children_clean: dict[ObjectKey, _ChildrenVersions] = {}
        #: The resourceVersion each of our writes got back: their echoes need no reconcile (``reconcile.triggers``).
        self.own_writes = OwnWrites()
        self._fights = FightLog(lambda: self._clock().timestamp())
        self._creates = RecentCreates(lambda: self._clock().timestamp())
        #: WebServers (key: the cached uid) whose quick re-create found the owner gone or replaced on the API server:
        #: until a check passes, their children are not created again before the owner is read (``_confirm_owner``).
        self._owner_behind: dict[ObjectKey, str] = {}
        #: The template revision each WebServer's Deployment is at: the per-revision gauge.
        self._revisions = RevisionCounts()
        #: Moves WebServers left on an old template revision at the admin's pace (off at rate 0).
        self._pacer = Pacer(template_upgrade_rate, lambda: self._clock().timestamp())
        #: Namespaces labelled webserver-operator.dev/template-upgrade=manual: the pacer leaves them alone.
        self._manual = NamespaceOptOut(api, lambda: self._clock().timestamp())
        #: Why unready pods are unready: the kubelet's last probe failure, read only while they are.
        self._probes = ProbeFailures(api, lambda: self._clock())  # noqa: PLW0108 - late bound: tests move the clock
        self._deployment = _Child(
            DEPLOYMENTS, caches.deployments, desired_deployment, merge_owned_deployment, immutable_selector=True
        )
        self._service = _Child(SERVICES, caches.services, desired_service, merge_owned_service)
        self._budget = (
            _Child(PODDISRUPTIONBUDGETS, caches.disruption_budgets, desired_pdb, merge_owned_budget)
            if caches.disruption_budgets is not None
            else None
        )
        self._children = tuple(c for c in (self._deployment, self._service, self._budget) if c is not None)
        # Each kind's repair counter exists at 0 from the start: a series born at 1 hides the first repair from rate().
        self._repairs = {child.kind: metrics.DRIFT_REPAIRS.labels(kind=child.kind) for child in self._children}

    def forget(self, key: ObjectKey) -> None:
        """Drop every memory kept for ``key``: the WebServer is deleted, or its shard was handed to another replica.

        The one place that knows every per-WebServer memory, called from both paths (the delete branch of
        ``reconcile`` and the shard eviction handler of ``reconcile.setup``), so that a memory added later is forgotten
        on both. ``remembered_keys`` is its check.
        """
        self._problem_streak.pop(key, None)
        self._not_ours -= {(key, child.kind) for child in self._children}
        self._status_written.pop(key, None)
        self._status_put_at.pop(key, None)
        self._status_current.pop(key, None)
        self._children_clean.pop(key, None)
        self._owner_behind.pop(key, None)
        self._fights.forget(*key)
        self._creates.forget(*key)
        self._revisions.forget(key)
        self._probes.forget(key)
        self._pacer.forget(key)
        # The children are named like the WebServer (``desired.child_name``).
        self.own_writes.forget(*key, kinds=(WEBSERVERS.kind, *(child.kind for child in self._children)))

    def remembered_keys(self) -> set[ObjectKey]:
        """Every WebServer some per-key memory of this reconciler still holds (what ``forget`` must clear)."""
        return (
            set(self._problem_streak)
            | {key for key, _ in self._not_ours}
            | set(self._status_written)
            | set(self._status_put_at)
            | set(self._status_current)
            | set(self._children_clean)
            | set(self._owner_behind)
            | self._fights.keys()
            | self._creates.keys()
            | self._revisions.keys()
            | self._probes.keys()
            | self._pacer.keys()
            | self.own_writes.keys()
        )

    def keys_with_problems(self) -> list[ObjectKey]:
        """WebServers currently waiting on a problem (a conflict, a rejected child).

        Worth a look when a child goes away: a deleted Service frees the nodePort another WebServer is waiting for.
        """
        return list(self._problem_streak)

    async def reconcile(self, key: ObjectKey) -> Result:
        obj = self._latest(key, self._caches.webservers.get(key))
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            # Deleted (or being deleted): the garbage collector removes the children via their ownerReferences.
            self.forget(key)
            return Result()
        try:
            ws = WebServer.model_validate(obj)
        except ValidationError as err:
            return await self._refuse(obj, invalid_spec(err))
        seen = self._children_current(key, ws)
        if seen is None:
            live = self._deployment.cache.get((ws.namespace, child_name(ws)))
            revision = revision_for(ws, live)
            if (
                revision < TEMPLATE_REVISION
                and self._pacer.has_room()
                and not await self._manual.manual(ws.namespace)
                and self._pacer.take(key)
            ):
                log.info(
                    "moving to template revision %d at the admin's pace",
                    TEMPLATE_REVISION,
                    extra={"namespace": ws.namespace, "object_name": ws.name},
                )
                revision = TEMPLATE_REVISION
            deployment = desired_deployment(ws, revision)
            desired: dict[_Child, KubeObject | None] = {child: child.desired(ws) for child in self._children}
            desired[self._deployment] = deployment
            beyond = self._beyond_pod_security(deployment)
            if beyond:
                self._children_clean.pop(key, None)
                return await self._refuse(obj, beyond_baseline(beyond))
            seen = await self._sync_children(ws, desired)
            await self._template_revision(ws, revision, seen)
        self._pacer.observe(key, seen.deployment)
        probe_failure, look_again = await self._probes.look(ws, seen.deployment)
        if probe_failure is not None:
            seen = dataclasses.replace(seen, probe_failure=probe_failure)
        held = await self._write_status(obj, seen, parsed=ws)
        if seen.deployment is not None and template_revision_of(seen.deployment) < TEMPLATE_REVISION:
            turn = self._pacer.retry_in()  # its turn comes at the admin's pace: look again then
            look_again = turn if look_again is None or turn is None else min(look_again, turn)
        if look_again is not None:
            # Pods that never pass their probe change nothing in the Deployment until its deadline: look again.
            held = look_again if held is None else min(held, look_again)
        return self._next_look(key, seen.problem, held=held)

    def _children_current(self, key: ObjectKey, ws: WebServer) -> Observation | None:
        """The cached children, when they are the versions the last sync found clean for this uid and generation.

        Clean: owned by this WebServer, selector as desired, no owned field to write, no fight. What the children
        should be depends only on the WebServer's uid, name and spec (``desired``), and a spec change moves the
        generation; anything that changes a child moves its resourceVersion. So the same versions mean the same
        answer, and the compare is skipped (None: sync them).
        """
        clean = self._children_clean.get(key)
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
        paced = self._pacer.has_room() and not self._manual.remembered_manual(ws.namespace)
        if template_revision_of(deployment) < TEMPLATE_REVISION and (upgrade_requested(ws) or paced):
            return None  # annotated since (metadata only: the generation did not move), or its turn at the pace
        return Observation(deployment=deployment, service=service)

    # -- children ---------------------------------------------------------------------------------------------------

    async def _template_revision(self, ws: WebServer, revision: int, seen: Observation) -> None:
        """Count the WebServer at the revision its Deployment is at; say once how to move one left behind."""
        key = (ws.namespace, ws.name)
        if seen.deployment is None:
            self._revisions.forget(key)
            return
        self._revisions.set(key, template_revision_of(seen.deployment))
        if revision < TEMPLATE_REVISION:
            await self._recorder.emit(
                _involved(ws),
                type_="Normal",
                reason="TemplateUpgradePending",
                message=pending_message(ws, revision, paced=self._pacer.active),
                once_key=f"TemplateUpgradePending/{revision}",
            )

    def _beyond_pod_security(self, deployment: KubeObject) -> list[str]:
        """What the desired pod template has beyond the allowed Pod Security level (nothing at ``privileged``)."""
        if self._pod_security == "privileged":
            return []
        return baseline_violations(deployment["spec"]["template"]["spec"])

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
        involved = _involved(ws)
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
                extra={"namespace": ws.namespace, "object_name": ws.name, "kinds": kinds},
            )
            names = " and ".join(f"{child.kind} {child_name(ws)}" for child in made)
            await self._recorder.emit(involved, type_="Normal", reason="Created", message=f"Created {names}")
        synced: dict[_Child, _Synced] = {}
        failure: BaseException | None = None
        for child, outcome in zip(children, outcomes, strict=True):
            if isinstance(outcome, _Synced):
                synced[child] = outcome
                problem = outcome.problem
                if problem is not None and problem.stalled:
                    await self._recorder.emit(
                        involved,
                        type_="Warning",
                        reason=problem.event_reason,
                        message=problem.message,
                        once_key=f"{problem.reason}/{ws.generation}/{problem.message}",
                    )
            elif isinstance(outcome, ApiError | TransportError):
                # Retried with backoff by the controller; tell the user once per distinct error, not per retry.
                if not isinstance(outcome, Conflict | NotFound):
                    await self._recorder.emit(
                        involved,
                        type_="Warning",
                        reason="ReconcileError",
                        message=f"{child.kind} {child_name(ws)}: {outcome} (retrying with backoff)",
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
            self._children_clean[key] = (
                ws.uid,
                ws.generation,
                _resource_version(deployment.live or {}),
                _resource_version(service.live or {}),
                _version_or_none(budget.live),
            )
        else:
            self._children_clean.pop(key, None)
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
        log.info("%s", message, extra={"namespace": ws.namespace, "object_name": ws.name})
        await self._recorder.emit(
            _involved(ws),
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
        if live is None and ((ws.namespace, ws.name), child.kind) in self._not_ours:
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
        if self._owner_behind.get(key) == ws.uid:
            await self._confirm_owner(ws, child)
            self._owner_behind.pop(key, None)
            return await self._create(ws, child, desired)
        created, confirmed = await asyncio.gather(
            self._create(ws, child, desired), self._confirm_owner(ws, child), return_exceptions=True
        )
        if isinstance(confirmed, BaseException):
            if isinstance(confirmed, OwnerBehind):
                self._owner_behind[key] = ws.uid
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
            current = await self._api.request("GET", path)
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
        what, reason = (
            ("adopted orphaned", "Adopted")
            if adopting
            else ("updated", "Updated")
            if spec_changed
            else ("repaired drift in", "Repaired")
        )
        paths = difference.paths
        if reason != "Updated":
            self._repairs[child.kind].inc()
        if reason == "Repaired":
            self._fights.repaired(fought, paths, writer)
        log.info(
            "%s %s: %s",
            what,
            child.kind,
            ", ".join(paths),
            extra={"namespace": ws.namespace, "object_name": ws.name, "kind": child.kind, "fields": paths},
        )
        await self._recorder.emit(
            _involved(ws),
            type_="Normal",
            reason=reason,
            message=f"{what.capitalize()} {child.kind} {child_name(ws)}: {', '.join(paths)}",
        )
        return updated

    async def _read(self, child: _Child, ws: WebServer) -> KubeObject | None:
        try:
            return await self._api.request("GET", child.path(ws))
        except NotFound:
            self._not_ours.discard(((ws.namespace, ws.name), child.kind))
            return None

    def _check_ownership(self, ws: WebServer, child: _Child, live: KubeObject) -> None:
        key = ((ws.namespace, ws.name), child.kind)
        try:
            self._raise_unless_ours(ws, child, live)
        except Problem:
            self._not_ours.add(key)
            raise
        self._not_ours.discard(key)

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
        if self._problem_streak.get((ws.namespace, ws.name), 0) < GC_PATIENCE:
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

    # -- status and requeue -----------------------------------------------------------------------------------------

    def _next_look(self, key: ObjectKey, problem: Problem | None, *, held: float | None) -> Result:
        """When to look again: after the problem's recheck delay, or when a held-back status write is due."""
        if problem is None:
            self._problem_streak.pop(key, None)
            return Result(requeue_after=held)
        streak = self._problem_streak.get(key, 0)
        self._problem_streak[key] = streak + 1
        delay = problem.recheck.delay(streak)
        return Result(requeue_after=delay if held is None else min(delay, held))

    def webserver_cached(self, obj: KubeObject) -> None:
        """The WebServer cache now holds ``obj``: drop our copy of a status write it has caught up with.

        Called by the WebServer informer's handler for every event. ``_latest`` drops the copy too, but only when a
        reconcile runs for the key again; the last status write of a converged WebServer (its Ready write) would
        otherwise keep a whole object per WebServer until the next change (3 MB per 1000).
        """
        key = (_namespace(obj), _name(obj))
        written = self._status_written.get(key)
        if written is not None and _caught_up(_resource_version(obj), *written):
            del self._status_written[key]

    def remembered_status_writes(self) -> int:
        """How many WebServers' last status writes are kept because the cache may not have seen them yet."""
        return len(self._status_written)

    def _latest(self, key: ObjectKey, cached: KubeObject | None) -> KubeObject | None:
        """The cached WebServer, or our own last status write while the cache has not caught up with it.

        A change that arrives while a key is being reconciled queues it again at once, often before the watch has
        delivered that reconcile's own status write; from the stale copy the next status write could only be refused
        with 409 (a GET and a second PUT). Worse, an informer that is relisting can be several of our writes behind:
        if what it holds happens to be the status the reconcile would write (Ready, from before a rollout), the
        reconcile writes nothing, and the relist brings back only the echo of our last write, which wakes nothing. So
        the copy is used until the cache holds the written version or a newer one (``_caught_up``); a cache without
        the WebServer means it was deleted, and the memory is dropped.
        """
        written = self._status_written.get(key)
        if written is None:
            return cached
        if cached is not None and not _caught_up(_resource_version(cached), *written):
            return written[1]
        del self._status_written[key]
        return cached

    async def _write_status(
        self, obj: KubeObject, seen: Observation | Refusal, *, parsed: WebServer | None = None
    ) -> float | None:
        """PUT the status ``next_status`` decides on, if any; on 409 decide again once, on a fresh read.

        A status that only refines the details of a rollout in progress (``reconcile.status.progress_detail``) is
        held back while this replica's previous status write is younger than ``PROGRESS_DETAIL_INTERVAL``: the
        seconds until it is due are returned, for the caller to look again then (a newer status may supersede it).

        A 409 means the WebServer changed since the cache saw it. When only its metadata or status changed (same
        generation), the status is decided again for the fresh object from the same observation. A new generation
        means the children were synced for a spec that is no longer current: writing now would claim
        ``observedGeneration`` for a spec never applied, so the 409 propagates and the controller reconciles again
        from the cache (the new generation's own event is on its way). So does a new uid: the WebServer was deleted
        and recreated, and the children just synced belong to the old one.
        """
        key = (_namespace(obj), _name(obj))
        inputs = _status_inputs(obj, seen)
        if inputs is not None and self._status_current.get(key) == inputs:
            return None
        now = self._clock()
        status = next_status(obj, seen, now=now, parsed=parsed)
        if status is None:
            self._remember_current(key, inputs)
            return None
        written_at = self._status_put_at.get(key)
        if written_at is not None and progress_detail(obj.get("status"), status):
            due = written_at + PROGRESS_DETAIL_INTERVAL - now.timestamp()
            if due > 0:
                return due
        try:
            written = await self._put_status(obj, status)
        except Conflict:
            fresh = await self._fresh_webserver(obj)
            if fresh is None:
                return None
            if _generation(fresh) != _generation(obj) or _uid(fresh) != _uid(obj):
                raise
            status = next_status(fresh, seen, now=self._clock())
            if status is not None:
                written = await self._put_status(fresh, status)
                self._remember_current(key, _status_inputs(written, seen))
        except NotFound:
            log.debug("WebServer deleted before its status was written", extra={"object_name": _name(obj)})
        else:
            # What we wrote is what next_status computes again from the written object and the same observation.
            self._remember_current(key, _status_inputs(written, seen))
        return None

    def _remember_current(self, key: ObjectKey, inputs: _StatusInputs | None) -> None:
        if inputs is None:
            self._status_current.pop(key, None)
        else:
            self._status_current[key] = inputs

    async def _put_status(self, obj: KubeObject, status: dict[str, Any]) -> KubeObject:
        """PUT ``status`` on ``obj``, remember what the API server returned and which version it replaced; return it."""
        meta = obj["metadata"]
        body = {**obj, "status": status}
        path = WEBSERVERS.path(namespace=meta["namespace"], name=meta["name"], subresource="status")
        # Kept until the cache has seen it (``_latest``): in the form the cache keeps (a tenant's labels dropped).
        written = webserver_as_cached(await self._api.request("PUT", path, body=body))
        self.own_writes.record(WEBSERVERS.kind, written)
        key = (str(meta["namespace"]), str(meta["name"]))
        self._status_written[key] = (_resource_version(obj), written)
        self._status_put_at[key] = self._clock().timestamp()
        return written

    async def _fresh_webserver(self, obj: KubeObject) -> KubeObject | None:
        meta = obj["metadata"]
        try:
            return await self._api.request("GET", WEBSERVERS.path(namespace=meta["namespace"], name=meta["name"]))
        except NotFound:
            return None

    async def _refuse(self, obj: KubeObject, refusal: Refusal) -> Result:
        """A spec the API server accepted and the operator will not act on: report it, touch no child.

        Stalled with the refusal's reason and a Warning, once per generation; nothing to retry until the spec changes.
        """
        await self._write_status(obj, refusal)
        meta = obj.get("metadata") or {}
        await self._recorder.emit(
            obj,
            type_="Warning",
            reason=refusal.reason,
            message=refusal.message,
            once_key=f"{refusal.reason}/{_generation(obj)}",
        )
        log.warning(
            "refused WebServer spec (%s): %s",
            refusal.reason,
            refusal.message,
            extra={"namespace": meta.get("namespace"), "object_name": meta.get("name")},
        )
        return Result()


@dataclass(frozen=True)
class _Synced:
    """One child after its sync: as it is now (None: absent, or not ours), whether created now, and any problem."""

    live: KubeObject | None
    problem: Problem | None = None
    created: bool = False
    #: Deleted now: a child the WebServer no longer needs.
    removed: bool = False
    #: Checked and found as desired, nothing written: the same version needs no check again (``_children_current``).
    clean: bool = False


#: What a children check read: the WebServer's uid and generation, the Deployment's and Service's resourceVersions and
#: the PodDisruptionBudget's (None: absent).
_ChildrenVersions = tuple[str, int, str, str, str | None]

#: What a status decision reads: the WebServer's resourceVersion, its children's (None: absent), the problem's verdict
#: and the pods' last probe failure.
_StatusInputs = tuple[str, str | None, str | None, tuple[str, str, bool] | None, str | None]


def _status_inputs(obj: KubeObject, seen: Observation | Refusal) -> _StatusInputs | None:
    """The versions ``next_status(obj, seen)`` depends on (``now`` only stamps a change).

    None (nothing to remember) for a refusal, and for an object without a resourceVersion: equal versions stand for
    equal contents only as the API server hands them out.
    """
    if isinstance(seen, Refusal):
        return None
    versions = [_resource_version(o) if o is not None else None for o in (obj, seen.deployment, seen.service)]
    if "" in versions:
        return None
    problem = seen.problem
    verdict = None if problem is None else (problem.reason, problem.message, problem.stalled)
    return (str(versions[0]), versions[1], versions[2], verdict, seen.probe_failure)


def _involved(ws: WebServer) -> KubeObject:
    """The WebServer as an Event's involved object (its raw metadata carries uid and resourceVersion)."""
    return {"apiVersion": ws.api_version, "kind": ws.kind, "metadata": ws.metadata}


def _name(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _namespace(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _caught_up(cached: str, replaced: str, written: KubeObject) -> bool:
    """Whether a cache holding version ``cached`` has seen our status write (which replaced version ``replaced``).

    Seen: it holds the written version or a newer one (``core.resourceversion``). Where the API server's versions
    cannot be ordered, any version other than the replaced one counts as seen, as equality is all there is to go by.
    """
    order = resourceversion.compare(cached, _resource_version(written))
    if order is None:
        return cached != replaced
    return order >= 0


def _resource_version(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _version_or_none(obj: KubeObject | None) -> str | None:
    return _resource_version(obj) if obj is not None else None


def _uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _generation(obj: KubeObject) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 0)
