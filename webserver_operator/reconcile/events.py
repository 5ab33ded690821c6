"""Kubernetes Events about WebServers: what `kubectl describe webserver/x` shows under "Events".

Why best-effort and de-duplicated here: an Event is a message to a person, never part of the control loop. Failing
to write one (RBAC, a terminating namespace) must not fail a reconcile, and the same Warning must not be written
again on every resync or retry: callers pass a ``once_key`` (for example the reason plus the WebServer's generation)
and the recorder remembers which keys it has already reported for each WebServer.

Why in the background: a reconcile must not wait for a message to a person. Writing Events inline cost every create
one more round trip before the status write, and held the worker for it. ``emit`` queues the Event and returns; at
most ``_SENDERS`` POSTs are in flight, so a burst of Events (a bulk create) trails behind the writes that matter instead
of competing with them for the API server and the connection pool, like client-go's event broadcaster. The queue is
bounded: past ``max_queued`` waiting Events, new ones are dropped with a warning. On shutdown the controller's stop hook
(``close``) sends what is queued within what is left of the drain timeout and drops the rest (best effort, as
everywhere for Events; a deposed leader has no time left and sends nothing).

Like client-go's event correlator, two more limits keep Events from costing the fleet anything:
- **Aggregation.** An Event identical to one already written (same object, type, reason and message) is not written
  again: the recorder PATCHes the existing one's ``count`` and ``lastTimestamp`` (``kubectl describe`` shows "x3 over
  5m"), and while the first write is still queued or in flight a repeat only raises the count it will carry. If the
  Event has expired meanwhile (the API server keeps Events for an hour), a new one is created.
- **A spam filter per object.** Each WebServer may write a burst of ``_SPAM_BURST`` Events, then one per
  ``1 / _SPAM_QPS`` seconds (client-go's ``EventSourceObjectSpamFilter`` defaults); the rest are dropped.
Every dropped Event (spam filter or full queue) counts in ``webserver_operator_events_dropped_total{reason}``.

What it remembers of a WebServer (the once_keys, the spam bucket, the written Events) is held by the involved object's
uid and found by its (namespace, name): ``forget`` drops it when the WebServer is deleted or its shard handed over
(``reconcile.setup``; the reconciler's ``reconcile.memory.Memory`` has it attached), and a WebServer created again under
the same name starts afresh. Used by ``reconcile.reconciler`` and ``reconcile.children``. Its client is the
no-retry view: an Event is created with ``generateName``, so a create retried after a lost answer would duplicate it.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from webserver_operator import metrics
from webserver_operator.core.resources import EVENTS
from webserver_operator.core.vocabulary import MERGE_PATCH, ApiRequests, ObjectKey
from webserver_operator.kube.errors import KubeError, NotFound
from webserver_operator.kube.ratelimit import TokenBucket

__all__ = ["EventRecorder", "EventType"]

log = logging.getLogger(__name__)

_COMPONENT = "webserver-operator"
_MAX_MESSAGE = 1024
_MAX_REMEMBERED = 64
_SENDERS = 2
_MAX_QUEUED = 1000
_SPAM_BURST = 25
_SPAM_QPS = 1 / 300
_MAX_OBJECTS = 4096
"""Objects (spam buckets) and distinct Events (aggregation) remembered at most; the oldest are forgotten first."""

EventType = Literal["Normal", "Warning"]
_SeriesKey = tuple[str, str, str, str]  # involved object's uid, type, reason, message


def _now() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Series:
    """One distinct Event: its body, how often it happened, and where it stands on the way to the API server."""

    event: dict[str, Any]
    count: int = 1
    last: str = field(default_factory=_now)
    name: str | None = None  # of the stored Event, once created
    queued: bool = True
    sending: bool = False
    again: bool = False  # repeated while a write of it was in flight: write the new count after it


class EventRecorder:
    """Writes core/v1 Events for an involved object; remembers ``once_key``s per object to avoid repeats."""

    def __init__(
        self,
        api: ApiRequests,
        *,
        instance: str | None = None,
        max_queued: int = _MAX_QUEUED,
    ) -> None:
        self._api = api
        self._instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self._seen: dict[str, list[str]] = {}
        #: The uid of each involved object by (namespace, name): how ``forget`` finds what is held by uid.
        self._uids: dict[ObjectKey, str] = {}
        self._max_queued = max_queued
        self._queue: collections.deque[_SeriesKey] = collections.deque()
        self._series: collections.OrderedDict[_SeriesKey, _Series] = collections.OrderedDict()
        self._buckets: collections.OrderedDict[str, TokenBucket] = collections.OrderedDict()
        self._senders: set[asyncio.Task[None]] = set()
        self._dropped = 0

    async def flush(self) -> None:
        """Wait until every queued Event has been sent (or failed)."""
        while self._senders:
            await asyncio.gather(*self._senders, return_exceptions=True)

    def forget(self, key: ObjectKey, /) -> None:
        """Drop the memory of the object ``key`` (namespace, name): deleted, or its shard handed to another replica.

        Events still queued or being written are sent (and then forgotten by age, with the other written Events).
        """
        uid = self._uids.pop(key, None)
        if uid is not None:
            self._forget_uid(uid)

    def keys(self) -> set[ObjectKey]:
        """The objects (namespace, name) something is remembered of."""
        return set(self._uids)

    def _forget_uid(self, uid: str) -> None:
        self._seen.pop(uid, None)
        self._buckets.pop(uid, None)
        for key in [key for key, series in self._series.items() if key[0] == uid and not series.queued]:
            del self._series[key]

    async def emit(
        self,
        obj: dict[str, Any],
        *,
        type_: EventType,
        reason: str,
        message: str,
        once_key: str | None = None,
    ) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        involved = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if self._uids.setdefault(involved, uid) != uid:  # deleted and created again: the new object starts afresh
            self._forget_uid(self._uids[involved])
            self._uids[involved] = uid
        if once_key is not None:
            seen = self._seen.setdefault(uid, [])
            if once_key in seen:
                return
            seen.append(once_key)
            del seen[:-_MAX_REMEMBERED]
        namespace = str(meta.get("namespace") or "default")
        if not self._spam_allows(uid):
            self._drop("rate_limited", reason, namespace, meta.get("name"))
            return
        key = (uid, type_, reason, message[:_MAX_MESSAGE])
        series = self._series.get(key)
        if series is not None:
            series.count += 1
            series.last = _now()
            self._series.move_to_end(key)
            if series.queued:
                return  # the queued write carries the new count
            if series.sending:
                series.again = True
                return
        else:
            series = self._series[key] = _Series(
                _event(obj, instance=self._instance, type_=type_, reason=reason, message=key[3], namespace=namespace)
            )
            self._trim()
        if len(self._queue) >= self._max_queued:
            series.queued = False
            self._drop("queue_full", reason, namespace, meta.get("name"))
            return
        series.queued = True
        self._queue.append(key)
        if len(self._senders) < _SENDERS:
            task = asyncio.create_task(self._send_queued(), name="event-sender")
            self._senders.add(task)
            task.add_done_callback(self._senders.discard)

    async def close(self, seconds: float) -> None:
        """Send what is queued for up to ``seconds``, then drop the rest and stop the senders (the process stops)."""
        if self._senders and seconds > 0:
            await asyncio.wait(set(self._senders), timeout=seconds)
        unsent = len(self._queue)
        self._queue.clear()
        for task in self._senders:
            task.cancel()
        await asyncio.gather(*self._senders, return_exceptions=True)
        if unsent:
            log.info("stopping: %d queued event(s) not sent", unsent)

    def _spam_allows(self, uid: str) -> bool:
        bucket = self._buckets.get(uid)
        if bucket is None:
            bucket = self._buckets[uid] = TokenBucket(qps=_SPAM_QPS, burst=_SPAM_BURST)
            while len(self._buckets) > _MAX_OBJECTS:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(uid)
        if bucket.reserve() > 0:
            bucket.cancel()
            return False
        return True

    def _trim(self) -> None:
        """Forget the oldest distinct Events past ``_MAX_OBJECTS`` (a repeat of one then creates a new Event)."""
        excess = len(self._series) - _MAX_OBJECTS
        if excess <= 0:
            return  # the usual case: no copy of the keys on every new Event
        for key in list(itertools.islice(self._series, excess)):
            if not (self._series[key].queued or self._series[key].sending):
                del self._series[key]

    def _drop(self, why: str, reason: str, namespace: str, name: object) -> None:
        metrics.EVENTS_DROPPED.labels(reason=why).inc()
        self._dropped += 1
        if self._dropped == 1 or self._dropped % 100 == 0:
            cause = (
                "the API server is not keeping up with Events"
                if why == "queue_full"
                else f"more than {_SPAM_BURST} Events for one object in a short time"
            )
            log.warning(
                "event %s on %s/%s dropped (%s; %d queued): %d dropped so far, %s",
                reason,
                namespace,
                name,
                "event queue full" if why == "queue_full" else "rate limited",
                len(self._queue),
                self._dropped,
                cause,
            )

    async def _send_queued(self) -> None:
        while self._queue:
            await self._send(self._queue.popleft())

    async def _send(self, key: _SeriesKey) -> None:
        series = self._series.get(key)
        if series is None:
            return
        series.queued, series.sending = False, True
        event = series.event
        involved = event["involvedObject"]
        namespace, reason = involved["namespace"], event["reason"]
        try:
            if series.name is not None:
                try:
                    await self._api.request(
                        "PATCH",
                        EVENTS.path(namespace=namespace, name=series.name),
                        body={"count": series.count, "lastTimestamp": series.last},
                        content_type=MERGE_PATCH,
                    )
                    return
                except NotFound:
                    series.name = None  # expired (Events live for an hour): write it anew
            body = {**event, "count": series.count, "lastTimestamp": series.last}
            created = await self._api.request("POST", EVENTS.path(namespace=namespace), body=body)
            series.name = str((created.get("metadata") or {}).get("name") or "") or None
        except KubeError as err:
            log.warning(
                "could not record event %s on %s/%s: %s",
                reason,
                namespace,
                involved["name"],
                err,
                extra={"namespace": namespace, "object_name": involved["name"]},
            )
        finally:
            series.sending = False
            if series.again:
                series.again = False
                series.queued = True
                self._queue.append(key)


def _event(
    obj: dict[str, Any], *, instance: str, type_: EventType, reason: str, message: str, namespace: str
) -> dict[str, Any]:
    """The core/v1 Event body for a first occurrence (``count`` and ``lastTimestamp`` are set when it is sent)."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "namespace": namespace,
            "uid": str(meta.get("uid", "")),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": _COMPONENT},
        "reportingComponent": _COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": _now(),
    }
