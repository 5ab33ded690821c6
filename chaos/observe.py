"""What ``kubectl get`` would show: convergence of every WebServer, duplicate children, foreign objects, recovery times.

Why the contract is spelled out here rather than imported from the operator's builders: the harness checks the
operator from the user's side (README "What the operator creates"): a Deployment and a NodePort Service named like
the WebServer, controlled by it, running ``spec.image`` with ``spec.replicas`` pods, container ``web`` with port
``http`` = ``spec.port``, the Service selecting the pods and keeping ``spec.nodePort`` when one is asked for, and the
status saying ``observedGeneration == generation`` with Ready=True. Converged also means at rest: the Deployment's own
status has caught up with its spec (its pods counted, none left over from a scale-down) and the WebServer's
``replicas``/``readyReplicas`` say what the Deployment's status says. Until then the operator still has a status
write to make, which the "0 writes once converged" rule would otherwise count against it. Importing the builders
would make a builder bug invisible.

Recovery after a fault, two figures:
- *canary*: right after the fault is healed the harness changes a WebServer nobody else touches; the time until its
  Deployment has the new replicas and its status has observed the new generation;
- *backlog*: the WebServers' generations at heal time are noted; the time until every one of them (still existing)
  has a status that observed at least that generation, i.e. every spec change made before or during the fault is
  acted on.

Used by ``scenario`` and ``faults``.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from harness.kubeapi import APPS, CORE, WEBSERVERS, ApiError, KubeApi, deployment_path, ws_path
from harness.selects import selects_the_pods

Key = tuple[str, str]
MANAGED_BY = "app.kubernetes.io/managed-by"


def _key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return str(meta["namespace"]), str(meta["name"])


def controller(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def ready(ws: dict[str, Any]) -> dict[str, Any] | None:
    for cond in (ws.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return dict(cond)
    return None


@dataclass
class ClusterState:
    webservers: dict[Key, dict[str, Any]]
    deployments: dict[Key, dict[str, Any]]
    services: dict[Key, dict[str, Any]]


async def read_state(api: KubeApi, *, run_label: str, namespaces: set[str]) -> ClusterState:
    ws, deps, svcs = await asyncio.gather(
        api.items(f"{WEBSERVERS}/webservers", labelSelector=run_label),
        api.items(f"{APPS}/deployments"),
        api.items(f"{CORE}/services"),
    )
    return ClusterState(
        webservers={_key(o): o for o in ws},
        deployments={_key(o): o for o in deps if o["metadata"]["namespace"] in namespaces},
        services={_key(o): o for o in svcs if o["metadata"]["namespace"] in namespaces},
    )


def mismatch(ws: dict[str, Any], deploy: dict[str, Any] | None, svc: dict[str, Any] | None) -> str | None:
    """Why ``ws`` is not converged (None when it is), as a user reading ``kubectl get`` would put it."""
    meta, spec, status = ws["metadata"], ws["spec"], ws.get("status") or {}
    name, uid = meta["name"], meta["uid"]
    replicas, port, image = spec.get("replicas", 1), spec.get("port", 80), spec["image"]
    if status.get("observedGeneration") != meta.get("generation"):
        return f"status.observedGeneration {status.get('observedGeneration')} != generation {meta.get('generation')}"
    if deploy is None:
        return "Deployment missing"
    if (controller(deploy) or {}).get("uid") != uid:
        return f"Deployment controlled by {controller(deploy)}"
    if deploy["spec"].get("replicas") != replicas:
        return f"Deployment replicas {deploy['spec'].get('replicas')} != spec.replicas {replicas}"
    containers = deploy["spec"]["template"]["spec"]["containers"]
    web = next((c for c in containers if c["name"] == "web"), None)
    if web is None or web.get("image") != image:
        return f"Deployment image {web and web.get('image')} != spec.image {image}"
    if [p.get("containerPort") for p in web.get("ports") or []] != [port]:
        return f"container ports {web.get('ports')} != spec.port {port}"
    if svc is None:
        return "Service missing"
    if (controller(svc) or {}).get("uid") != uid:
        return f"Service controlled by {controller(svc)}"
    ports = svc["spec"].get("ports") or []
    if [p.get("port") for p in ports] != [port]:
        return f"Service ports {[p.get('port') for p in ports]} != spec.port {port}"
    if spec.get("nodePort") is not None and ports[0].get("nodePort") != spec["nodePort"]:
        return f"Service nodePort {ports[0].get('nodePort')} != spec.nodePort {spec['nodePort']}"
    pods = {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": name}
    if not selects_the_pods(svc["spec"].get("selector") or {}, pods, deploy):
        return f"Service selector {svc['spec'].get('selector')}"
    cond = ready(ws)
    if cond is None or cond.get("status") != "True":
        return (
            f"Ready={cond and cond.get('status')} ({cond and cond.get('reason')}: {cond and cond.get('message')}); "
            f"{deployment_says(deploy)}"
        )
    return _not_at_rest(status, deploy, replicas)


def deployment_says(deploy: dict[str, Any]) -> str:
    """The Deployment's own status, next to a WebServer that is not Ready: whose side a stuck rollout is on.

    A WebServer whose status lags a settled Deployment is the operator's miss; a Deployment that has not settled
    either (an old pod still counted, a generation not observed) is the control plane's.
    """
    status = deploy.get("status") or {}
    counts = ", ".join(
        f"{name} {int(status.get(name) or 0)}"
        for name in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    )
    return (
        f"the Deployment says generation {deploy['metadata'].get('generation')}, "
        f"observedGeneration {status.get('observedGeneration')}, spec.replicas {deploy['spec'].get('replicas')}, "
        f"{counts}, resourceVersion {deploy['metadata'].get('resourceVersion')}"
    )


def _not_at_rest(status: dict[str, Any], deploy: dict[str, Any], replicas: int) -> str | None:
    """Why a Ready WebServer's numbers may still move (None once the Deployment settled and the status says so)."""
    deploy_status = deploy.get("status") or {}
    if (deploy_status.get("observedGeneration") or 0) < (deploy["metadata"].get("generation") or 0):
        return "Deployment status has not observed its generation yet"
    counted = int(deploy_status.get("replicas") or 0)
    if counted != replicas:
        return f"Deployment status.replicas {counted} != spec.replicas {replicas} (pods still coming or going)"
    for field_name in ("replicas", "readyReplicas"):
        shown, actual = int(status.get(field_name) or 0), int(deploy_status.get(field_name) or 0)
        if shown != actual:
            return f"status.{field_name} {shown} != the Deployment's {actual}"
    return None


