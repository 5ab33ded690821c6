"""The benchmark's kopf peer: the WebServer job written the way kopf's documentation shows it.

Why this shape: kopf is not a client library and has no "Owns"; its documentation creates children in
``on.create``/``on.update``/``on.resume`` handlers with ``kopf.adopt`` (owner reference, namespace) and any client
(here kubernetes_asyncio, since async handlers run in kopf's own loop), and reaches other objects through in-memory
indexes (``@kopf.index``) from handlers on those objects. So: WebServer handlers ensure the two children; event
handlers on the (label-filtered) children recreate a deleted one, revert drift, and write the WebServer's status.
Everything else is kopf's default (progress and diff-base annotations, Kubernetes Events per handler).

Four workers, as for every operator in the benchmark: kopf runs one lightweight task per object (its
``queueing.worker_limit`` caps those tasks, and each lingers ``idle_timeout``, 5 s, after its object's last event, so
a cap of 4 would mean 4 objects per 5 s, not 4 workers). The peer keeps kopf's default and lets at most 4 handler
bodies run at once (a semaphore), which is what 4 workers are in controller-runtime and in webserver-operator.

The children and status are the same as webserver-operator's (names, labels, selector, owner reference, container,
port; status observedGeneration, replicas, readyReplicas, selector, nodePort, Ready condition), checked by the
benchmark. Run: ``kopf run --standalone --all-namespaces bench/peers/kopf/operator.py`` with KUBECONFIG set.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any, cast

import kopf
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "web.webserver-operator.dev", "v1", "webservers"
MANAGED = {"app.kubernetes.io/managed-by": "webserver-operator"}
CONTAINER, PORT = "web", "http"
WORKERS = 4

Body = dict[str, Any]


def selector_labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": name}


def child_labels(name: str) -> dict[str, str]:
    return {**selector_labels(name), **MANAGED, "app.kubernetes.io/component": "web-server"}


def selector_string(name: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(name).items()))


def desired_deployment(ws: Body) -> Body:
    name, spec = ws["metadata"]["name"], ws.get("spec") or {}
    container: Body = {
        "name": CONTAINER,
        "image": spec["image"],
        "ports": [{"name": PORT, "containerPort": spec.get("port", 80), "protocol": "TCP"}],
    }
    if spec.get("resources"):
        container["resources"] = spec["resources"]
    pod: Body = {"containers": [container]}
    if spec.get("imagePullSecrets"):
        pod["imagePullSecrets"] = spec["imagePullSecrets"]
    deployment: Body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": child_labels(name)},
        "spec": {
            "replicas": spec.get("replicas", 1),
            "selector": {"matchLabels": selector_labels(name)},
            "template": {"metadata": {"labels": child_labels(name)}, "spec": pod},
        },
    }
    kopf.adopt(deployment, owner=kopf.Body(cast(kopf.RawBody, ws)))
    return deployment


def desired_service(ws: Body) -> Body:
    name, spec = ws["metadata"]["name"], ws.get("spec") or {}
    port: Body = {"name": PORT, "port": spec.get("port", 80), "targetPort": PORT, "protocol": "TCP"}
    if spec.get("nodePort"):
        port["nodePort"] = spec["nodePort"]
    service: Body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": child_labels(name)},
        "spec": {"type": "NodePort", "selector": selector_labels(name), "ports": [port]},
    }
    kopf.adopt(service, owner=kopf.Body(cast(kopf.RawBody, ws)))
    return service


def deployment_drift(live: Body, want: Body) -> Body | None:
    """A merge patch putting the owned Deployment fields back, or None when they match."""
    labels = live["metadata"].get("labels") or {}
    spec = live.get("spec") or {}
    template = spec.get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or []
    web: Body = next((c for c in containers if c.get("name") == CONTAINER), {})
    want_web = want["spec"]["template"]["spec"]["containers"][0]
    same = (
        all(labels.get(k) == v for k, v in want["metadata"]["labels"].items())
        and spec.get("replicas") == want["spec"]["replicas"]
        and all(
            ((template.get("metadata") or {}).get("labels") or {}).get(k) == v
            for k, v in want["spec"]["template"]["metadata"]["labels"].items()
        )
        and web.get("image") == want_web["image"]
        and [(p.get("name"), p.get("containerPort"), p.get("protocol", "TCP")) for p in web.get("ports") or []]
        == [(p["name"], p["containerPort"], p["protocol"]) for p in want_web["ports"]]
    )
    if same:
        return None
    others = [c for c in containers if c.get("name") != CONTAINER]
    return {
        "metadata": {"labels": want["metadata"]["labels"], "resourceVersion": live["metadata"]["resourceVersion"]},
        "spec": {
            "replicas": want["spec"]["replicas"],
            "template": {
                "metadata": {"labels": want["spec"]["template"]["metadata"]["labels"]},
                "spec": {"containers": [{**web, **want_web}, *others]},
            },
        },
    }


def service_drift(live: Body, want: Body) -> Body | None:
    """A merge patch putting the owned Service fields back (keeping an allocated nodePort), or None."""
    labels = live["metadata"].get("labels") or {}
    spec = live.get("spec") or {}
    ports = spec.get("ports") or []
    want_port = dict(want["spec"]["ports"][0])
    live_port: Body = next((p for p in ports if p.get("name") == PORT), {})
    want_port.setdefault("nodePort", live_port.get("nodePort"))
    same = (
        all(labels.get(k) == v for k, v in want["metadata"]["labels"].items())
        and spec.get("type") == "NodePort"
        and spec.get("selector") == want["spec"]["selector"]
        and len(ports) == 1
        and all(live_port.get(k) == v for k, v in want_port.items() if v is not None)
    )
    if same:
        return None
    return {
        "metadata": {"labels": want["metadata"]["labels"], "resourceVersion": live["metadata"]["resourceVersion"]},
        "spec": {"type": "NodePort", "selector": want["spec"]["selector"], "ports": [want_port]},
    }


def ready_condition(ws: Body, deployment: Body | None, service: Body | None) -> tuple[str, str, str]:
    generation = ws["metadata"].get("generation", 0)
    desired = (ws.get("spec") or {}).get("replicas", 1)
    if deployment is None or service is None:
        return "False", "Creating", f"Creating the Deployment and Service {ws['metadata']['name']}."
    if deployment_drift(deployment, desired_deployment(ws)) is not None:
        # The indexed Deployment predates the latest spec (its update is on its way): not Ready yet.
        return "False", "RollingOut", f"Updating Deployment {ws['metadata']['name']} to generation {generation}."
    st = deployment.get("status") or {}
    if st.get("observedGeneration", 0) < deployment["metadata"].get("generation", 0):
        return "False", "RollingOut", f"Waiting for the Deployment controller (WebServer generation {generation})."
    replicas, updated = st.get("replicas", 0), st.get("updatedReplicas", 0)
    available = st.get("availableReplicas", 0)
    if replicas > updated:
        return "False", "RollingOut", f"Rolling out: {updated}/{desired} pods updated."
    if not (updated == available == replicas == desired):
        return "False", "Scaling", f"{available}/{desired} pods available."
    return "True", "Available", f"{available}/{desired} pods available."


def compute_status(ws: Body, deployment: Body | None, service: Body | None) -> Body:
    old = ws.get("status") or {}
    generation = ws["metadata"].get("generation", 0)
    st = (deployment or {}).get("status") or {}
    status: Body = {
        "observedGeneration": generation,
        "replicas": st.get("replicas", 0),
        "readyReplicas": st.get("readyReplicas", 0),
        "selector": selector_string(ws["metadata"]["name"]),
    }
    for port in ((service or {}).get("spec") or {}).get("ports") or []:
        if port.get("name") == PORT and port.get("nodePort"):
            status["nodePort"] = port["nodePort"]
    verdict, reason, message = ready_condition(ws, deployment, service)
    previous = next((c for c in old.get("conditions") or [] if c.get("type") == "Ready"), None)
    transition = (
        previous["lastTransitionTime"]
        if previous is not None and previous.get("status") == verdict
        else datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    status["conditions"] = [
        {
            "type": "Ready",
            "status": verdict,
            "observedGeneration": generation,
            "lastTransitionTime": transition,
            "reason": reason,
            "message": message,
        }
    ]
    return status


# --- kopf wiring ---------------------------------------------------------------------------------------------------


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    await config.load_kube_config()
    api = client.ApiClient()
    api.user_agent = "webserver-peer-kopf"
    memo.api = api
    memo.slots = asyncio.Semaphore(WORKERS)
    memo.locks = {}
    memo.written = {}


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    await memo.api.close()


@kopf.index(GROUP, VERSION, PLURAL)
def webservers(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[tuple[str, str], Body]:
    return {(namespace or "", name): {k: body.get(k) for k in ("apiVersion", "kind", "metadata", "spec", "status")}}


@kopf.index("apps", "v1", "deployments", labels=MANAGED)
def deployments(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[tuple[str, str], Body]:
    return {
        (namespace or "", name): {
            "metadata": dict(body["metadata"]),
            "spec": dict(body["spec"]),
            "status": dict(body.get("status") or {}),
        }
    }


@kopf.index("", "v1", "services", labels=MANAGED)
def services(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[tuple[str, str], Body]:
    return {(namespace or "", name): {"metadata": dict(body["metadata"]), "spec": dict(body["spec"])}}


def _one(index: kopf.Index[Any, Any], key: tuple[str, str]) -> Body | None:
    for value in index.get(key, []):
        return dict(value)
    return None


async def _create(memo: kopf.Memo, namespace: str, obj: Body) -> None:
    try:
        if obj["kind"] == "Deployment":
            # The client serialises plain dicts; its stubs only name the model classes.
            await client.AppsV1Api(memo.api).create_namespaced_deployment(namespace, obj)  # type: ignore[arg-type]
        else:
            await client.CoreV1Api(memo.api).create_namespaced_service(namespace, obj)  # type: ignore[arg-type]
    except ApiException as err:
        if err.status != 409:
            raise


async def _patch(memo: kopf.Memo, namespace: str, kind: str, name: str, patch: Body) -> None:
    """A strategic merge patch (the client's default for a dict body): containers merge by name."""
    if kind == "Deployment":
        await client.AppsV1Api(memo.api).patch_namespaced_deployment(name, namespace, patch)
    else:
        await client.CoreV1Api(memo.api).patch_namespaced_service(name, namespace, patch)


async def ensure_children(
    ws: Body,
    memo: kopf.Memo,
    dep_index: kopf.Index[Any, Any],
    svc_index: kopf.Index[Any, Any],
    kinds: tuple[str, ...] = ("Deployment", "Service"),
) -> None:
    """Create the missing children of ``kinds`` and put drifted owned fields back."""
    namespace, name = ws["metadata"]["namespace"], ws["metadata"]["name"]
    for want, index in ((desired_deployment(ws), dep_index), (desired_service(ws), svc_index)):
        if want["kind"] not in kinds:
            continue
        live = _one(index, (namespace, name))
        if live is None:
            await _create(memo, namespace, want)
            continue
        drift = deployment_drift(live, want) if want["kind"] == "Deployment" else service_drift(live, want)
        if drift is not None:
            await _patch(memo, namespace, want["kind"], name, drift)


async def sync_status(
    *,
    namespace: str,
    name: str,
    memo: kopf.Memo,
    ws_index: kopf.Index[Any, Any],
    dep_index: kopf.Index[Any, Any],
    svc_index: kopf.Index[Any, Any],
) -> None:
    """Write the WebServer's status from the indexed children, one writer per WebServer at a time."""
    lock = memo.locks.setdefault((namespace, name), asyncio.Lock())
    async with lock:
        ws = _one(ws_index, (namespace, name))
        if ws is None:
            return
        status = compute_status(ws, _one(dep_index, (namespace, name)), _one(svc_index, (namespace, name)))
        # The index may not have seen our last write yet: compare with what was written last.
        if status == memo.written.get((namespace, name), ws.get("status") or {}):
            return
        try:
            # Custom objects need an explicit merge-patch content type (the client would pick JSON Patch); the
            # client accepts ``_content_type`` although its stubs do not list it.
            await client.CustomObjectsApi(memo.api).patch_namespaced_custom_object_status(  # type: ignore[call-arg]
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                {"status": status},
                _content_type="application/merge-patch+json",
            )
            memo.written[(namespace, name)] = status
        except ApiException as err:
            if err.status != 404:
                raise


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def reconcile_webserver(
    *,
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    **kwargs: Any,
) -> None:
    # kopf passes each index as a keyword argument named like its function.
    webservers, deployments, services = kwargs["webservers"], kwargs["deployments"], kwargs["services"]
    ws = {k: body.get(k) for k in ("apiVersion", "kind", "metadata", "spec", "status")}
    async with memo.slots:
        await ensure_children(ws, memo, deployments, services)
        await sync_status(
            namespace=namespace or "",
            name=name,
            memo=memo,
            ws_index=webservers,
            dep_index=deployments,
            svc_index=services,
        )


async def _on_child(
    *,
    kind: str,
    event_type: str | None,
    namespace: str,
    name: str,
    memo: kopf.Memo,
    webservers: kopf.Index[Any, Any],
    deployments: kopf.Index[Any, Any],
    services: kopf.Index[Any, Any],
) -> None:
    ws = _one(webservers, (namespace, name))
    if ws is None or ws["metadata"].get("deletionTimestamp"):
        return
    async with memo.slots:
        if event_type in ("DELETED", "MODIFIED", None):  # None: the initial listing
            await ensure_children(ws, memo, deployments, services, kinds=(kind,))
        await sync_status(
            namespace=namespace or "",
            name=name,
            memo=memo,
            ws_index=webservers,
            dep_index=deployments,
            svc_index=services,
        )


@kopf.on.event("apps", "v1", "deployments", labels=MANAGED)
async def deployment_event(
    *,
    type: str | None,  # kopf passes the event type by this name
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    **kwargs: Any,
) -> None:
    await _on_child(
        kind="Deployment",
        event_type=type,
        namespace=namespace or "",
        name=name,
        memo=memo,
        webservers=kwargs["webservers"],
        deployments=kwargs["deployments"],
        services=kwargs["services"],
    )


@kopf.on.event("", "v1", "services", labels=MANAGED)
async def service_event(
    *,
    type: str | None,  # kopf passes the event type by this name
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    **kwargs: Any,
) -> None:
    await _on_child(
        kind="Service",
        event_type=type,
        namespace=namespace or "",
        name=name,
        memo=memo,
        webservers=kwargs["webservers"],
        deployments=kwargs["deployments"],
        services=kwargs["services"],
    )
