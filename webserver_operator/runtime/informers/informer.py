"""List+watch one resource into a ``Store`` and report every change: client-go's reflector + shared informer.

Why each piece (watch streams die silently in practice, and kubernetes-asyncio's ``Watch`` leaves most of these to
its caller):

* **List, paginated** (``limit`` + ``continue``). The list is a consistent read (no ``resourceVersion``), so a relist
  never travels back in time. If a continue token expires (410) the list starts over; a half list is never applied.
* **Replace the store and diff**: keys that vanished between lists become ``DELETED``, new or changed ones ``ADDED``
  / ``MODIFIED``. Handlers see a relist like any other change and need no resync special case.
* **Watch from the list's resourceVersion** with ``allowWatchBookmarks`` and a server ``timeoutSeconds`` jittered in
  [0.5x, 1x] (client-go uses 5-10 min) so replicas do not reconnect in lock step. BOOKMARK events carry only
  ``metadata.resourceVersion``: they move the resume point and touch nothing else.
* **Normal end of a watch** (the server's timeout): re-watch from the last resourceVersion; no relist.
* **410 Gone** (HTTP status or an ERROR event carrying a Status with code 410): the resume point fell out of the
  server's window -> relist at once. Re-watching with the same stale resourceVersion cannot succeed (kubernetes-asyncio
  36.1's ``Watch`` tries that once, then raises the 410 for its caller to relist).
* **Transport errors, 429, 5xx**: capped exponential backoff with jitter, then re-watch from the last resourceVersion.
* **403 / 404**: missing RBAC or CRD. Log what to fix, retry slowly, never crash. ``synced`` stays unset until a list
  succeeds so readiness reports the problem.
* **Stall watchdog**: a watch that delivers nothing (not even a bookmark) for ``stall_timeout`` is abandoned and
  restarted from the last resourceVersion, after the same backoff as a failure (so a tiny stall timeout cannot open
  watches in a loop); half-open TCP connections otherwise leave the cache silently frozen. By default the stall
  timeout is drawn per watch from 90-120 s: the API server sends a bookmark about every 60 s on a quiet watch.
  ``last_activity`` feeds /healthz.

* **Scope** (``scope``: a ``runtime.informers.scope.ScopeFactory``; a sharded operator passes one that builds a
  ``runtime.sharding.filter.ShardFilter`` for the namespaces of the shards its replica holds): every list and watch
  carries what the scope adds (for shards, ``shardSelector=shardRange(object.metadata.namespace, '0x…', '0x…')``),
  which an API server may apply or ignore. Every listed object and watch event is also placed by the scope here,
  before the store, so an object outside it never reaches the store or a handler on either path; a dropped event
  still moves the resume point. ``scope_filtering`` says who was found to filter. No scope: nothing is sent or
  tested.
* **Scope changes** (``rescope``, e.g. from ``runtime.sharding.cache`` when a replica gains or hands over a shard).
  Objects the scope no longer keeps leave the store at once, handed back to the caller (they were not deleted: no
  DELETED event), and the request in flight is given up (``runtime.informers.interrupt``). Narrowed: re-watch from
  the resume point with the narrower selector. Widened: a new list, after a short settle (``scope_settle``) so that
  the gains of one Lease round make one list; a list taken while the scope changed is not applied. The store's diff
  makes that relist report only the newly kept objects (and real changes): unchanged objects kept before produce
  no event. ``wait_listed(scope_version)`` returns once a list with that scope (or a later one) is in the store.

``on_event(type, obj, old)`` runs synchronously right after the store changed; handlers only enqueue keys.
resourceVersions are opaque strings: events are applied in arrival order, never compared. Failures are the kube
layer's typed errors (``Gone``, ``Forbidden``, ``NotFound``, ...), watch ``ERROR`` events included: they are parsed
by the same ``metav1.Status`` parser as HTTP error bodies.

Created by ``runtime.informers.group.InformerGroup`` (one per watched namespace); its ``store`` is what reconcilers
read and its ``on_event`` hands every change to the controller's event mapping.
"""

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from webserver_operator import metrics
from webserver_operator.core.backoff import Backoff, BackoffPolicy
from webserver_operator.core.resources import Resource
from webserver_operator.core.settings import DEFAULT_STALL_TIMEOUT_RANGE
from webserver_operator.core.vocabulary import EventHandler, EventType, KubeObject, WatchApi, object_key
from webserver_operator.kube.errors import Forbidden, Gone, NotFound, api_error_from_status
from webserver_operator.kube.skim import Skim
from webserver_operator.kube.transport.idle import IdleTimer
from webserver_operator.runtime.informers.interrupt import Interrupt, Interrupted
from webserver_operator.runtime.informers.scope import Placement, Scope, ScopeFactory
from webserver_operator.runtime.informers.store import Store, StoreEvent

