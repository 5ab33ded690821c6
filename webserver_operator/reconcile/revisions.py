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

An admin-paced mover (``--template-upgrade-rate`` in the design) is not built yet: until it is, a WebServer nobody
edits or annotates stays on its revision, and the ``TemplateUpgradePending`` Event says how to move it.

Pure: called by ``reconcile.reconciler`` with the WebServer and its cached Deployment; hands back a revision number
and, for an old one, the Event message. ``RevisionCounts`` keeps the per-revision gauge
(``webserver_operator_template_revision_webservers``) from what the reconciler finds.
"""

from __future__ import annotations

from typing import Final

from webserver_operator import metrics
from webserver_operator.api.models import WebServer
from webserver_operator.core.vocabulary import KubeObject, controller_of
from webserver_operator.desired import (
    TEMPLATE_REVISION,
    TEMPLATE_REVISIONS,
    desired_deployment,
    template_revision_of,
)
from webserver_operator.reconcile.owned import merge_owned_deployment

UPGRADE_ANNOTATION: Final = "webserver-operator.dev/template-upgrade"
"""On a WebServer, ``"true"``: move its Deployment to the newest template revision now (one rollout)."""

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


def pending_message(ws: WebServer, revision: int) -> str:
    """The ``TemplateUpgradePending`` Event: what the newest revision changes and how to move this WebServer."""
    changes = "; ".join(REVISION_CHANGES[r] for r in sorted(REVISION_CHANGES) if r > revision)
    return (
        f"Deployment {ws.name} keeps pod template revision {revision} (newest: {TEMPLATE_REVISION}), so upgrading the "
        f"operator restarted none of its pods. The newest revision adds: {changes}. It is applied with the next change "
        "of the WebServer's pod template (image, port, resources...), or now, as one rolling update, with "
        f"`kubectl -n {ws.namespace} annotate webserver {ws.name} {UPGRADE_ANNOTATION}=true`"
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

    def counts(self) -> dict[int, int]:
        return dict(self._counts)

    def _publish(self) -> None:
        for revision, count in self._counts.items():
            metrics.TEMPLATE_REVISION_WEBSERVERS.labels(revision=str(revision)).set(count)