def unconverged(state: ClusterState, *, skip: set[Key] = frozenset()) -> dict[Key, str]:  # type: ignore[assignment]
    found = {}
    for key, ws in state.webservers.items():
        if key in skip:
            continue
        why = mismatch(ws, state.deployments.get(key), state.services.get(key))
        if why:
            found[key] = why
    return found


def duplicates(state: ClusterState) -> list[str]:
    """Children that should not exist: two of a kind for one WebServer, or misnamed ones."""
    problems = []
    for kind, objs in (("Deployment", state.deployments), ("Service", state.services)):
        by_owner: dict[str, list[Key]] = defaultdict(list)
        for key, obj in objs.items():
            ref = controller(obj)
            if ref is None or ref.get("kind") != "WebServer":
                continue
            by_owner[str(ref.get("uid"))].append(key)
            if ref.get("name") != key[1]:
                problems.append(f"{kind} {key[0]}/{key[1]} is controlled by WebServer {ref.get('name')}")
        for uid, keys in by_owner.items():
            if len(keys) > 1:
                problems.append(f"{len(keys)} {kind}s controlled by WebServer uid {uid}: {sorted(keys)}")
    return problems


@dataclass(frozen=True)
class Leftover:
    """A child whose controlling WebServer no longer exists (the garbage collector has yet to remove it)."""

    kind: str
    namespace: str
    name: str

    @property
    def resource(self) -> str:
        return "deployments" if self.kind == "Deployment" else "services"

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def leftovers(state: ClusterState) -> list[Leftover]:
    uids = {ws["metadata"]["uid"] for ws in state.webservers.values()}
    found = []
    for kind, objs in (("Deployment", state.deployments), ("Service", state.services)):
        for key, obj in objs.items():
            ref = controller(obj)
            if ref is not None and ref.get("kind") == "WebServer" and ref.get("uid") not in uids:
                found.append(Leftover(kind, key[0], key[1]))
    return found


