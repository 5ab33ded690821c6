"""Kubernetes Events about WebServers: what `kubectl describe webserver/x` shows under "Events".

Why best-effort and de-duplicated here: an Event is a message to a person, never part of the control loop. Failing
to write one (RBAC, a terminating namespace) must not fail a reconcile, and the same Warning must not be written
again on every resync or retry: callers pass a ``once_key`` (for example the reason plus the WebServer's generation)
and the recorder remembers which keys it has already reported for each WebServer.

Used by ``reconcile.reconciler``; ``reconcile.setup`` makes it forget a WebServer once deleted. Its client is the
no-retry view: an Event is created with ``generateName``, so a create retried after a lost answer would duplicate it.
"""

from __future__ import annotations

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


def _now() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Writes core/v1 Events for an involved object; remembers ``once_key``s per object to avoid repeats."""

    def __init__(self, api: ApiRequests, *, instance: str | None = None) -> None:
        self._api = api
        self._instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self._seen: dict[str, list[str]] = {}

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
        try:
            await self._api.request("POST", EVENTS.path(namespace=namespace), body=event)
        except KubeError as err:
            log.warning(
                "could not record event %s on %s/%s: %s",
                reason,
                namespace,
                meta.get("name"),
                err,
                extra={"namespace": namespace, "object_name": meta.get("name")},
            )
