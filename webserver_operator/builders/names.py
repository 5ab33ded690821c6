"""Names of the children and of the parts inside them.

Why fixed names: a child named exactly like its WebServer can be found again after any crash with a plain GET (or
cache lookup), without listing or remembering anything; two reconciles of the same WebServer can never create two
Deployments. The CRD guarantees the WebServer name is a DNS-1035 label of at most 63 characters, which is valid for a
Deployment, a Service and a label value alike, so no hashing or truncation is needed.

Used by the other builders and by ``reconcile.owned``, which finds the container and port by these names.
"""

from webserver_operator.api.models import WebServer

CONTAINER_NAME = "web"
"""Name of the web server container in the pod template; the owned-field diff finds it by this name."""
PORT_NAME = "http"
"""Name of the container port and of the Service port; the Service's targetPort refers to it by name."""


def child_name(ws: WebServer) -> str:
    """Name of the Deployment and of the Service of ``ws`` (both are named like the WebServer)."""
    return ws.name
