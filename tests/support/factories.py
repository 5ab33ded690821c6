"""WebServers and their children as tests write them: one factory per kind, shared by every suite.

Why one module: each test file used to build its own WebServer with its own defaults (replicas 1, 2 or 3, namespace
``default``, ``ns`` or ``team-a``), so a reader had to look up which one a test meant, and a field the CRD gained had
to be added eight times. Here the defaults are written once; a test passes what it asserts on.

- ``webserver``: a manifest as a user writes it (``kubectl apply``), or, with ``namespace``/``uid``/``generation``,
  as the API server stores it; ``webserver_model`` is the stored one parsed into the operator's model.
- ``deployment`` and ``service``: children as the API server reports them (status counts, the allocated NodePort).

Pure data: no cluster, no I/O, used by the unit, integration and e2e suites and by tests/support/bad_input.py.
"""

from __future__ import annotations

from typing import Any

from webserver_operator.api.models import API_VERSION, WebServer

Obj = dict[str, Any]

IMAGE = "nginx:1.27"
NAME = "web"
NAMESPACE = "team-a"
_UNSET: Any = object()


def webserver(
    name: str = NAME,
    *,
    namespace: str | None = None,
    uid: str | None = None,
    generation: int | None = None,
    resource_version: str | None = None,
    metadata: Obj | None = None,
    status: Obj | None = None,
    spec: Any = _UNSET,
    **fields: Any,
) -> Obj:
    """A WebServer.

    The spec is ``{"image": "nginx:1.27", "replicas": 2}`` updated with ``fields`` (a field given as None is left
    out, so ``replicas=None`` leaves it to the CRD's default), unless ``spec`` is given: then exactly that spec, and
    none at all for ``spec=None`` (the bad-input table's rows). ``metadata`` adds to the name and the stored fields.
    """
    meta: Obj = {"name": name}
    for key, value in (
        ("namespace", namespace),
        ("uid", uid),
        ("generation", generation),
        ("resourceVersion", resource_version),
    ):
        if value is not None:
            meta[key] = value
    body: Obj = {"apiVersion": API_VERSION, "kind": "WebServer", "metadata": {**meta, **(metadata or {})}}
    if spec is _UNSET:
        merged = {"image": IMAGE, "replicas": 2, **fields}
        body["spec"] = {key: value for key, value in merged.items() if value is not None}
    elif spec is not None:
        body["spec"] = spec
    if status is not None:
        body["status"] = status
    return body


def webserver_model(
    name: str = NAME,
    *,
    namespace: str = NAMESPACE,
    uid: str = "uid-1",
    generation: int = 1,
    status: Obj | None = None,
    **fields: Any,
) -> WebServer:
    """The stored WebServer (namespace, uid and generation set) parsed into the operator's model."""
    obj = webserver(name, namespace=namespace, uid=uid, generation=generation, status=status, **fields)
    return WebServer.model_validate(obj)


def deployment(
    name: str = NAME,
    *,
    generation: int = 5,
    observed: int | None = 5,
    spec_replicas: int = 3,
    replicas: int = 3,
    updated: int = 3,
    available: int = 3,
    ready: int = 3,
    conditions: list[Obj] | None = None,
    omit_zero: bool = True,
) -> Obj:
    """A child Deployment with the status the deployment controller reports.

    Three of three pods by default. Zero counts and empty conditions are left out as the API server does
    (``omit_zero=False`` keeps them), and so is ``observedGeneration`` when ``observed`` is None.
    """
    status: Obj = {
        "replicas": replicas,
        "updatedReplicas": updated,
        "availableReplicas": available,
        "readyReplicas": ready,
    }
    if conditions is not None or omit_zero:
        status["conditions"] = conditions or []
    if observed is not None:
        status = {"observedGeneration": observed, **status}
    if omit_zero:
        status = {key: value for key, value in status.items() if value}
    return {
        "metadata": {"name": name, "generation": generation},
        "spec": {"replicas": spec_replicas},
        "status": status,
    }


def service(node_port: int | None = 31234, *, name: str = NAME, port: int = 80) -> Obj:
    """A child NodePort Service as stored, ``node_port`` allocated (None: not yet)."""
    entry: Obj = {"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}
    if node_port is not None:
        entry["nodePort"] = node_port
    return {"metadata": {"name": name}, "spec": {"type": "NodePort", "ports": [entry]}}


def lease_spec(holder: str, **extra: Any) -> Obj:
    """The spec of a Lease held by ``holder`` (renewed a second before 10:00 on 2026-11-22), updated with ``extra``."""
    spec: Obj = {
        "holderIdentity": holder,
        "leaseDurationSeconds": 15,
        "acquireTime": "2026-11-22T09:00:00.000000Z",
        "renewTime": "2026-11-22T09:59:59.000000Z",
        "leaseTransitions": 3,
    }
    spec.update(extra)
    return spec
