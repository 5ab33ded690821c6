"""What an orphan would grant the WebServer's author once adopted: the refusals of the adoption path.

Why: adopting an orphan (a child with our labels and no controller, left by ``kubectl delete --cascade=orphan``, by
an installation that moved from ``privileged`` back to ``baseline``, or made by anyone with more rights than a
tenant) keeps every field the operator does not own, and then writes the tenant's image into it. Without a check a
WebServer editor could name an orphan with ``hostPID``, a ``hostPath: /`` volume and a privileged ``web`` container
and get their image running in it, although the operator would never render such a pod. So an object the operator
adopts becomes its responsibility as a whole: what would be refused if the operator rendered it is refused when it
adopts it, judged on the object *as it will be after the adoption patch* (the owned fields merged in).

Deployment: the pod template after the merge is held against the Pod Security baseline level
(``core.podsecurity.template_violations``, annotations included), unless the installation opted in to
``privileged``; and it may not mount a projected ServiceAccount token (the operator's pods get no API credentials,
whatever the pod level: ``automountServiceAccountToken: false`` is owned, a projected token volume would undo it).

Service: the operator renders a ``NodePort`` Service with a selector and one port. An orphan is refused when, after
the merge, it still carries what a tenant could not get from a WebServer and what others would trust:
``externalIPs`` (CVE-2020-8554: any Service with an external IP intercepts the cluster's traffic to that IP),
``loadBalancerIP``, ``loadBalancerSourceRanges``, ``loadBalancerClass``, ``externalName``,
``allocateLoadBalancerNodePorts`` and ``healthCheckNodePort``; and when it is of a type the WebServer never makes
and adoption would silently convert (``LoadBalancer``: a cloud load balancer and its public address someone set up;
``ExternalName``: a DNS alias others resolve). ``ClusterIP`` and ``NodePort`` orphans are adopted: the result is the
NodePort Service the WebServer grants anyway. Server-allocated and neutral fields (``clusterIP(s)``,
``ipFamilies``, ``ipFamilyPolicy``, ``sessionAffinity``, traffic policies, ``publishNotReadyAddresses``) stay.

Pure: called by ``reconcile.reconciler`` just before an adoption patch; an empty list means adopt.
"""

from __future__ import annotations

from typing import Any, Final

from webserver_operator.core.podsecurity import PodSecurityLevel, template_violations
from webserver_operator.core.vocabulary import KubeObject

__all__ = ["SERVICE_FIELDS_REFUSED", "SERVICE_TYPES_ADOPTED", "deployment_refusals", "service_refusals"]

#: Service spec fields a WebServer never asks for and an adopted Service may not keep (see the module docstring).
SERVICE_FIELDS_REFUSED: Final = (
    "externalIPs",
    "loadBalancerIP",
    "loadBalancerSourceRanges",
    "loadBalancerClass",
    "externalName",
    "allocateLoadBalancerNodePorts",
    "healthCheckNodePort",
)
#: Service types an orphan may have to be adopted (the result is always the WebServer's NodePort Service).
SERVICE_TYPES_ADOPTED: Final = ("ClusterIP", "NodePort")


def deployment_refusals(merged: KubeObject, *, pod_security: PodSecurityLevel) -> list[str]:
    """Why the Deployment ``merged`` (the orphan with the owned fields set) may not be adopted; [] to adopt."""
    template = (merged.get("spec") or {}).get("template") or {}
    refusals = [] if pod_security == "privileged" else template_violations(template)
    tokens = [
        str(volume.get("name", ""))
        for volume in (template.get("spec") or {}).get("volumes") or ()
        if any("serviceAccountToken" in source for source in (volume.get("projected") or {}).get("sources") or ())
    ]
    if tokens:
        names = ", ".join(f'"{name}"' for name in tokens)
        refusals.append(f"ServiceAccount token (projected volume {names} would give the pods API credentials)")
    return refusals


def service_refusals(live: KubeObject, merged: KubeObject) -> list[str]:
    """Why the Service ``live`` (``merged``: with the owned fields set) may not be adopted; [] to adopt."""
    refusals = []
    live_type = (live.get("spec") or {}).get("type") or "ClusterIP"
    if live_type not in SERVICE_TYPES_ADOPTED:
        refusals.append(f"type {live_type} (the WebServer's Service is a NodePort Service)")
    spec: dict[str, Any] = merged.get("spec") or {}
    refusals += [
        f"{field} ({_shown(spec[field])})" for field in SERVICE_FIELDS_REFUSED if spec.get(field) not in (None, "", [])
    ]
    return refusals


def _shown(value: Any) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
