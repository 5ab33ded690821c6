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

**The Service.** ``targetPort: "http"`` (the container port's name) keeps pointing at the right container port
whatever ``spec.port`` is. ``nodePort`` is only set when the user asked for one; otherwise the API server allocates a
free port, and the owned-field diff keeps that allocated port stable from then on.
"""

from typing import Any

from webserver_operator.api.models import WebServer

__all__ = [
    "CHILD_LABEL_SELECTOR",
    "CONTAINER_NAME",
    "PORT_NAME",
    "child_labels",
    "child_name",
    "desired_deployment",
    "desired_service",
    "orphan_of",
    "owner_reference",
    "selector_labels",
    "selector_string",
]

# --- names ---------------------------------------------------------------------------------------------------------

CONTAINER_NAME = "web"
"""Name of the web server container in the pod template; the owned-field diff finds it by this name."""
PORT_NAME = "http"
"""Name of the container port and of the Service port; the Service's targetPort refers to it by name."""


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


def desired_deployment(ws: WebServer) -> dict[str, Any]:
    """The full Deployment object for ``ws`` (create body, and reference for the owned-field diff)."""
    pod_spec: dict[str, Any] = {
        "containers": [_container(ws)],
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if ws.spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": ref.name} for ref in ws.spec.image_pull_secrets]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(ws),
        "spec": {
            "replicas": ws.spec.replicas,
            "selector": {"matchLabels": selector_labels(ws.name)},
            "template": {
                "metadata": {"labels": child_labels(ws.name)},
                "spec": pod_spec,
            },
        },
    }


# --- the Service ---------------------------------------------------------------------------------------------------


def _service_port(ws: WebServer) -> dict[str, Any]:
    """The single ``http`` port of the Service."""
    port: dict[str, Any] = {"name": PORT_NAME, "port": ws.spec.port, "targetPort": PORT_NAME, "protocol": "TCP"}
    if ws.spec.node_port is not None:
        port["nodePort"] = ws.spec.node_port
    return port


def desired_service(ws: WebServer) -> dict[str, Any]:
    """The full Service object for ``ws`` (create body, and reference for the owned-field diff)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(ws),
        "spec": {
            "type": "NodePort",
            "selector": selector_labels(ws.name),
            "ports": [_service_port(ws)],
        },
    }
