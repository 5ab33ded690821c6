"""The Deployment a WebServer should have, as a plain JSON dict.

Why only these fields: everything written here is a field the operator owns and enforces forever (see
``webserver_operator.reconcile.owned``); everything else is left to the API server's defaults and to other tools.
In particular no securityContext is set for the web server pods unless the WebServer asks for one
(``spec.securityContext``): users choose the image, and a namespace whose Pod Security level rejects the pods must
show up in the WebServer's Ready condition, not be papered over by the operator.

Called by ``reconcile.reconciler`` through ``builders``; hands on the desired Deployment dict.
"""

from typing import Any

from webserver_operator.api.models import WebServer
from webserver_operator.builders.labels import child_labels, selector_labels
from webserver_operator.builders.names import CONTAINER_NAME, PORT_NAME, child_name
from webserver_operator.builders.ownership import owner_reference


def desired_container(ws: WebServer) -> dict[str, Any]:
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
    name = child_name(ws)
    # A web server needs no Kubernetes API credentials and no environment variables describing other Services.
    pod_spec: dict[str, Any] = {
        "containers": [desired_container(ws)],
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if ws.spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": ref.name} for ref in ws.spec.image_pull_secrets]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": ws.namespace,
            "labels": child_labels(ws.name),
            "ownerReferences": [owner_reference(ws)],
        },
        "spec": {
            "replicas": ws.spec.replicas,
            "selector": {"matchLabels": selector_labels(ws.name)},
            "template": {
                "metadata": {"labels": child_labels(ws.name)},
                "spec": pod_spec,
            },
        },
    }
