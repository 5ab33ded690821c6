"""Which template revision a WebServer's Deployment is rendered at: the newest only when moving it restarts nothing new.

Why: a new operator version that renders the pod template differently would roll the pods of every WebServer in the
cluster at once, right after ``helm upgrade`` (docs/upgrades.md). So each Deployment records the revision it was
rendered at (``desired.TEMPLATE_REVISION_ANNOTATION``, on its metadata: recording it restarts nothing), and is rendered
at that revision until one of these moves it to the newest:

1. it is created (there is nothing to restart);
2. the pod template changes anyway at its recorded revision (a new image, port, resources...: the user asked for a
   rollout, and the new defaults ride on it: one rollout, not two); a change of ``spec.replicas`` alone restarts
   nothing and moves nothing;
3. its owner asks: ``UPGRADE_ANNOTATION`` (``webserver-operator.dev/template-upgrade: "true"``) on the WebServer.

4. at the admin's pace: ``Pacer`` (``--template-upgrade-rate``, WebServers per minute; 0, the default: never on its
   own) moves at most that many per minute, and never more than that many at once: a moved Deployment counts until it
   is available again, and one that stops progressing (``ProgressDeadlineExceeded``) stops the pacer until it
   recovers or the operator restarts, so one bad default never takes down more than the rate allows. The pace is per
   operator replica (with sharding, each paces its own shards).

Nobody edits, annotates or paces: the WebServer stays on its revision, and the ``TemplateUpgradePending`` Event says
how to move it.

Pure: called by ``reconcile.reconciler`` with the WebServer and its cached Deployment; hands back a revision number
and, for an old one, the Event message. ``RevisionCounts`` keeps the per-revision gauge
(``webserver_operator_template_revision_webservers``) from what the reconciler finds.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from typing import Final

from webserver_operator import metrics
from webserver_operator.api.models import WebServer
from webserver_operator.core.vocabulary import KubeObject, controller_of
from webserver_operator.desired import (
    TEMPLATE_REVISION,
    TEMPLATE_REVISIONS,
    UPGRADE_ANNOTATION,
    desired_deployment,
    template_revision_of,
)
from webserver_operator.reconcile.owned import merge_owned_deployment

__all__ = ["REVISION_CHANGES", "Pacer", "RevisionCounts", "pending_message", "revision_for", "upgrade_requested"]

#: What each revision adds over the one before, for the ``TemplateUpgradePending`` Event.
REVISION_CHANGES: Final = {
    2: (
        "readiness probe (spec.health), preStop pause, terminationGracePeriodSeconds, rollout strategy "
        "maxUnavailable 0 and minReadySeconds"
    ),
}


def upgrade_requested(ws: WebServer) -> bool:
    """Whether the WebServer's owner asked to move it to the newest revision (``UPGRADE_ANNOTATION``)."""
    annotations = ws.metadata.get("annotations") or {}
    return str(annotations.get(UPGRADE_ANNOTATION, "")).lower() == "true"


def revision_for(ws: WebServer, live: KubeObject | None) -> int:
    """The template revision to render ``ws``'s Deployment at, given the cached Deployment ``live`` (None: absent)."""
    if live is None:
        return TEMPLATE_REVISION
    recorded = template_revision_of(live)
    if recorded >= TEMPLATE_REVISION or upgrade_requested(ws):
        return TEMPLATE_REVISION
    owner = controller_of(live)
    if owner is not None and owner.get("uid") != ws.uid:
        return recorded  # not ours: the reconciler reports it and writes nothing
    template = (live.get("spec") or {}).get("template")
    merged = merge_owned_deployment(live, desired_deployment(ws, recorded))
    if (merged.get("spec") or {}).get("template") != template:
        return TEMPLATE_REVISION  # the pods roll anyway: take the newest rendering along
    return recorded


def pending_message(ws: WebServer, revision: int, *, paced: bool = False) -> str:
    """The ``TemplateUpgradePending`` Event: what the newest revision changes and how to move this WebServer."""
    changes = "; ".join(REVISION_CHANGES[r] for r in sorted(REVISION_CHANGES) if r > revision)
    return (
        f"Deployment {ws.name} keeps pod template revision {revision} (newest: {TEMPLATE_REVISION}), so upgrading the "
        f"operator restarted none of its pods. The newest revision adds: {changes}. It is applied with the next change "
        "of the WebServer's pod template (image, port, resources...), or now, as one rolling update, with "
        f"`kubectl -n {ws.namespace} annotate webserver {ws.name} {UPGRADE_ANNOTATION}=true`"
        + ("; the operator also moves WebServers at the pace its admin set (--template-upgrade-rate)" if paced else "")
    )


