"""The churn: WebServers created, scaled (spec and ``kubectl scale``), re-imaged, deleted, and their children drifted.

Why this mix: each operation exercises a different path of the operator under faults. Spec changes must never be
lost (generation bumps the operator has to observe), ``kubectl scale`` goes through the scale subresource, deletes
followed by quick re-creates race the garbage collector, and drift on the children (a Deployment scaled by hand, its
image changed, a Service selector edited, a child deleted) must be repaired without a spec change to wake anything
but the child's own watch. Annotating a WebServer changes nothing the operator owns: it must cost no write.

Drift stays below what the operator reports as a fight: it calls ``FIGHT_REPAIRS`` repairs of one child within
``FIGHT_WINDOW`` seconds another controller fighting it (Ready=False, ``FightingAnotherController``, for the rest of
the window: docs/status.md), which is the truth about such a writer but not what a chaos run is judging. With few
WebServers (the sharded preset's 64) random drift reached that on some child in about one run in three. So a child
is drifted at most ``FIGHT_REPAIRS - 1`` times per window; the slot then gets another operation.

A WebServer that asks for a fixed ``nodePort`` is never deleted, nor is its Service. The API server releases a deleted
Service's node port in a second write after the delete; cut between the two (an etcd freeze, an API server restart) the
port stays allocated with no Service holding it. Its repair loop frees such a port only after three rounds three minutes
apart (Kubernetes ``portallocator/controller/repair.go``, ``numRepairsBeforeLeakCleanup``; ``repairLoopInterval`` in
``pkg/controlplane/instance.go``, no flag). Until then every re-create of the Service is refused with 422 "provided port
is already allocated", which the operator reports and rechecks, but no run waits that long, and the short run failed on
it once (``ws-005: Service missing``). The other nine in ten WebServers carry the delete and re-create races; these
still carry the scale, image and drift ones, and the check that the Service keeps its ``nodePort``.

Operations run at a fixed rate from one loop, each as its own task with a timeout, so a frozen API server slows
nothing down and every failure is counted (by operation and HTTP status) instead of stopping the churn. One slot is
never touched by two operations at once. The harness writes as the cluster admin, outside the audited group, so its
own requests never count against the operator.

Used by ``scenario`` (continuous churn, bulk creates) and ``faults`` (write bursts during a watch gap).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.kubeapi import API_VERSION_WS, ApiError, KubeApi, deployment_path, service_path, ws_path

RUN_LABEL = "chaos.webserver-operator.dev/run"
IMAGES = ("nginx:1.27", "nginx:1.27.1", "nginx:1.27.2", "nginx:1.28", "registry.example.com/web/nginx:2.0")
OP_TIMEOUT = 5.0
#: The operator's fight rule (reconcile/fights.py, docs/status.md), restated: the harness does not import the operator.
FIGHT_REPAIRS = 4
FIGHT_WINDOW = 600.0
#: Operations after which the API server may hold a fixed node port with no Service (the module docstring).
RELEASES_NODE_PORT = frozenset({"delete", "delete-service"})
#: Which child each drift operation changes.
DRIFTED_CHILD = {
    "drift-deployment-replicas": "Deployment",
    "drift-deployment-image": "Deployment",
    "drift-service-selector": "Service",
}


@dataclass
class Slot:
    """A WebServer name the churn owns; ``exists`` is what the harness last made true."""

    namespace: str
    name: str
    node_port: int | None = None
    exists: bool = False
    busy: bool = False


@dataclass
class Churn:
    api: KubeApi
    kubectl: list[str]  # kubectl argv prefix with --kubeconfig
    slots: list[Slot]
    run_id: str
    rate: float
    rng: random.Random
    counts: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    clock: Callable[[], float] = time.monotonic
    _inflight: set[asyncio.Task[None]] = field(default_factory=set)
    _drifts: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)

    # -- manifests ----------------------------------------------------------------------------------------------------

    def manifest(self, slot: Slot) -> dict[str, Any]:
        spec: dict[str, Any] = {"image": self.rng.choice(IMAGES), "replicas": self.rng.randint(0, 3)}
        if self.rng.random() < 0.2:
            spec["port"] = 8080
        if slot.node_port is not None:
            spec["nodePort"] = slot.node_port
        return {
            "apiVersion": API_VERSION_WS,
            "kind": "WebServer",
            "metadata": {"name": slot.name, "labels": {RUN_LABEL: self.run_id}},
            "spec": spec,
        }

    # -- operations ---------------------------------------------------------------------------------------------------

    async def create(self, slot: Slot) -> None:
        try:
            await self.api.create(ws_path(slot.namespace), self.manifest(slot))
        except ApiError as err:
            if err.status != 409:
                raise
        slot.exists = True

    async def _scale_spec(self, slot: Slot) -> None:
        await self.api.merge_patch(ws_path(slot.namespace, slot.name), {"spec": {"replicas": self.rng.randint(0, 3)}})

    async def _scale_kubectl(self, slot: Slot) -> None:
        replicas = self.rng.randint(0, 3)
        proc = await asyncio.create_subprocess_exec(
            *self.kubectl,
            "scale",
            f"webserver/{slot.name}",
            "-n",
            slot.namespace,
            f"--replicas={replicas}",
            "--request-timeout=5s",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise ApiError(0, f"kubectl scale: {err.decode().strip()[:200]}")

    async def _image(self, slot: Slot) -> None:
        await self.api.merge_patch(ws_path(slot.namespace, slot.name), {"spec": {"image": self.rng.choice(IMAGES)}})

    async def _port(self, slot: Slot) -> None:
        port = self.rng.choice((80, 8080))
        await self.api.merge_patch(ws_path(slot.namespace, slot.name), {"spec": {"port": port}})

    async def _annotate(self, slot: Slot) -> None:
        note = {"chaos.webserver-operator.dev/touched": str(time.time())}
        await self.api.merge_patch(ws_path(slot.namespace, slot.name), {"metadata": {"annotations": note}})

    async def delete(self, slot: Slot) -> None:
        await self.api.delete(ws_path(slot.namespace, slot.name))
        slot.exists = False

    async def _drift_replicas(self, slot: Slot) -> None:
        await self.api.merge_patch(deployment_path(slot.namespace, slot.name), {"spec": {"replicas": 7}})

    async def _drift_image(self, slot: Slot) -> None:
        patch = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "busybox:drift"}]}}}}
        await self.api.request(
            "PATCH",
            deployment_path(slot.namespace, slot.name),
            body=patch,
            content_type="application/strategic-merge-patch+json",
        )

    async def _drift_selector(self, slot: Slot) -> None:
        patch = {"spec": {"selector": {"app.kubernetes.io/instance": "drifted"}}}
        await self.api.merge_patch(service_path(slot.namespace, slot.name), patch)

    async def _delete_deployment(self, slot: Slot) -> None:
        await self.api.delete(deployment_path(slot.namespace, slot.name))

    async def _delete_service(self, slot: Slot) -> None:
        await self.api.delete(service_path(slot.namespace, slot.name))

    def _operations(self) -> list[tuple[str, int, Callable[[Slot], Any]]]:
        return [
            ("scale-spec", 22, self._scale_spec),
            ("scale-kubectl", 8, self._scale_kubectl),
            ("image", 18, self._image),
            ("port", 4, self._port),
            ("annotate", 4, self._annotate),
            ("delete", 6, self.delete),
            ("drift-deployment-replicas", 12, self._drift_replicas),
            ("drift-deployment-image", 8, self._drift_image),
            ("drift-service-selector", 6, self._drift_selector),
            ("delete-deployment", 6, self._delete_deployment),
            ("delete-service", 6, self._delete_service),
        ]

    def pick(self, slot: Slot) -> tuple[str, Callable[[Slot], Any]]:
        """The next operation on ``slot``, recorded if it drifts a child.

        A create if the slot's WebServer does not exist, else a weighted random operation, leaving out drift of a
        child already drifted ``FIGHT_REPAIRS - 1`` times within ``FIGHT_WINDOW``, and the deletes of a WebServer that
        asks for a fixed node port.
        """
        if not slot.exists:
            return "create", self.create
        now = self.clock()
        ops = [
            (name, weight, op)
            for name, weight, op in self._operations()
            if (name not in DRIFTED_CHILD or self._recent_drifts(slot, DRIFTED_CHILD[name], now) < FIGHT_REPAIRS - 1)
            and not (slot.node_port is not None and name in RELEASES_NODE_PORT)
        ]
        name, _, op = self.rng.choices(ops, weights=[w for _, w, _ in ops])[0]
        if name in DRIFTED_CHILD:
            self._drifts.setdefault((slot.namespace, slot.name, DRIFTED_CHILD[name]), []).append(now)
        return name, op

    def _recent_drifts(self, slot: Slot, kind: str, now: float) -> int:
        times = self._drifts.get((slot.namespace, slot.name, kind), [])
        times[:] = [t for t in times if now - t < FIGHT_WINDOW]
        return len(times)

    async def _one(self, slot: Slot) -> None:
        name, op = self.pick(slot)
        try:
            await asyncio.wait_for(op(slot), OP_TIMEOUT)
            self.counts[name] += 1
        except (ApiError, TimeoutError) as err:
            status = err.status if isinstance(err, ApiError) else 0
            self.failures[f"{name} ({status or 'no answer'})"] += 1
            if name == "delete" and status == 0:
                slot.exists = True  # unknown outcome: a later create (409) or delete settles it
        finally:
            slot.busy = False

    async def run(self, stop: asyncio.Event) -> None:
        """Start one operation every 1/rate seconds on a random idle slot until ``stop`` is set."""
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not stop.is_set():
            idle = [s for s in self.slots if not s.busy]
            if idle and len(self._inflight) < 32:
                slot = self.rng.choice(idle)
                slot.busy = True
                task = asyncio.create_task(self._one(slot))
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)
            else:
                self.counts["skipped (32 operations in flight)"] += 1
            next_at += interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.monotonic()))
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)

    async def bulk_create(self, slots: list[Slot], *, concurrency: int = 8) -> float:
        """Create ``slots`` as fast as ``concurrency`` allows (retrying failures); returns the seconds it took."""
        start = time.monotonic()
        sem = asyncio.Semaphore(concurrency)

        async def one(slot: Slot) -> None:
            async with sem:
                for _ in range(60):
                    try:
                        await asyncio.wait_for(self.create(slot), OP_TIMEOUT)
                        return
                    except (ApiError, TimeoutError):
                        await asyncio.sleep(1.0)
                raise RuntimeError(f"could not create WebServer {slot.namespace}/{slot.name} for a minute")

        await asyncio.gather(*(one(s) for s in slots))
        return time.monotonic() - start

    async def burst(self, count: int) -> int:
        """``count`` spec changes on random existing slots at once (a write burst); returns how many succeeded."""
        existing = [s for s in self.slots if s.exists]
        chosen = self.rng.sample(existing, min(count, len(existing)))

        async def one(slot: Slot) -> bool:
            try:
                await asyncio.wait_for(self._scale_spec(slot), OP_TIMEOUT)
                return True
            except (ApiError, TimeoutError):
                return False

        results = await asyncio.gather(*(one(s) for s in chosen))
        return sum(results)


def kubectl_argv(kubectl: Path, kubeconfig: Path) -> list[str]:
    return [str(kubectl), "--kubeconfig", str(kubeconfig)]
