"""Why a WebServer's pods are not ready: the kubelet's last probe failure, read only while pods are unready.

Why Events and not Pods: a Pod's Ready condition says only "containers with unready status: [web]"; the answer the
probe got (``HTTP probe failed with statuscode: 403``, ``connect: connection refused``) is in the ``Unhealthy`` Event
the kubelet writes for the Pod. Watching Pods or Events cluster-wide would cache every pod of the cluster (or every
failing probe of every application) for a question that matters only while a WebServer is not available. So the
operator asks on demand: one list of the namespace's ``Unhealthy`` Pod Events (field selector, so the API server
filters), only when the Deployment has pods of the current version that are not available (``needs_look``) and has
made no progress for ``GRACE`` seconds, then at most once per ``LOOK_INTERVAL`` per WebServer while that lasts (a
pod that never passes its probe changes nothing in the Deployment's status until its progress deadline, so no watch
event would wake the operator). A converged WebServer costs no read. RBAC: list on Events.

Pure parts (``needs_look``, ``latest_failure``) are unit-tested; ``ProbeFailures.look`` does the one read. Called by
``reconcile.reconciler``; hands on the failure message for ``reconcile.status`` (reason ``ProbeFailing``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, Final

from webserver_operator.api.models import WebServer
from webserver_operator.core.resources import EVENTS
from webserver_operator.core.vocabulary import ApiRequests, KubeObject, ObjectKey
from webserver_operator.kube.errors import ApiError, TransportError
from webserver_operator.reconcile.memory import Memory

__all__ = ["FRESH_SECONDS", "GRACE", "LOOK_INTERVAL", "ProbeFailures", "latest_failure", "needs_look"]

GRACE: Final = 20.0
"""Seconds a Deployment with unready pods of its current version may make no progress before the operator asks why:
longer than the default readiness probe takes to pass on a starting server, so ordinary rollouts and bulk creates read
nothing."""
LOOK_INTERVAL: Final = 10.0
"""Seconds between two looks at one WebServer's probe Events while its pods stay unready: the default probe fails a
pod within 15 s (3 x 5 s), so a person sees the reason within about 25 s, for one list per WebServer per 10 s."""
FRESH_SECONDS: Final = 60
"""A probe Event last seen longer ago than this is not the reason pods are unready now."""
_FIELD_SELECTOR: Final = "involvedObject.kind=Pod,reason=Unhealthy"
_PROBE_FAILED: Final = re.compile(r"^(Readiness|Startup|Liveness) probe failed")


def needs_look(ws: WebServer, deployment: KubeObject | None) -> bool:
    """Whether the Deployment of ``ws`` has pods of its current version that are not available (worth asking why)."""
    if deployment is None or ws.spec.replicas == 0:
        return False
    status = deployment.get("status") or {}
    generation = int((deployment.get("metadata") or {}).get("generation") or 0)
    if int(status.get("observedGeneration") or 0) < generation:
        return False
    updated = int(status.get("updatedReplicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    ready = int(status.get("readyReplicas") or 0)
    replicas = int(status.get("replicas") or 0)
    return updated > 0 and (available < ws.spec.replicas or ready < replicas)


def _pod_name_pattern(deployment_name: str) -> re.Pattern[str]:
    """A pod of the Deployment: ``<name>-<pod-template-hash>-<5 characters>`` (not ``<name>-2-...`` of another)."""
    return re.compile(rf"^{re.escape(deployment_name)}-[a-z0-9]+-[a-z0-9]{{5}}$")


def _when(event: KubeObject) -> str:
    series = event.get("series") or {}
    return str(series.get("lastObservedTime") or event.get("lastTimestamp") or event.get("eventTime") or "")


def _recent(event: KubeObject, now: datetime) -> bool:
    try:
        when = datetime.fromisoformat(_when(event).replace("Z", "+00:00"))
    except ValueError:
        return False
    return now - when <= timedelta(seconds=FRESH_SECONDS)


def latest_failure(events: Iterable[KubeObject], deployment_name: str, *, now: datetime) -> str | None:
    """The message of the newest recent probe-failure Event of a pod of ``deployment_name``, naming the pod; or None.

    Recent: last seen within ``FRESH_SECONDS`` of ``now``; an hour-old failure of a pod long gone says nothing about
    why the pods are unready now (an image that cannot be pulled has no probe Event at all).
    """
    pattern = _pod_name_pattern(deployment_name)
    mine = [
        event
        for event in events
        if pattern.match(str((event.get("involvedObject") or {}).get("name") or ""))
        and _PROBE_FAILED.match(str(event.get("message") or ""))
        and _recent(event, now)
    ]
    if not mine:
        return None
    newest = max(mine, key=_when)
    pod = (newest.get("involvedObject") or {}).get("name")
    return f"pod {pod}: {' '.join(str(newest.get('message') or '').split())}"


def _last_progress(deployment: KubeObject) -> datetime | None:
    """When the Deployment last made progress: its ``Progressing`` condition's ``lastUpdateTime``.

    The Deployment controller moves it whenever a pod is added, gets ready or available, or an old one goes.
    """
    conditions = (deployment.get("status") or {}).get("conditions") or []
    progressing = next((c for c in conditions if c.get("type") == "Progressing"), None)
    try:
        return datetime.fromisoformat(str((progressing or {}).get("lastUpdateTime")).replace("Z", "+00:00"))
    except ValueError:
        return None


class ProbeFailures:
    """The last probe failure seen per WebServer, kept in its ``reconcile.memory`` record.

    Read once the rollout has not progressed for ``GRACE`` seconds while pods are unready, then at most once per
    ``LOOK_INTERVAL``. ``memory``: the reconciler's records (a private one when not given), so forgetting a WebServer
    forgets its probe memory too.
    """

    def __init__(self, api: ApiRequests, clock: Callable[[], datetime], memory: Memory | None = None) -> None:
        self._api = api
        self._clock = clock
        self._memory = memory if memory is not None else Memory()

    def _clear(self, key: ObjectKey) -> None:
        record = self._memory.get(key)
        if record is not None:
            record.unready_since = record.probe_look = None

    async def look(self, ws: WebServer, deployment: KubeObject | None) -> tuple[str | None, float | None]:
        """The newest probe failure of ``ws``'s unavailable pods (or None), and in how many seconds to look again.

        No read until the Deployment has made no progress for ``GRACE`` seconds (a rollout's pods usually get ready
        within it, so a bulk create or an ordinary rollout reads nothing). A failed read (no RBAC for Events, a
        timeout) is not a reconcile error: the status then says what the Deployment says, without the probe's answer.
        """
        key = (ws.namespace, ws.name)
        if deployment is None or not needs_look(ws, deployment):
            self._clear(key)
            return None, None
        now = self._clock()
        record = self._memory.of(key)
        since = _last_progress(deployment)
        if since is None:
            since = record.unready_since = record.unready_since or now
        quiet = (now - since).total_seconds()
        if quiet < GRACE:
            return None, GRACE - quiet
        last = record.probe_look
        if last is not None and (now - last[0]).total_seconds() < LOOK_INTERVAL:
            return last[1], LOOK_INTERVAL - (now - last[0]).total_seconds()
        try:
            answer: dict[str, Any] = await self._api.request(
                "GET", EVENTS.path(namespace=ws.namespace), query={"fieldSelector": _FIELD_SELECTOR}
            )
        except (ApiError, TransportError):
            failure = None
        else:
            failure = latest_failure(answer.get("items") or [], ws.name, now=now)
        record.probe_look = (now, failure)
        return failure, LOOK_INTERVAL