class RevisionCounts:
    """The WebServers per template revision, published as ``webserver_operator_template_revision_webservers``.

    Every revision's series exists at 0 from the start, so a dashboard shows "0 left on revision 1" rather than no
    data. Counted by this replica from the Deployments it reconciles (with sharding: per replica; sum them).
    """

    def __init__(self) -> None:
        self._at: dict[tuple[str, str], int] = {}
        self._counts = dict.fromkeys(TEMPLATE_REVISIONS, 0)
        self._publish()

    def set(self, key: tuple[str, str], revision: int) -> None:
        if self._at.get(key) == revision:
            return
        self.forget(key)
        self._at[key] = revision
        self._counts[revision] += 1
        self._publish()

    def forget(self, key: tuple[str, str]) -> None:
        revision = self._at.pop(key, None)
        if revision is not None:
            self._counts[revision] -= 1
            self._publish()

    def keys(self) -> frozenset[tuple[str, str]]:
        """The WebServers whose revision is counted."""
        return frozenset(self._at)

    def counts(self) -> dict[int, int]:
        return dict(self._counts)

    def _publish(self) -> None:
        for revision, count in self._counts.items():
            metrics.TEMPLATE_REVISION_WEBSERVERS.labels(revision=str(revision)).set(count)


def _available(deployment: KubeObject) -> bool:
    """Whether the Deployment has finished its rollout: every desired pod updated and available."""
    status = deployment.get("status") or {}
    generation = int((deployment.get("metadata") or {}).get("generation") or 0)
    want = int((deployment.get("spec") or {}).get("replicas", 1))
    counts = [int(status.get(key) or 0) for key in ("updatedReplicas", "availableReplicas", "replicas")]
    return int(status.get("observedGeneration") or 0) >= generation and counts == [want, want, want]


def _deadline_exceeded(deployment: KubeObject) -> bool:
    conditions = (deployment.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "Progressing" and c.get("status") == "False" and c.get("reason") == "ProgressDeadlineExceeded"
        for c in conditions
    )


class Pacer:
    """Moves WebServers left on an old template revision at the admin's pace (``--template-upgrade-rate``).

    At most ``per_minute`` moves within any 60 s, at most ``ceil(per_minute)`` moved Deployments rolling at once,
    none while a moved one is stuck (``ProgressDeadlineExceeded``). ``clock``: seconds, monotonic.
    """

    def __init__(self, per_minute: float, clock: Callable[[], float]) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._moves: collections.deque[float] = collections.deque()
        self._rolling: set[tuple[str, str]] = set()
        self._stuck: set[tuple[str, str]] = set()

    @property
    def active(self) -> bool:
        return self._per_minute > 0

    def stuck(self) -> list[tuple[str, str]]:
        """The moved WebServers whose rollout stopped progressing: the pacer waits for them."""
        return sorted(self._stuck)

    def observe(self, key: tuple[str, str], deployment: KubeObject | None) -> None:
        """Follow a moved WebServer's rollout: done once available, stuck on its progress deadline."""
        if key not in self._rolling and key not in self._stuck:
            return
        if deployment is None:
            self.forget(key)
        elif _deadline_exceeded(deployment):
            self._rolling.discard(key)
            self._stuck.add(key)
        elif _available(deployment):
            self.forget(key)

    def forget(self, key: tuple[str, str]) -> None:
        self._rolling.discard(key)
        self._stuck.discard(key)

    def keys(self) -> set[tuple[str, str]]:
        """The WebServers the pacer counts as rolling or stuck."""
        return self._rolling | self._stuck

    def has_room(self) -> bool:
        """Whether a move is allowed now (``take`` would succeed)."""
        if not self.active or self._stuck:
            return False
        now = self._clock()
        while self._moves and now - self._moves[0] >= 60:
            self._moves.popleft()
        return len(self._moves) < self._per_minute and len(self._rolling) < math.ceil(self._per_minute)

    def take(self, key: tuple[str, str]) -> bool:
        """Move ``key`` now if the pace allows; it then counts as rolling until ``observe`` sees it done."""
        if not self.has_room():
            return False
        self._moves.append(self._clock())
        self._rolling.add(key)
        return True

    def retry_in(self) -> float | None:
        """When a WebServer waiting for its turn should look again (None: the pacer is off)."""
        if not self.active:
            return None
        return min(max(60 / self._per_minute, 5.0), 300.0)
