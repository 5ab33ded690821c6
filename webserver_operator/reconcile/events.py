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

Used by ``reconcile.reconciler``; ``reconcile.setup`` makes it forget a WebServer once deleted. Its client is the
no-retry view: an Event is created with ``generateName``, so a create retried after a lost answer would duplicate it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
from datetime import UTC, datetime
from typing import Any, Literal

from webserver_operator.core.resources import EVENTS
from webserver_operator.core.vocabulary import ApiRequests
from webserver_operator.kube.errors import KubeError

log = logging.getLogger(__name__)

_COMPONENT = "webserver-operator"
_MAX_MESSAGE = 1024
_MAX_REMEMBERED = 64
_SENDERS = 2
_MAX_QUEUED = 1000


def _now() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Writes core/v1 Events for an involved object; remembers ``once_key``s per object to avoid repeats."""

    def __init__(
        self,
        api: ApiRequests,
        *,
        instance: str | None = None,
        background: bool = True,
        max_queued: int = _MAX_QUEUED,
    ) -> None:
        """``background=False`` writes each Event before ``emit`` returns (for callers that read it right away)."""
        self._api = api
        self._instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self._seen: dict[str, list[str]] = {}
        self._background = background
        self._max_queued = max_queued
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._senders: set[asyncio.Task[None]] = set()
        self._dropped = 0

    async def flush(self) -> None:
        """Wait until every queued Event has been sent (or failed)."""
        while self._senders:
            await asyncio.gather(*self._senders, return_exceptions=True)

    def forget(self, uid: str) -> None:
        """Drop the memory of an object (it was deleted)."""
        self._seen.pop(uid, None)

    async def emit(
        self,
        obj: dict[str, Any],
        *,
        type_: Literal["Normal", "Warning"],
        reason: str,
        message: str,
        once_key: str | None = None,
    ) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if once_key is not None:
            seen = self._seen.setdefault(uid, [])
            if once_key in seen:
                return
            seen.append(once_key)
            del seen[:-_MAX_REMEMBERED]
        namespace = str(meta.get("namespace") or "default")
        now = _now()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": namespace,
                "uid": uid,
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:_MAX_MESSAGE],
            "type": type_,
            "source": {"component": _COMPONENT},
            "reportingComponent": _COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        if not self._background:
            await self._send(event)
            return
        if len(self._queue) >= self._max_queued:
            self._dropped += 1
            if self._dropped == 1 or self._dropped % 100 == 0:
                log.warning(
                    "event queue full (%d waiting): dropped %d event(s) so far, the latest %s on %s/%s; the API "
                    "server is not keeping up with Events",
                    len(self._queue),
                    self._dropped,
                    reason,
                    namespace,
                    meta.get("name"),
                )
            return
        self._queue.append(event)
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

    async def _send_queued(self) -> None:
        while self._queue:
            await self._send(self._queue.popleft())

    async def _send(self, event: dict[str, Any]) -> None:
        involved = event["involvedObject"]
        namespace, reason = involved["namespace"], event["reason"]
        try:
            await self._api.request("POST", EVENTS.path(namespace=namespace), body=event)
        except KubeError as err:
            log.warning(
                "could not record event %s on %s/%s: %s",
                reason,
                namespace,
                involved["name"],
                err,
                extra={"namespace": namespace, "object_name": involved["name"]},
            )