__all__ = ["CacheShape", "Informer", "Transform", "noop_handler", "strip_unread_fields"]

logger = logging.getLogger(__name__)

_DEFAULT_WATCH_TIMEOUT_SECONDS = 300
_MIN_WATCH_TIMEOUT_SECONDS = 60  # jitter never takes a watch below this (or below the configured value if smaller)
_PAGE_SIZE = 500
#: client-go's reflector backoff (800 ms doubling to 30 s); a missing CRD or permission is retried more slowly.
_RECONNECT_BACKOFF = BackoffPolicy(base=0.8, cap=30.0, jitter=0.5)
_FORBIDDEN_BACKOFF = BackoffPolicy(base=5.0, cap=60.0, jitter=0.5)
_SHORT_WATCH_SECONDS = 1.0  # an empty watch that ends sooner than this is treated as a failure (no hot loop)
#: A sharded informer waits this long before a list for new shards: a Lease round gains its shards one Lease write
#: after another, milliseconds apart, and they should make one list, not one each.
_SCOPE_SETTLE_SECONDS = 0.25


class _Listed(NamedTuple):
    """A full list: the items of this informer's shard, its resourceVersion, and what said who filtered."""

    items: list[KubeObject]
    resource_version: str
    echoed: bool  # every page carried ``shardInfo`` with our selector (False without a shard filter)
    strays: int  # items outside the shard that arrived (and were dropped)


class _RestartList(Exception):
    """A continue token expired mid-list: start the list over."""


class _Stalled(Exception):
    """The watch delivered nothing for ``stall_timeout``."""


def noop_handler(_type: EventType, _obj: KubeObject, _old: KubeObject | None) -> None:
    return None


#: Annotation kubectl writes with a full copy of the object as last applied: never read by a controller.
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


Transform = Callable[[KubeObject], KubeObject]
"""What an informer applies to each object before it enters the store (controller-runtime's ``cache.TransformFunc``).

It may change the object in place and return it: every object it gets was just decoded for this informer alone."""


@dataclass(frozen=True)
class CacheShape:
    """What a cache view keeps of each object and how it reads them, as one value.

    Declared by the controller that reads the view (``reconcile.setup``) and handed on whole through the builder, the
    cache and the group to every informer of the view. ``transform``: applied after ``strip_unread_fields`` to every
    listed and watched object (None: as stripped). ``skim``: decodes list pages and watch events without building the
    fields no reader reads (``kube.skim``), for a resource whose objects tenants may pad (None: decoded whole).
    ``page_size``: objects per list page, which bounds what one page decodes at once (None: the informer's 500).
    """

    transform: Transform | None = None
    skim: Skim | None = None
    page_size: int | None = None

    def joined(self, other: "CacheShape", *, view: str) -> "CacheShape":
        """The shape with what ``other`` declares too; a second, different value for one part is refused.

        Several controllers may declare on one view, and two different transforms for the same store would each strip
        what the other reads: ``ValueError`` naming ``view``.
        """
        if other.transform is not None and self.transform is not None and other.transform is not self.transform:
            raise ValueError(f"{view}: a second, different transform declared on the same cache view")
        if other.skim is not None and self.skim is not None and other.skim is not self.skim:
            raise ValueError(f"{view}: a second, different skim declared on the same cache view")
        if other.page_size is not None and self.page_size is not None and other.page_size != self.page_size:
            raise ValueError(f"{view}: list pages of {self.page_size} and {other.page_size} declared on one view")
        return CacheShape(
            transform=self.transform or other.transform,
            skim=self.skim or other.skim,
            page_size=self.page_size or other.page_size,
        )