@dataclass
class Foreign:
    """An object planted by the harness that the operator must never adopt or modify."""

    path: str
    uid: str = ""
    planted: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def _owned_view(obj: dict[str, Any]) -> dict[str, Any]:
        """What an adopting or repairing operator would change (status and resourceVersion move on their own)."""
        meta = obj["metadata"]
        return {
            "ownerReferences": meta.get("ownerReferences") or [],
            "labels": meta.get("labels") or {},
            "annotations": {k: v for k, v in (meta.get("annotations") or {}).items() if "revision" not in k},
            "spec": obj.get("spec") or {},
        }

    @property
    def resource(self) -> str:
        return self.path.split("/")[-2]

    @property
    def namespace(self) -> str:
        return self.path.split("/")[-3]

    @property
    def name(self) -> str:
        return self.path.split("/")[-1]

    async def plant(self, api: KubeApi, body: dict[str, Any]) -> None:
        obj = await api.create(self.path.rsplit("/", 1)[0], body)
        self.uid = obj["metadata"]["uid"]
        self.planted = self._owned_view(obj)

    async def verdict(self, api: KubeApi) -> str | None:
        """None when untouched; otherwise what changed."""
        obj = await api.get_or_none(self.path)
        if obj is None:
            return f"{self.path}: deleted"
        if obj["metadata"]["uid"] != self.uid:
            return f"{self.path}: replaced (uid {obj['metadata']['uid']})"
        now = self._owned_view(obj)
        changed = [k for k in now if now[k] != self.planted[k]]
        if changed:
            return f"{self.path}: {', '.join(changed)} changed (ownerReferences now {now['ownerReferences']})"
        return None


async def _poll(probe: Any, *, deadline: float, interval: float) -> bool:
    while time.time() < deadline:
        try:
            if await probe():
                return True
        except ApiError:
            pass
        await asyncio.sleep(interval)
    return False


async def canary_recovery(api: KubeApi, namespace: str, name: str, *, healed: float, cap: float) -> float | None:
    """Seconds from ``healed`` (epoch) until a fresh change to the canary WebServer is applied and observed."""
    deadline = healed + cap
    target: dict[str, int] = {}

    async def write() -> bool:
        ws = await api.get(ws_path(namespace, name))
        replicas = 2 if ws["spec"].get("replicas", 1) == 1 else 1
        done = await api.merge_patch(ws_path(namespace, name), {"spec": {"replicas": replicas}})
        target.update(replicas=replicas, generation=int(done["metadata"]["generation"]))
        return True

    async def applied() -> bool:
        deploy, ws = await asyncio.gather(api.get(deployment_path(namespace, name)), api.get(ws_path(namespace, name)))
        observed = (ws.get("status") or {}).get("observedGeneration") or 0
        return bool(deploy["spec"].get("replicas") == target["replicas"] and observed >= target["generation"])

    if not await _poll(write, deadline=deadline, interval=0.5):
        return None
    if not await _poll(applied, deadline=deadline, interval=0.25):
        return None
    return time.time() - healed


@dataclass
class Backlog:
    """What ``backlog_recovery`` saw at each look: how many WebServers were behind, and which at the last look.

    For the report: a backlog that does not catch up is explained by who is left (one WebServer waiting for
    something, or many still queued) and by how the count fell (steadily, or stuck at a few).
    """

    counts: list[tuple[float, int]] = field(default_factory=list)  # (seconds after the heal, WebServers behind)
    last: list[str] = field(default_factory=list)  # "namespace/name (observed o of generation g)"

    def trail(self, every: float = 10.0) -> str:
        """The count over time, a look per ``every`` s and the last one: ``42 at +1s, 7 at +11s, 0 at +14s``."""
        shown: list[tuple[float, int]] = []
        for at, count in self.counts:
            if not shown or at - shown[-1][0] >= every:
                shown.append((at, count))
        if self.counts and shown[-1] != self.counts[-1]:
            shown.append(self.counts[-1])
        return ", ".join(f"{count} at +{at:.0f}s" for at, count in shown)


async def backlog_recovery(
    api: KubeApi, *, run_label: str, healed: float, cap: float, seen: Backlog | None = None
) -> float | None:
    """Seconds from ``healed`` until every WebServer's generation at heal time has been observed in its status.

    ``seen`` collects what each look found (``Backlog``).
    """
    deadline = healed + cap
    snapshot: dict[str, int] = {}
    seen = seen if seen is not None else Backlog()

    async def take() -> bool:
        for ws in await api.items(f"{WEBSERVERS}/webservers", labelSelector=run_label):
            snapshot[ws["metadata"]["uid"]] = int(ws["metadata"].get("generation") or 0)
        return True

    async def caught_up() -> bool:
        behind = []
        for ws in await api.items(f"{WEBSERVERS}/webservers", labelSelector=run_label):
            want = snapshot.get(ws["metadata"]["uid"])
            observed = (ws.get("status") or {}).get("observedGeneration") or 0
            if want is not None and observed < want:
                key = _key(ws)
                behind.append(f"{key[0]}/{key[1]} (observed {observed} of generation {want})")
        seen.counts.append((time.time() - healed, len(behind)))
        seen.last = sorted(behind)
        return not behind

    if not await _poll(take, deadline=deadline, interval=0.5):
        return None
    if not await _poll(caught_up, deadline=deadline, interval=1.0):
        return None
    return time.time() - healed
