"""The children a WebServer should have: names, labels, owner reference, the Deployment and the Service, as JSON.

Why pure: no I/O and no client library here, so the objects the operator writes are unit-tested without a server and
every reconcile computes exactly the same desired state from the same WebServer. Everything written here is a field
the operator owns and enforces forever (``reconcile.owned``); everything else is left to the API server's defaults
and to other tools. Called by ``reconcile.reconciler`` (what to create and compare), ``reconcile.owned`` (the
container by name), ``reconcile.setup`` (the child watches' label selector and orphan rule) and ``reconcile.status``
(``status.selector``).

**Names.** A child named exactly like its WebServer can be found again after any crash with a plain GET (or cache
lookup), without listing or remembering anything; two reconciles of the same WebServer can never create two
Deployments. The CRD guarantees the WebServer name is a DNS-1035 label of at most 63 characters, valid for a
Deployment, a Service and a label value alike, so no hashing or truncation is needed.

**Labels.** The *selector* is ``{name, instance}`` only, because a Deployment's ``spec.selector`` is immutable and must
never change for the life of a WebServer (so nothing that can change, such as an image or version, is in it). The
full *child labels* add ``managed-by`` (which label-filtered informers use to watch only our children, see
``CHILD_LABEL_SELECTOR``) and ``component``. All keys are the recommended ``app.kubernetes.io/*`` labels, so
dashboards and ``kubectl get -l`` work without knowing this operator.

**Ownership.** ``controller: true`` is what makes an object *ours* (the garbage collector deletes it with the
WebServer, so the operator needs no finalizer) and tells our child apart from a foreign object that merely has the
same name; an object controlled by someone else is never adopted or overwritten. ``blockOwnerDeletion`` makes
foreground deletion of a WebServer wait for its children. Reading a child's controller reference back is
``core.vocabulary.controller_of``.

**The pod.** No securityContext is set unless the WebServer asks for one (``spec.securityContext``, checked against
Pod Security baseline by ``core.podsecurity``): users choose the image, and a namespace whose Pod Security level
rejects the pods must show up in the WebServer's Ready condition, not be papered over by the operator. A web server
needs no API credentials and no environment variables describing other Services, so neither is mounted.

**The Service.** It selects the pod selector's labels, and from template revision 2 on also ``PRE_STOP_POD_LABEL``
(only pods that keep serving through their preStop pause), as soon as ``reconcile.handover`` says no pod without it
still takes traffic that only it serves. ``targetPort: "http"`` (the container port's name) keeps pointing at the
right container port whatever ``spec.port`` is. ``nodePort`` is only set when the user asked for one; otherwise the
API server allocates a free port, and the owned-field diff keeps that allocated port stable from then on.
"""

from typing import Any, Final

from webserver_operator.api.models import Health, Probe, ReadinessProbe, WebServer

__all__ = [
    "CHILD_LABEL_SELECTOR",
    "CONTAINER_NAME",
    "MAX_SURGE",
    "MIN_READY_SECONDS",
    "PORT_NAME",
    "PRE_STOP_POD_LABEL",
    "PRE_STOP_POD_LABEL_VALUE",
    "PRE_STOP_SLEEP_SECONDS",
    "TEMPLATE_REVISION",
    "TEMPLATE_REVISIONS",
    "TEMPLATE_REVISION_ANNOTATION",
    "TERMINATION_GRACE_SECONDS",
    "UPGRADE_ANNOTATION",
    "child_labels",
    "child_name",
    "desired_deployment",
    "desired_pdb",
    "desired_service",
    "orphan_of",
    "owner_reference",
    "selector_labels",
    "selector_string",
    "selects_pre_stop_pods",
    "template_revision_of",
]

# --- names ---------------------------------------------------------------------------------------------------------

CONTAINER_NAME = "web"
"""Name of the web server container in the pod template; the owned-field diff finds it by this name."""
PORT_NAME = "http"
"""Name of the container port and of the Service port; the Service's targetPort refers to it by name."""


# --- template revisions and rollout timing --------------------------------------------------------------------------