def strip_unread_fields(obj: KubeObject) -> KubeObject:
    """Drop what no reconciler reads before an object is cached (controller-runtime's default transform).

    ``managedFields`` and kubectl's last-applied copy are often most of an object's size. Writes are computed
    between the cached object and a copy of it, so a field absent from both never appears in a patch; status writes
    go to the status subresource, which ignores metadata.
    """
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and _LAST_APPLIED in annotations:
            del annotations[_LAST_APPLIED]
    return obj


def _failure_reason(exc: BaseException) -> str:
    """The ``reason`` label of the watch-restart metric for a failure (and the word the logs use)."""
    if isinstance(exc, Gone):
        return "expired"
    if isinstance(exc, Forbidden):
        return "forbidden"
    if isinstance(exc, NotFound):
        return "not_found"
    return "error"  # TransportError, 429, 5xx, decoding errors, bugs: all retried with backoff


def _needs_a_person(exc: BaseException) -> bool:
    """403/404: the CRD or our access is missing; only a list tells when it is back."""
    return isinstance(exc, Forbidden | NotFound)


class Informer:
    """Keeps ``store`` in line with one resource (optionally one namespace and a label selector)."""

    def __init__(
        self,
        api: WatchApi,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        scope: ScopeFactory | None = None,
        name: str | None = None,
        on_event: EventHandler | None = None,
        watch_timeout_seconds: int = _DEFAULT_WATCH_TIMEOUT_SECONDS,
        stall_timeout: float | None = None,
        backoff: Backoff | None = None,
        forbidden_backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
        scope_settle: float = _SCOPE_SETTLE_SECONDS,
        shape: CacheShape | None = None,
    ) -> None:
        if watch_timeout_seconds < 1:
            raise ValueError("watch_timeout_seconds must be >= 1")
        self.api = api
        self.resource = resource
        self.namespace = namespace if resource.namespaced else None
        self.label_selector = label_selector
        self.name = name or resource.plural
        # The routine restart reasons exist at 0 from the start: a series born at 1 hides its first restart from rate().
        self._restarts = {
            reason: metrics.WATCH_RESTARTS.labels(resource=self.name, reason=reason)
            for reason in ("timeout", "closed", "stalled")
        }
        #: What this informer keeps (``runtime.informers.scope``); ``None``: everything (no shards, or ``--shards 1``).
        self.scope: Scope | None = scope(resource, self.name) if scope is not None else None
        self.on_event: EventHandler = on_event or noop_handler
        self.watch_timeout_seconds = watch_timeout_seconds
        #: Seconds of silence before a watch is restarted; ``None``: drawn per watch from the default range.
        self.stall_timeout = stall_timeout
        #: What the store keeps and how lists and watches are decoded (``CacheShape``); set before ``run``. The
        #: transform reaches the objects of DELETED events too, so handlers compare like with like.
        self.shape = shape or CacheShape()
        self._clock = clock
        self._rng = rng
        self._backoff = backoff or Backoff(_RECONNECT_BACKOFF, clock=clock, rand=rng)
        self._forbidden_backoff = forbidden_backoff or Backoff(_FORBIDDEN_BACKOFF, clock=clock, rand=rng)

        self.store = Store()
        #: Set once the first full list is in the store; never cleared (like client-go's HasSynced).
        self.synced = asyncio.Event()
        #: Monotonic time of the last sign of life from the API server (list page, watch event, clean watch end).
        self.last_activity = clock()
        self.consecutive_failures = 0
        #: Resume point: the list's resourceVersion, then that of every watch event (bookmarks included).
        self.resource_version = ""
        self._path = resource.path(namespace=self.namespace)
        self._m_events = {t: metrics.WATCH_EVENTS.labels(resource=self.name, type=t) for t in _EVENT_TYPES}
        # Changing shards (sharded informers only; see ``rescope``).
        self.scope_settle = scope_settle
        self._interrupt = Interrupt()
        self._scope_version = 0  # +1 on every rescope
        self._listed_version = -1  # the scope version of the last list applied
        self._needs_list = True  # the store lacks shards of the scope: set on start and on every gain
        self._settle = self.scope is not None  # wait scope_settle before the next list
        self._list_applied = asyncio.Condition()

    @property
    def scope_filtering(self) -> str | None:
        """Who was found to apply the scope (``server``, ``client``, ``unconfirmed``); ``None`` without a scope."""
        return self.scope.filtering if self.scope is not None else None

    # -- changing shards ----------------------------------------------------------------------------------------------

    @property
    def scope_version(self) -> int:
        """Counts the rescopes: ``wait_listed(scope_version)`` waits for a list of the shards kept now."""
        return self._scope_version

    @property
    def scope_listed(self) -> bool:
        """Every shard kept now has been listed into the store (read by the probes' thread: a plain bool)."""
        return not self._needs_list

    def rescope(self, to: object) -> list[KubeObject]:
        """Keep ``to`` from now on (in the scope's terms); returns the objects dropped from the store.

        No handler hears of the dropped objects: they were not deleted. See the module docstring.
        """
        if self.scope is None:
            raise ValueError(f"informer {self.name} keeps every object: it has no scope to change")
        change = self.scope.rescope(to)
        if change == "same":
            return []
        if change == "widened":
            self._needs_list = self._settle = True
        self._scope_version += 1
        released = []
        for obj in self.store.list():
            if not self.scope.keeps(obj):
                self.store.delete(object_key(obj))
                released.append(obj)
        self._interrupt.fire()
        logger.info(
            "informer %s: now keeping %s (%d object(s) let go)",
            self.name,
            self.scope,
            len(released),
            extra={"informer": self.name},
        )
        return released

    async def wait_listed(self, scope_version: int) -> None:
        """Return once a list taken at ``scope_version`` or later is in the store."""
        async with self._list_applied:
            await self._list_applied.wait_for(lambda: self._listed_version >= scope_version)

    def _guarded(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The request in flight, given up by ``rescope`` (only a sharded informer has shards to change)."""
        return self._interrupt.guard() if self.scope is not None else contextlib.nullcontext()

    @property
    def page_size(self) -> int:
        """Objects per list page: the shape's, or 500."""
        return self.shape.page_size or _PAGE_SIZE

    # -- health -------------------------------------------------------------------------------------------------------

    def seconds_since_activity(self) -> float:
        return self._clock() - self.last_activity

    def _touch(self) -> None:
        self.last_activity = self._clock()

    # -- main loop ----------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch, recovering from every failure; returns only by cancellation."""
        self._touch()
        log_extra = {"informer": self.name, "namespace": self.namespace or ""}
        if self.scope is not None:
            logger.info("informer %s starting (path %s, %s)", self.name, self._path, self.scope, extra=log_extra)
        else:
            logger.info("informer %s starting (path %s)", self.name, self._path, extra=log_extra)
        first = True
        while True:
            if not await self._list_once(relist=not first):
                continue
            first = False
            reason = await self._watch_until_relist()
            logger.info("informer %s relisting (%s)", self.name, reason, extra=log_extra)

    # -- list ---------------------------------------------------------------------------------------------------------

    async def _list_once(self, *, relist: bool) -> bool:
        """One attempt at a full list applied to the store; on failure log, back off and return False.

        A list during which the shards changed is not applied (False, no backoff): the next one asks for the new ones.
        """
        if self._settle:
            self._settle = False
            await asyncio.sleep(self.scope_settle)
        version = self._scope_version
        try:
            async with self._guarded():
                items, resource_version, echoed, strays = await self._list_all()
        except Interrupted:
            return False
        except Exception as exc:  # an informer must never die: every failure is retried
            await self._fail("list", exc)
            return False
        if version != self._scope_version:
            return False
        if self.scope is not None:
            self.scope.after_list(echoed=echoed, strays=strays)
        self.consecutive_failures = 0
        self.resource_version = resource_version
        metrics.WATCH_RELISTS.labels(resource=self.name).inc()
        self._dispatch(self.store.replace(items, resource_version))
        self._listed_version = version
        self._needs_list = False
        async with self._list_applied:
            self._list_applied.notify_all()
        if not self.synced.is_set():
            self.synced.set()
            logger.info(
                "informer %s synced: %d object(s) at resourceVersion %s",
                self.name,
                len(self.store),
                resource_version,
                extra={"informer": self.name, "objects": len(self.store)},
            )
        elif relist:
            logger.debug("informer %s relisted %d object(s)", self.name, len(self.store))
        return True

    async def _list_all(self) -> _Listed:
        """The full list (only this informer's shard items), restarted if a continue token expires."""
        while True:
            try:
                return await self._list_pages()
            except _RestartList:
                logger.info("informer %s: list continue token expired, restarting the list", self.name)

    async def _list_pages(self) -> _Listed:
        items: list[KubeObject] = []
        token: str | None = None
        echoed = self.scope is not None
        strays = 0
        while True:
            query = {"limit": str(self.page_size)}
            skim = self.shape.skim
            if self.label_selector:
                query["labelSelector"] = self.label_selector
            if self.scope is not None:
                self.scope.add_to(query)
            if token:
                query["continue"] = token
            try:
                page = await self.api.request(
                    "GET", self._path, query=query, decode=skim.list if skim is not None else None
                )
            except Gone as exc:
                if token:
                    raise _RestartList from exc
                raise
            self._touch()
            meta = page.get("metadata") or {}
            if self.scope is not None:
                echoed = self.scope.echoed(meta, path=self._path) and echoed
            for item in page.get("items") or ():
                placement: Placement = "kept" if self.scope is None else self.scope.place(item)
                if placement == "kept":
                    items.append(self._complete(item))
                elif placement == "stray":
                    strays += 1
            token = meta.get("continue") or None
            if not token:
                return _Listed(items, str(meta.get("resourceVersion") or ""), echoed, strays)

    def _complete(self, obj: KubeObject) -> KubeObject:
        """List items lack kind/apiVersion (watch objects carry them); fill them in so both look the same."""
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        return self._cached_form(obj)

    def _cached_form(self, obj: KubeObject) -> KubeObject:
        """``obj`` as the store keeps it: unread fields stripped, then this informer's ``transform``."""
        obj = strip_unread_fields(obj)
        transform = self.shape.transform
        return transform(obj) if transform is not None else obj

    # -- watch --------------------------------------------------------------------------------------------------------

    async def _watch_until_relist(self) -> str:
        """Watch (and re-watch) from ``resource_version`` until only a relist helps; returns the reason."""
        while True:
            if self._needs_list:  # shards gained while no request was in flight (e.g. during a backoff)
                return "new shards"
            started = self._clock()
            stall_timeout = self._stall_timeout()
            try:
                async with self._guarded():
                    received = await self._watch_once(stall_timeout)
            except Interrupted:
                self._restart("rescoped")
                continue  # shards gained: the check above relists; shards let go: a narrower watch, same resume point
            except _Stalled:
                self._restart("stalled")
                delay = self._backoff.next_delay()
                logger.warning(
                    "informer %s: watch delivered nothing for %.0fs (not even a bookmark), restarting it from "
                    "resourceVersion %s in %.1fs",
                    self.name,
                    stall_timeout,
                    self.resource_version,
                    delay,
                    extra={"informer": self.name},
                )
                await asyncio.sleep(delay)
                continue
            except Exception as exc:  # an informer must never die: every failure is retried
                reason = _failure_reason(exc)
                self._restart(reason)
                if isinstance(exc, Gone):
                    if self._clock() - started < _SHORT_WATCH_SECONDS:
                        # Gone right away, again and again, would be a tight list/watch loop: pace it.
                        await asyncio.sleep(self._backoff.next_delay())
                    return reason
                await self._fail("watch", exc)
                if _needs_a_person(exc):
                    return reason  # the CRD or our access may have changed: only a list tells the truth
                continue
            self._touch()
            self.consecutive_failures = 0
            if received == 0 and self._clock() - started < _SHORT_WATCH_SECONDS:
                self._restart("closed")
                await asyncio.sleep(self._backoff.next_delay())  # a server that closes at once must not spin us
            else:
                self._restart("timeout")

    async def _watch_once(self, stall_timeout: float) -> int:
        """One watch request; returns the number of events on a normal end, raises on anything else."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self._watch_timeout()),
        }
        if self.resource_version:
            query["resourceVersion"] = self.resource_version
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.scope is not None:
            self.scope.add_to(query)
        received = 0
        loop = asyncio.get_running_loop()
        # One timer for the whole watch (``kube.transport.idle``), not one rescheduled per event: when nothing came for
        # ``stall_timeout`` it expires ``watchdog``, which cancels this task with TimeoutError.
        watchdog = asyncio.timeout(None)
        stall = IdleTimer(stall_timeout, lambda: watchdog.reschedule(loop.time()))
        try:
            async with watchdog:
                stall.touch()  # covers opening the watch too; every event touches it again
                skim = self.shape.skim
                decode = skim.event if skim is not None else None
                async with self.api.watch(self._path, query=query, decode=decode) as stream:
                    async for event in stream:
                        stall.touch()
                        received += 1
                        self._touch()
                        self.consecutive_failures = 0
                        self._apply(event)
        except TimeoutError:
            if watchdog.expired():
                raise _Stalled from None
            raise
        finally:
            stall.stop()
        return received

    def _stall_timeout(self) -> float:
        if self.stall_timeout is not None:
            return self.stall_timeout
        low, high = DEFAULT_STALL_TIMEOUT_RANGE
        return low + (high - low) * self._rng()

    def _watch_timeout(self) -> int:
        base = self.watch_timeout_seconds
        floor = min(base, _MIN_WATCH_TIMEOUT_SECONDS)
        return max(floor, int(base * (0.5 + 0.5 * self._rng())))

    def _apply(self, event: dict[str, Any]) -> None:
        event_type = str(event.get("type") or "")
        obj = event.get("object") or {}
        if event_type in self._m_events:
            self._m_events[event_type].inc()
        if event_type == "ERROR":
            logger.info(
                "informer %s: watch ERROR event: %s (%s)",
                self.name,
                obj.get("message"),
                obj.get("reason"),
                extra={"informer": self.name, "code": obj.get("code")},
            )
            raise api_error_from_status(obj, method="GET", path=self._path, verb="watch")
        new_rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if event_type == "BOOKMARK":
            if new_rv:
                self.resource_version = new_rv
            return
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            logger.warning("informer %s: ignoring watch event of unknown type %r", self.name, event_type)
            return
        placement: Placement = "kept" if self.scope is None else self.scope.place(obj)
        if placement != "kept":
            if new_rv:
                self.resource_version = new_rv
            if placement == "stray" and self.scope is not None:
                self.scope.after_stray_event(obj)
            return
        change: StoreEvent
        obj = self._cached_form(obj)
        if event_type == "DELETED":
            old = self.store.delete(object_key(obj))
            change = ("DELETED", obj, old)
        else:
            typed: EventType = "ADDED" if event_type == "ADDED" else "MODIFIED"
            change = (typed, obj, self.store.upsert(obj))
        if new_rv:
            self.resource_version = new_rv
        self._dispatch([change])

    # -- helpers ------------------------------------------------------------------------------------------------------

    def _dispatch(self, changes: list[StoreEvent]) -> None:
        for event_type, obj, old in changes:
            try:
                self.on_event(event_type, obj, old)
            except Exception:
                logger.exception(
                    "informer %s: event handler failed for %s %s/%s",
                    self.name,
                    event_type,
                    *object_key(obj),
                    extra={"informer": self.name},
                )

    def _restart(self, reason: str) -> None:
        counter = self._restarts.get(reason)
        if counter is None:
            counter = self._restarts[reason] = metrics.WATCH_RESTARTS.labels(resource=self.name, reason=reason)
        counter.inc()

    async def _fail(self, phase: str, exc: Exception) -> None:
        self.consecutive_failures += 1
        extra = {
            "informer": self.name,
            "phase": phase,
            "failure": _failure_reason(exc),
            "consecutive_failures": self.consecutive_failures,
        }
        if isinstance(exc, Forbidden):
            delay = self._forbidden_backoff.next_delay()
            logger.error(
                "informer %s: %s of %s is forbidden; the operator's ServiceAccount needs get/list/watch on %s "
                "(check the ClusterRole/Role and its binding). Retrying in %.0fs: %s",
                self.name,
                phase,
                self._path,
                self.resource.plural,
                delay,
                exc,
                extra=extra,
            )
        elif isinstance(exc, NotFound):
            delay = self._forbidden_backoff.next_delay()
            logger.error(
                "informer %s: %s of %s returned 404: is the CustomResourceDefinition for %s (%s) installed? "
                "Retrying in %.0fs: %s",
                self.name,
                phase,
                self._path,
                self.resource.kind,
                self.resource.api_version,
                delay,
                exc,
                extra=extra,
            )
        else:
            delay = self._backoff.next_delay()
            logger.warning(
                "informer %s: %s failed (%s: %s); retrying in %.2fs",
                self.name,
                phase,
                type(exc).__name__,
                exc,
                delay,
                extra=extra,
            )
        await asyncio.sleep(delay)


_EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
