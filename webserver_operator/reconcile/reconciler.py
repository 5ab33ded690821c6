"""Reconcile one WebServer: make its children match, then tell the truth in its status.

Level-triggered and idempotent: every call starts from the cached state of the WebServer and its children and does
the same thing for the same inputs; there are no create/update/delete event branches. Reads come from the informer
caches (zero polling reads); a write is sent only when an owned field differs, so a converged WebServer costs no
writes at all, on any number of resyncs. Where each ownership rule lives is listed in docs/architecture.md.

The orchestrator. ``reconcile`` reads top to bottom: look the WebServer up, validate it (a spec the models reject, or
pods beyond the Pod Security baseline level, is a ``Refusal``: reported, no child touched, ``TerminalError`` raised),
choose the Deployment's template revision (``reconcile.revisions``), sync the children (``reconcile.children``:
create, check, adopt, repair, retire), look for probe failures (``reconcile.probes``), write the status that
``reconcile.status.next_status`` decides on (it owns the whole status decision; this module only does the I/O),
decide when to look again. No finalizers: the garbage collector deletes the children through their ownerReference.

Everything remembered per WebServer is one ``reconcile.memory.KeyMemory`` record, in one mapping shared with the child
sync and the probe look; the stores that keep a mapping of their own (the re-create window, the revision gauge, the
pacer, the echo filter, the Event recorder, and what ``attach`` adds) are attached to it. ``forget`` drops all of it
on delete and on shard eviction; ``remembered_keys`` is its check. Driven by
``runtime.controller.loop.Controller`` (declared in ``reconcile.setup``); hands writes to the API through the no-retry
client view, so failures go back to the work queue's per-key backoff.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from pydantic import ValidationError

from webserver_operator.api.models import WEBSERVERS, WebServer
from webserver_operator.core import resourceversion
from webserver_operator.core.podsecurity import PodSecurityLevel, baseline_violations
from webserver_operator.core.vocabulary import ApiRequests, KubeObject, ObjectKey, ObjectReader
from webserver_operator.desired import TEMPLATE_REVISION, desired_deployment, template_revision_of
from webserver_operator.kube.errors import Conflict, NotFound
from webserver_operator.reconcile.cached import WEBSERVER_SKIM, webserver_as_cached
from webserver_operator.reconcile.children import ChildSync, involved
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.memory import KeyedStore, Memory, StatusInputs
from webserver_operator.reconcile.probes import ProbeFailures
from webserver_operator.reconcile.problems import Problem
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
from webserver_operator.runtime.controller.result import Result, TerminalError

__all__ = ["Caches", "WebServerReconciler"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Caches:
    webservers: ObjectReader
    deployments: ObjectReader
    services: ObjectReader
    #: The PodDisruptionBudgets the operator labelled; None: budgets are not managed (a reader without that informer).
    disruption_budgets: ObjectReader | None = None


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
        #: Everything remembered per WebServer (``reconcile.memory``): one record per key.
        self._memory = Memory()
        #: The resourceVersion each of our writes got back: their echoes need no reconcile (``reconcile.triggers``).
        self.own_writes = OwnWrites()
        #: The template revision each WebServer's Deployment is at: the per-revision gauge.
        self._revisions = RevisionCounts()
        #: Moves WebServers left on an old template revision at the admin's pace (off at rate 0).
        self._pacer = Pacer(template_upgrade_rate, lambda: self._clock().timestamp())
        #: Namespaces labelled webserver-operator.dev/template-upgrade=manual: the pacer leaves them alone.
        self._manual = NamespaceOptOut(api, lambda: self._clock().timestamp())
        #: Why unready pods are unready: the kubelet's last probe failure, read only while they are.
        self._probes = ProbeFailures(api, lambda: self._clock(), self._memory)  # noqa: PLW0108 - late bound clock
        self._children = ChildSync(
            api=api,
            deployments=caches.deployments,
            services=caches.services,
            disruption_budgets=caches.disruption_budgets,
            recorder=recorder,
            memory=self._memory,
            own_writes=self.own_writes,
            pod_security=pod_security,
            clock=lambda: self._clock(),  # noqa: PLW0108 - late bound: tests move the clock
        )
        # The stores with an aggregate, an order or a reader of their own: forgotten with the records.
        self._memory.attach(self.own_writes, self._revisions, self._pacer, recorder)

    def attach(self, store: KeyedStore) -> None:
        """Forget ``store``'s memory of a WebServer with the rest (``forget``); list its keys in ``remembered_keys``.

        For a per-WebServer store kept beside the reconciler (``reconcile.setup``'s Ready gauge).
        """
        self._memory.attach(store)

    def forget(self, key: ObjectKey) -> None:
        """Drop every memory kept for ``key``: the WebServer is deleted, or its shard was handed to another replica.

        Called from both paths (the delete branch of ``reconcile`` and the shard eviction handler of
        ``reconcile.setup``). One call: the record (``reconcile.memory``) and every store attached to it, so a memory
        added later as a field or an attached store is forgotten with the rest. ``remembered_keys`` is its check.
        """
        self._memory.forget(key)

    def remembered_keys(self) -> set[ObjectKey]:
        """Every WebServer some per-key memory of this reconciler still holds (what ``forget`` must clear)."""
        return self._memory.keys()

    def keys_with_problems(self) -> list[ObjectKey]:
        """WebServers held here and currently waiting on a problem (a conflict, a rejected child).

        Worth a look when a child goes away: a deleted Service frees the nodePort another WebServer is waiting for.
        Only keys of the memory, which ``forget`` empties for a shard handed over.
        """
        return [key for key, record in self._memory.items() if record.problem_streak > 0]

    async def reconcile(self, key: ObjectKey) -> Result:
        obj = self._latest(key, self._caches.webservers.get(key))
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            # Deleted (or being deleted): the garbage collector removes the children via their ownerReferences.
            self.forget(key)
            return Result()
        try:
            ws = WebServer.model_validate(obj)
        except ValidationError as err:
            await self._refuse(obj, invalid_spec(err))
        seen = self._children_current(ws)
        if seen is None:
            revision = revision_for(ws, self._children.cached_deployment(ws))
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
            beyond = self._beyond_pod_security(deployment)
            if beyond:
                if (record := self._memory.get(key)) is not None:
                    record.children_clean = None
                await self._refuse(obj, beyond_baseline(beyond))
            seen = await self._children.sync(ws, deployment)
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

    def _children_current(self, ws: WebServer) -> Observation | None:
        """The children as the last clean sync left them (``ChildSync.current``), unless one is due for a move.

        A Deployment left on an old template revision is synced again when it was annotated since (metadata only: the
        generation did not move) or its turn has come at the pace.
        """
        seen = self._children.current(ws)
        if seen is None or seen.deployment is None:
            return seen
        paced = self._pacer.has_room() and not self._manual.remembered_manual(ws.namespace)
        if template_revision_of(seen.deployment) < TEMPLATE_REVISION and (upgrade_requested(ws) or paced):
            return None
        return seen

    # -- template revision and pod security ----------------------------------------------------------------------------

    async def _template_revision(self, ws: WebServer, revision: int, seen: Observation) -> None:
        """Count the WebServer at the revision its Deployment is at; say once how to move one left behind."""
        key = (ws.namespace, ws.name)
        if seen.deployment is None:
            self._revisions.forget(key)
            return
        self._revisions.set(key, template_revision_of(seen.deployment))
        if revision < TEMPLATE_REVISION:
            await self._recorder.emit(
                involved(ws),
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

    # -- status and requeue --------------------------------------------------------------------------------------------

    def _next_look(self, key: ObjectKey, problem: Problem | None, *, held: float | None) -> Result:
        """When to look again: after the problem's recheck delay, or when a held-back status write is due."""
        if problem is None:
            record = self._memory.get(key)
            if record is not None:
                record.problem_streak = 0
            return Result(requeue_after=held)
        record = self._memory.of(key)
        streak = record.problem_streak
        record.problem_streak = streak + 1
        delay = problem.recheck.delay(streak)
        return Result(requeue_after=delay if held is None else min(delay, held))

    def webserver_cached(self, obj: KubeObject) -> None:
        """The WebServer cache now holds ``obj``: drop our copy of a status write it has caught up with.

        Called by the WebServer informer's handler for every event. ``_latest`` drops the copy too, but only when a
        reconcile runs for the key again; the last status write of a converged WebServer (its Ready write) would
        otherwise keep a whole object per WebServer until the next change (3 MB per 1000).
        """
        record = self._memory.get((_namespace(obj), _name(obj)))
        written = record.status_written if record is not None else None
        if record is not None and written is not None and _caught_up(_resource_version(obj), *written):
            record.status_written = None

    def remembered_status_writes(self) -> int:
        """How many WebServers' last status writes are kept because the cache may not have seen them yet."""
        return sum(1 for _, record in self._memory.items() if record.status_written is not None)

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
        record = self._memory.get(key)
        written = record.status_written if record is not None else None
        if record is None or written is None:
            return cached
        if cached is not None and not _caught_up(_resource_version(cached), *written):
            return written[1]
        record.status_written = None
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
        record = self._memory.get(key)
        if inputs is not None and record is not None and record.status_current == inputs:
            return None
        now = self._clock()
        status = next_status(obj, seen, now=now, parsed=parsed)
        if status is None:
            self._remember_current(key, inputs)
            return None
        written_at = record.status_put_at if record is not None else None
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

    def _remember_current(self, key: ObjectKey, inputs: StatusInputs | None) -> None:
        if inputs is not None:
            self._memory.of(key).status_current = inputs
        elif (record := self._memory.get(key)) is not None:
            record.status_current = None

    async def _put_status(self, obj: KubeObject, status: dict[str, Any]) -> KubeObject:
        """PUT ``status`` on ``obj``, remember what the API server returned and which version it replaced; return it."""
        meta = obj["metadata"]
        body = {**obj, "status": status}
        path = WEBSERVERS.path(namespace=meta["namespace"], name=meta["name"], subresource="status")
        # Kept until the cache has seen it (``_latest``): in the form the cache keeps (a tenant's labels dropped).
        written = webserver_as_cached(await self._api.request("PUT", path, body=body, decode=WEBSERVER_SKIM.object))
        self.own_writes.record(WEBSERVERS.kind, written)
        key = (str(meta["namespace"]), str(meta["name"]))
        record = self._memory.of(key)
        record.status_written = (_resource_version(obj), written)
        record.status_put_at = self._clock().timestamp()
        return written

    async def _fresh_webserver(self, obj: KubeObject) -> KubeObject | None:
        meta = obj["metadata"]
        try:
            path = WEBSERVERS.path(namespace=meta["namespace"], name=meta["name"])
            return await self._api.request("GET", path, decode=WEBSERVER_SKIM.object)
        except NotFound:
            return None

    async def _refuse(self, obj: KubeObject, refusal: Refusal) -> NoReturn:
        """A spec the API server accepted and the operator will not act on: report it, touch no child, raise.

        Stalled with the refusal's reason and a Warning, once per generation. A retry cannot help until the spec
        changes, so it ends in ``TerminalError``: the controller logs it, counts it in
        ``controller_runtime_terminal_reconcile_errors_total`` and does not requeue the key (its next change does).
        """
        await self._write_status(obj, refusal)
        await self._recorder.emit(
            obj,
            type_="Warning",
            reason=refusal.reason,
            message=refusal.message,
            once_key=f"{refusal.reason}/{_generation(obj)}",
        )
        raise TerminalError(f"refused WebServer spec ({refusal.reason}): {refusal.message}")


def _status_inputs(obj: KubeObject, seen: Observation | Refusal) -> StatusInputs | None:
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


def _uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _generation(obj: KubeObject) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 0)