TEMPLATE_REVISIONS: Final = (1, 2)
"""Every pod-template rendering this operator can write (docs/upgrades.md, "Template revisions"): 1 is 0.1.0's, 2
adds the probes, the preStop pause, the grace period, the rollout strategy and minReadySeconds."""
TEMPLATE_REVISION: Final = TEMPLATE_REVISIONS[-1]
"""The newest revision: what a new WebServer, an edited one, or one its owner annotates is rendered at."""
TEMPLATE_REVISION_ANNOTATION: Final = "webserver-operator.dev/template-revision"
#: On a WebServer, ``"true"``: its owner asks to move it to the newest template revision (``reconcile.revisions``).
UPGRADE_ANNOTATION: Final = "webserver-operator.dev/template-upgrade"
"""On the Deployment's metadata (not the pod template, so recording it restarts nothing): the revision rendered."""

PRE_STOP_SLEEP_SECONDS: Final = 10
"""How long a terminating pod keeps serving before its container gets SIGTERM (the kubelet's native ``sleep``
preStop action, GA in Kubernetes 1.34, which the chart requires: no binary in the image is needed). The pod leaves the
EndpointSlice as soon as it terminates, but each node's kube-proxy rewrites its rules only after it has seen that (one
watch event, then a sync that kube-proxy spaces at least a second apart, longer on a busy node); until then it still
sends new connections to the pod, and nginx's answer to SIGTERM is to close them. Ten seconds covers that with margin
on a loaded node; it is also what every scale-down and rollout step waits before a pod is gone."""
TERMINATION_GRACE_SECONDS: Final = 30
"""The pause above plus 20 seconds for the server to finish what it is answering, before SIGKILL. (30 is also
Kubernetes' default: rendered explicitly so the pause can never be cut short by a lower value set by hand.)"""
MAX_SURGE: Final = "25%"
"""New pods a rollout may add above ``spec.replicas``; with ``maxUnavailable: 0`` a rollout never takes a ready pod
away before its replacement is ready. 25% rounds up, so it is one pod from 1 to 4 replicas, and at 100 replicas a
rollout does not take a hundred steps. It needs room (quota, nodes) for that many extra pods."""
PRE_STOP_POD_LABEL: Final = "webserver-operator.dev/pre-stop-pause"
"""On the pod template from revision 2 on (value ``PRE_STOP_POD_LABEL_VALUE``): this pod has the preStop pause. Not in
the Deployment's selector (immutable, and 0.1.0's pods lack it): only the Service selects it, so that pods started
without the pause leave the Service's endpoints before a rollout stops them (``reconcile.handover``). Its value never
changes, whatever later revisions add, because a Service selects by equality."""
PRE_STOP_POD_LABEL_VALUE: Final = "true"
MIN_READY_SECONDS: Final = 5
"""Seconds a new pod must stay ready before it counts as available and the rollout removes an old one: a server that
passes its first probe and then crashes (a configuration read late) stops the rollout instead of replacing every
serving pod; it also gives every kube-proxy time to add the new pod before the old one leaves, and, on the move off
revision 1, gives the operator time to take the revision-1 pods out of the Service before the first of them is
stopped (``reconcile.handover``). Costs 5 seconds per rollout step."""


def child_name(ws: WebServer) -> str:
    """Name of the Deployment and of the Service of ``ws`` (both are named like the WebServer)."""
    return ws.name


# --- labels --------------------------------------------------------------------------------------------------------

_NAME_LABEL = "app.kubernetes.io/name"
_NAME_VALUE = "webserver"
_INSTANCE_LABEL = "app.kubernetes.io/instance"
_MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
_MANAGED_BY_VALUE = "webserver-operator"
_COMPONENT_LABEL = "app.kubernetes.io/component"
_COMPONENT_VALUE = "web-server"

CHILD_LABEL_SELECTOR = f"{_MANAGED_BY_LABEL}={_MANAGED_BY_VALUE}"
"""Label selector (string form) for informers that watch only the Deployments and Services this operator manages."""


def selector_labels(name: str) -> dict[str, str]:
    """The immutable pod selector of the WebServer ``name`` (Deployment ``matchLabels`` and Service ``selector``)."""
    return {_NAME_LABEL: _NAME_VALUE, _INSTANCE_LABEL: name}


def selector_string(name: str) -> str:
    """The selector in string form (``k=v,k=v``, keys sorted): ``status.selector`` and the scale labelSelectorPath."""
    return ",".join(f"{key}={value}" for key, value in sorted(selector_labels(name).items()))


