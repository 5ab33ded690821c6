"""What wakes the WebServer reconciler, declared next to it (controller-runtime's ``SetupWithManager``).

- For(WebServer): every WebServer event asks for its own key.
- Owns(Deployment, Service, PodDisruptionBudget): only the children the operator labelled (``CHILD_LABEL_SELECTOR``),
  each waking the WebServer that controls it, or, for an orphan, the one its instance label names (so it can be
  adopted). A Deployment whose availability changed wakes it at urgent priority (``reconcile.urgency``): that is what
  a user waits to see in the status; one whose rollout only progressed wakes it after ``PROGRESS_DETAIL_INTERVAL``.
- Watches(Service deleted): a deleted Service frees a nodePort, so WebServers waiting on a problem look again now
  instead of at their next slow requeue.
- Filters (``reconcile.triggers``): the echo of the reconciler's own write (a child it created or repaired, a status
  it wrote) and a child update that changes nothing the reconciler reads queue nothing. Deletions always do.
- What is cached (``reconcile.cached``): of each WebServer and child, only the metadata the reconciler reads; a
  tenant's labels and annotations never reach the store. WebServers are listed ``WEBSERVER_PAGE_SIZE`` a page.
- Bookkeeping on WebServer events: the ``webserver_operator_managed_webservers`` gauge, the per-WebServer
  ``webserver_operator_webserver_ready_status`` gauge, and the Event recorder forgetting a deleted WebServer's
  de-duplication memory. With sharding, a WebServer of a shard handed over (evicted from this replica's cache) is
  forgotten by the reconciler's one ``forget(key)``, which reaches the Ready gauge (attached to it here) and the
  recorder too: the replica that holds its shard now publishes it.

Called by ``manager.operator`` with the shared informer cache and the client; hands back the controller to run.
"""

from __future__ import annotations

import contextlib

from webserver_operator import metrics
from webserver_operator.api.models import WEBSERVERS
from webserver_operator.core.resources import DEPLOYMENTS, PODDISRUPTIONBUDGETS, SERVICES
from webserver_operator.core.settings import ControllerSettings
from webserver_operator.core.vocabulary import ApiRequests, EventType, KubeObject, ObjectKey, object_key
from webserver_operator.desired import CHILD_LABEL_SELECTOR, orphan_of
from webserver_operator.reconcile.cached import WEBSERVER_SKIM, child_as_cached, webserver_as_cached
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.reconciler import Caches, WebServerReconciler
from webserver_operator.reconcile.status import READY
from webserver_operator.reconcile.triggers import OwnWrites, child_change_matters
from webserver_operator.reconcile.urgency import availability_changed, progress_wait
from webserver_operator.runtime.controller.builder import ControllerBuilder
from webserver_operator.runtime.controller.enqueue import EventFilter, keys_on_delete
from webserver_operator.runtime.controller.loop import Controller
from webserver_operator.runtime.informers.cache import SharedCache
from webserver_operator.runtime.informers.informer import CacheShape

__all__ = [
    "WEBSERVER_PAGE_SIZE",
    "ReadySeries",
    "child_event_matters",
    "setup_webserver_controller",
    "webserver_event_matters",
]

_CONTROLLER_NAME = "webserver"
#: WebServers per list page. Tenants write WebServers, and a page's body is held whole until it is decoded
#: (``WEBSERVER_SKIM`` then builds only what the reconciler reads): a WebServer padded to the API server's object size
#: limit is about 1.6 MB with its managedFields, so 500 a page could be 800 MB of body. 10 bounds a page at about
#: 16 MB (docs/security.md, "Oversized tenant objects"); 10,000 small WebServers list in 1,000 requests instead of 20.
#: Children keep the informer's 500: tenants cannot write them.
WEBSERVER_PAGE_SIZE = 10
#: What the cache keeps of WebServers and how it reads them (``reconcile.cached``), and of children.
_WEBSERVER_SHAPE = CacheShape(transform=webserver_as_cached, skim=WEBSERVER_SKIM, page_size=WEBSERVER_PAGE_SIZE)
_CHILD_SHAPE = CacheShape(transform=child_as_cached)
_CONDITION_STATUSES = ("True", "False", "Unknown")


