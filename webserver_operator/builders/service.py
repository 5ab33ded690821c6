"""The NodePort Service a WebServer should have, as a plain JSON dict.

Why ``targetPort: "http"`` (the container port's name) rather than a number: the Service keeps pointing at the right
container port whatever ``spec.port`` is. ``nodePort`` is only set when the user asked for one; otherwise the API
server allocates a free port, and the owned-field diff keeps that allocated port stable from then on.

Called by ``reconcile.reconciler`` through ``builders``; hands on the desired Service dict.
"""

from typing import Any

from webserver_operator.api.models import WebServer
from webserver_operator.builders.labels import child_labels, selector_labels
from webserver_operator.builders.names import PORT_NAME, child_name
from webserver_operator.builders.ownership import owner_reference


def desired_service_port(ws: WebServer) -> dict[str, Any]:
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
        "metadata": {
            "name": child_name(ws),
            "namespace": ws.namespace,
            "labels": child_labels(ws.name),
            "ownerReferences": [owner_reference(ws)],
        },
        "spec": {
            "type": "NodePort",
            "selector": selector_labels(ws.name),
            "ports": [desired_service_port(ws)],
        },
    }