def child_labels(name: str) -> dict[str, str]:
    """All labels the operator sets on its children and on the pod template of the WebServer ``name``."""
    return {
        **selector_labels(name),
        _MANAGED_BY_LABEL: _MANAGED_BY_VALUE,
        _COMPONENT_LABEL: _COMPONENT_VALUE,
    }


def orphan_of(obj: dict[str, Any]) -> str | None:
    """The WebServer a child with our labels belongs to by its instance label, or None when it has not got them.

    The adoption rule, in one place: a child left without a controller by ``kubectl delete --cascade=orphan`` keeps
    our labels, so it wakes (``reconcile.setup``) and is adopted by (``reconcile.reconciler``) the WebServer its
    ``app.kubernetes.io/instance`` label names. Only for objects without a controller reference.
    """
    labels = (obj.get("metadata") or {}).get("labels") or {}
    instance = labels.get(_INSTANCE_LABEL)
    if labels.get(_MANAGED_BY_LABEL) != _MANAGED_BY_VALUE or not isinstance(instance, str) or not instance:
        return None
    return instance


# --- ownership -----------------------------------------------------------------------------------------------------


def owner_reference(ws: WebServer) -> dict[str, Any]:
    """The controller ownerReference every child of ``ws`` carries.

    Raises ValueError when ``ws`` has no ``metadata.uid`` (an object not read from the API server cannot own anything).
    """
    if not ws.uid:
        raise ValueError(f"WebServer {ws.namespace}/{ws.name} has no metadata.uid; read it from the API server first")
    return {
        "apiVersion": ws.api_version,
        "kind": ws.kind,
        "name": ws.name,
        "uid": ws.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(ws: WebServer) -> dict[str, Any]:
    return {
        "name": child_name(ws),
        "namespace": ws.namespace,
        "labels": child_labels(ws.name),
        "ownerReferences": [owner_reference(ws)],
    }


# --- the Deployment ------------------------------------------------------------------------------------------------


def _container(ws: WebServer) -> dict[str, Any]:
    """The ``web`` container of the pod template."""
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": ws.spec.image,
        "ports": [{"name": PORT_NAME, "containerPort": ws.spec.port, "protocol": "TCP"}],
    }
    if ws.spec.resources is not None:
        resources = ws.spec.resources.model_dump(by_alias=True, exclude_none=True)
        if resources:
            container["resources"] = resources
    if ws.spec.security_context is not None:
        container["securityContext"] = ws.spec.security_context.model_dump(by_alias=True, exclude_none=True)
    return container


def _probe(path: str, timing: Probe) -> dict[str, Any]:
    """A probe GETting ``path`` on the ``http`` port of the pod's own IP: no ``host``, no other handler, ever."""
    probe: dict[str, Any] = {
        "httpGet": {"path": path, "port": PORT_NAME, "scheme": "HTTP"},
        "periodSeconds": timing.period_seconds,
        "timeoutSeconds": timing.timeout_seconds,
        "failureThreshold": timing.failure_threshold,
        "successThreshold": 1,
    }
    if timing.initial_delay_seconds:
        probe["initialDelaySeconds"] = timing.initial_delay_seconds
    return probe


def _add_availability(container: dict[str, Any], ws: WebServer) -> None:
    """Revision 2's container fields: the probes of ``spec.health`` and the preStop pause."""
    health = ws.spec.health or Health()
    readiness = health.readiness or ReadinessProbe()
    if readiness.enabled:
        container["readinessProbe"] = _probe(health.path, readiness)
    if health.liveness is not None:
        container["livenessProbe"] = _probe(health.path, health.liveness)
    if health.startup is not None:
        container["startupProbe"] = _probe(health.path, health.startup)
    container["lifecycle"] = {"preStop": {"sleep": {"seconds": PRE_STOP_SLEEP_SECONDS}}}