class ReadySeries:
    """``webserver_operator_webserver_ready_status``: the stored Ready condition, one series per status value.

    As cert-manager's ``certmanager_certificate_ready_status``: the series of the current status is 1, the others 0
    (Unknown until the operator has written a Ready condition); a deleted WebServer's series are removed. One per
    controller (``setup_webserver_controller``): it remembers what it last set, so that most events (a status write,
    a resync), which leave Ready as it was, cost no three label lookups. A per-WebServer store attached to the
    reconciler's memory: its ``forget`` also runs for a WebServer whose shard was handed over.
    """

    def __init__(self) -> None:
        #: The Ready status each WebServer's series show now, by (namespace, name).
        self._published: dict[tuple[str, str], str] = {}

    def publish(self, event_type: EventType, obj: KubeObject) -> None:
        """Bring the series of ``obj`` in line with its stored Ready condition (removed when it is deleted)."""
        key = object_key(obj)
        namespace, name = key
        if event_type == "DELETED":
            self.forget(key)
            return
        conditions = (obj.get("status") or {}).get("conditions") or []
        ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == READY), None)
        current = str(ready.get("status")) if ready is not None else "Unknown"
        if self._published.get(key) == current:
            return
        self._published[key] = current
        for status in _CONDITION_STATUSES:
            metrics.WEBSERVER_READY.labels(namespace=namespace, name=name, condition=status).set(
                1 if status == current else 0
            )

    def forget(self, key: ObjectKey, /) -> None:
        """Remove the series of ``key`` (namespace, name): the WebServer is deleted or held by another replica."""
        self._published.pop(key, None)
        for status in _CONDITION_STATUSES:
            with contextlib.suppress(KeyError):
                metrics.WEBSERVER_READY.remove(*key, status)

    def keys(self) -> set[ObjectKey]:
        """The WebServers whose series this replica publishes."""
        return set(self._published)


def webserver_event_matters(own: OwnWrites) -> EventFilter:
    """A WebServer event wakes the reconciler unless it is the echo of the reconciler's own status write."""

    def matters(event_type: EventType, obj: KubeObject, _old: KubeObject | None) -> bool:
        return not own.is_echo(WEBSERVERS.kind, event_type, obj)

    return matters


def child_event_matters(own: OwnWrites, kind: str) -> EventFilter:
    """A child event wakes the reconciler unless it echoes our own write or leaves everything the reconciler reads."""

    def matters(event_type: EventType, obj: KubeObject, old: KubeObject | None) -> bool:
        return not own.is_echo(kind, event_type, obj) and child_change_matters(event_type, obj, old)

    return matters


def setup_webserver_controller(cache: SharedCache, *, api: ApiRequests, settings: ControllerSettings) -> Controller:
    """Declare the WebServer controller on ``cache`` and return it (not yet running).

    ``api`` is the client the reconciler writes with: the no-retry view, so the work queue does the backing off.
    """
    webservers = cache.group(WEBSERVERS)
    caches = Caches(
        webservers=webservers,
        deployments=cache.group(DEPLOYMENTS, label_selector=CHILD_LABEL_SELECTOR),
        services=cache.group(SERVICES, label_selector=CHILD_LABEL_SELECTOR),
        disruption_budgets=cache.group(PODDISRUPTIONBUDGETS, label_selector=CHILD_LABEL_SELECTOR),
    )
    recorder = EventRecorder(api)
    ready_series = ReadySeries()
    reconciler = WebServerReconciler(
        api=api,
        caches=caches,
        recorder=recorder,
        pod_security=settings.pod_security_level,
        template_upgrade_rate=settings.template_upgrade_rate,
    )
    reconciler.attach(ready_series)

    def bookkeeping(event_type: EventType, obj: KubeObject, _old: KubeObject | None) -> None:
        if event_type == "DELETED":
            recorder.forget(object_key(obj))
        reconciler.webserver_cached(obj)
        metrics.MANAGED_WEBSERVERS.set(len(webservers))
        ready_series.publish(event_type, obj)

    def evicted(obj: KubeObject) -> None:
        """A WebServer of a shard handed to another replica: its series and every memory of it are that replica's.

        The reconciler forgets it with the one ``forget`` its delete branch calls (``WebServerReconciler.forget``:
        the record, the attached stores, the recorder and the Ready series): ``keys_with_problems`` and
        ``remembered_keys`` must not name a WebServer this replica no longer holds.
        """
        reconciler.forget(object_key(obj))
        metrics.MANAGED_WEBSERVERS.set(len(webservers))

    webservers.add_handler(bookkeeping)
    webservers.add_eviction_handler(evicted)
    controller = (
        ControllerBuilder(_CONTROLLER_NAME, cache, settings)
        .for_(
            WEBSERVERS,
            when=webserver_event_matters(reconciler.own_writes),
            shape=_WEBSERVER_SHAPE,
        )
        .owns(
            DEPLOYMENTS,
            label_selector=CHILD_LABEL_SELECTOR,
            orphans=orphan_of,
            when=child_event_matters(reconciler.own_writes, DEPLOYMENTS.kind),
            urgent=availability_changed,
            defer=progress_wait,
            shape=_CHILD_SHAPE,
        )
        .owns(
            SERVICES,
            label_selector=CHILD_LABEL_SELECTOR,
            orphans=orphan_of,
            when=child_event_matters(reconciler.own_writes, SERVICES.kind),
            shape=_CHILD_SHAPE,
        )
        .owns(
            PODDISRUPTIONBUDGETS,
            label_selector=CHILD_LABEL_SELECTOR,
            orphans=orphan_of,
            when=child_event_matters(reconciler.own_writes, PODDISRUPTIONBUDGETS.kind),
        )
        .watches(SERVICES, keys_on_delete(reconciler.keys_with_problems), label_selector=CHILD_LABEL_SELECTOR)
        .complete(reconciler)
    )
    controller.on_stop(recorder.close)
    return controller
