"""Owner references: how a child points at its WebServer, and how to tell whose child an object is.

Why ``controller: true`` and ``blockOwnerDeletion: true``: the controller reference is what makes an object *ours*
(the garbage collector deletes it with the WebServer, so the operator needs no finalizer) and what tells our child
apart from a foreign object that merely has the same name; an object controlled by someone else is never adopted or
overwritten. ``blockOwnerDeletion`` makes foreground deletion of a WebServer wait for its children. Reading a
child's controller reference back is ``core.vocabulary.controller_of``.

Called by the Deployment and Service builders; hands on the ownerReference every child carries.
"""

from typing import Any

from webserver_operator.api.models import WebServer


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
