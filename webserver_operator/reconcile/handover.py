"""When a WebServer's Service stops sending traffic to pods without the preStop pause: the lossless move off revision 1.

Why: pods started at template revision 1 (by 0.1.0) have no preStop pause, and a running pod's lifecycle cannot
change. When a rollout removes one, the kubelet stops its server at once, while kube-proxy on each node still sends it
new connections until it has seen the pod leave the EndpointSlice: those requests fail. On kind under traffic, a move
off revision 1 lost 1 to 5 requests in every run (docs/availability.md), the race of every 0.1.0 rollout met once more.

So revision 2 labels its pods (``desired.PRE_STOP_POD_LABEL``), and the Service selects that label too, as soon as
a pod with it is ready to take the traffic. From then on the revision-1 pods are out of the Service's endpoints, and
they are stopped later: the rollout removes an old pod only when a new one has been ready for
``desired.MIN_READY_SECONDS`` (5 s), which is the time the operator has to see the new pod ready (one watch event
on the Deployment's status) and write the Service, and every kube-proxy to drop the old pods. Until a new pod is
ready, the Service keeps the old selector, so there is never a moment with nothing to route to. The pods left on
revision 1 keep running out of the Service until the rollout replaces them; for those seconds the traffic goes to
fewer pods (at least one, ready). controller-runtime operators have no such step: their template changes roll pods
with whatever lifecycle the old pods had.

Once the Service selects the label it keeps it (read back from the live Service, so a restart of the operator in the
middle of a move changes nothing): every pod rendered at revision 2 or later carries the label. A Service with no
revision-1 pods behind it (a new WebServer, a Deployment already rolled) selects it from the start.

Pure: called by ``reconcile.children`` with the revision the Deployment is rendered at and the cached Deployment and
Service; hands back whether the Service selects only pods with the pause (``desired.desired_service``).
"""

from __future__ import annotations

from typing import Final

from webserver_operator.core.vocabulary import KubeObject
from webserver_operator.desired import selects_pre_stop_pods, template_revision_of

__all__ = ["PRE_STOP_REVISION", "pre_stop_pod_serves", "pre_stop_pods_only"]

PRE_STOP_REVISION: Final = 2
"""The first template revision whose pods have the preStop pause and its label (``desired.TEMPLATE_REVISIONS``)."""


def pre_stop_pods_only(revision: int, deployment: KubeObject | None, service: KubeObject | None) -> bool:
    """Whether the Service of a Deployment rendered at ``revision`` selects only pods with the preStop pause.

    ``deployment`` and ``service`` are the live (cached) children, None when absent. Revision 1 never does (its pods
    have no label). A Service that already does keeps doing so; otherwise it switches once no pod without the pause
    would be the only one serving (``pre_stop_pod_serves``), or at once when there is no Deployment (every pod to
    come is rendered at ``revision``).
    """
    if revision < PRE_STOP_REVISION:
        return False
    if service is not None and selects_pre_stop_pods(service):
        return True
    return deployment is None or pre_stop_pod_serves(deployment)


def pre_stop_pod_serves(deployment: KubeObject) -> bool:
    """Whether the live Deployment has a ready pod with the preStop pause, or no pod without it.

    From the Deployment's status: once the controller has seen its current template (``observedGeneration``), pods
    of older templates number ``replicas - updatedReplicas``; more ready pods than that means at least one ready pod
    of the current template, which carries the label when the template is at ``PRE_STOP_REVISION`` or later. Old
    pods of a revision-2 template (a new image during the move) are counted as unlabelled: the switch then waits for
    one more ready pod, never sends traffic to nothing.
    """
    if template_revision_of(deployment) < PRE_STOP_REVISION:
        return False
    metadata, status = deployment.get("metadata") or {}, deployment.get("status") or {}
    if (status.get("observedGeneration") or 0) < (metadata.get("generation") or 0):
        return False
    older = (status.get("replicas") or 0) - (status.get("updatedReplicas") or 0)
    return older <= 0 or (status.get("readyReplicas") or 0) - older >= 1