def desired_deployment(ws: WebServer, revision: int = TEMPLATE_REVISION) -> dict[str, Any]:
    """The full Deployment object for ``ws`` rendered at template ``revision`` (create body, owned-field reference).

    Revision 1 is 0.1.0's rendering, byte for byte; revision 2 adds probes, the preStop pause (and the pod label that
    says so), the grace period, the rollout strategy and ``minReadySeconds``, and records itself in an annotation.
    """
    if revision not in TEMPLATE_REVISIONS:
        raise ValueError(f"unknown template revision {revision} (known: {', '.join(map(str, TEMPLATE_REVISIONS))})")
    container = _container(ws)
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if ws.spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": ref.name} for ref in ws.spec.image_pull_secrets]
    metadata = _metadata(ws)
    spec: dict[str, Any] = {
        "replicas": ws.spec.replicas,
        "selector": {"matchLabels": selector_labels(ws.name)},
        "template": {
            "metadata": {"labels": child_labels(ws.name)},
            "spec": pod_spec,
        },
    }
    if revision >= 2:
        metadata["annotations"] = {TEMPLATE_REVISION_ANNOTATION: str(revision)}
        spec["template"]["metadata"]["labels"][PRE_STOP_POD_LABEL] = PRE_STOP_POD_LABEL_VALUE
        _add_availability(container, ws)
        pod_spec["terminationGracePeriodSeconds"] = TERMINATION_GRACE_SECONDS
        spec["strategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": MAX_SURGE},
        }
        spec["minReadySeconds"] = MIN_READY_SECONDS
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}


def template_revision_of(deployment: dict[str, Any] | None) -> int:
    """The template revision a live Deployment records (``TEMPLATE_REVISION_ANNOTATION``); absent means 1.

    A value this operator does not know (hand-edited, or written by a newer operator after a rollback) counts as the
    nearest known one, so a rollback of the operator renders what it can instead of refusing the WebServer.
    """
    annotations = ((deployment or {}).get("metadata") or {}).get("annotations") or {}
    try:
        recorded = int(str(annotations.get(TEMPLATE_REVISION_ANNOTATION, "1")))
    except ValueError:
        return 1
    return min(max(recorded, TEMPLATE_REVISIONS[0]), TEMPLATE_REVISIONS[-1])


# --- the PodDisruptionBudget ---------------------------------------------------------------------------------------


def desired_pdb(ws: WebServer) -> dict[str, Any] | None:
    """The PodDisruptionBudget of ``ws``: at most one pod evicted at a time; None below two replicas.

    One replica cannot keep serving through any eviction, and a budget that forbids evicting it (``maxUnavailable:
    0``) would hold a node drain forever; so a single-replica WebServer has no budget, and its drain costs the time a
    new pod takes to start (docs/availability.md). ``maxUnavailable: 1`` rather than ``minAvailable``: it follows
    ``spec.replicas`` as it is scaled, and an eviction waits until the pod evicted before is replaced and ready.
    ``unhealthyPodEvictionPolicy: AlwaysAllow``: a pod that is not ready serves nothing, so evicting it costs nothing,
    and a WebServer whose pods all fail their probe (a bad image) must not hold a node drain forever.
    """
    if ws.spec.replicas < 2:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(ws),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector_labels(ws.name)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


# --- the Service ---------------------------------------------------------------------------------------------------


def _service_port(ws: WebServer) -> dict[str, Any]:
    """The single ``http`` port of the Service."""
    port: dict[str, Any] = {"name": PORT_NAME, "port": ws.spec.port, "targetPort": PORT_NAME, "protocol": "TCP"}
    if ws.spec.node_port is not None:
        port["nodePort"] = ws.spec.node_port
    return port


def desired_service(ws: WebServer, *, pre_stop_pods_only: bool = True) -> dict[str, Any]:
    """The full Service object for ``ws`` (create body, and reference for the owned-field diff).

    ``pre_stop_pods_only``: select only pods labelled ``PRE_STOP_POD_LABEL`` (template revision 2 on); False while
    pods started without the pause still serve (``reconcile.handover`` decides).
    """
    selector = selector_labels(ws.name)
    if pre_stop_pods_only:
        selector[PRE_STOP_POD_LABEL] = PRE_STOP_POD_LABEL_VALUE
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(ws),
        "spec": {
            "type": "NodePort",
            "selector": selector,
            "ports": [_service_port(ws)],
        },
    }


def selects_pre_stop_pods(service: dict[str, Any]) -> bool:
    """Whether a live Service's selector already picks only pods with the preStop pause (``PRE_STOP_POD_LABEL``)."""
    selector = (service.get("spec") or {}).get("selector") or {}
    return selector.get(PRE_STOP_POD_LABEL) == PRE_STOP_POD_LABEL_VALUE
