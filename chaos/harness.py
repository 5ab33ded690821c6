"""One chaos run's world: the cluster, the proxies, the audited replicas, the churn, and how to measure a window.

Why one object: every fault needs the same handles (the control plane's processes, the proxy of each replica, which
replica leads now, the churn to write bursts with) and every window is measured the same way afterwards. The
sequence of faults lives in ``scenario``; what each fault does lives in ``faults``.

Setup, in order: the CRD_FILE; the run's namespaces; the audited ServiceAccounts with the project's RBAC and their
tokens; a toxiproxy proxy per replica; foreign objects the operator must leave alone (a Deployment and a Service
that merely share a WebServer's name, and a Deployment carrying the operator's labels but controlled by something
else), each with its namesake WebServer; a canary WebServer nobody else touches; the replicas; then the WebServers.
Teardown stops the replicas and the proxy and deletes what the run created (the namespaces, RBAC, APF objects).

Sharded runs (``RunConfig.shards`` > 1, the ``sharded`` preset of ``scenario``): the replica slots are
``RunConfig.slots`` plus ``spare_slots`` (ServiceAccount, token and proxy made at setup, the process started only when
a fault scales up: ``start_spare``); ``retire`` stops a slot for good (SIGTERM, no restart). The namespaces get random
names spread evenly over the shards (``shards.spread_namespaces``), and "calm" means every shard held by one live
replica with shares within one (``settled``) instead of "a leader elected".
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from chaos import identity, shards
from chaos.controlplane import ControlPlane
from chaos.identity import AUDITED_NAMESPACE, ServiceAccountDir, Token
from chaos.observe import (
    Backlog,
    Foreign,
    backlog_recovery,
    canary_recovery,
    duplicates,
    leftovers,
    read_state,
    unconverged,
)
from chaos.replica import Replica, ReplicaConfig
from chaos.shardverdicts import LeaseView, ownership, shard_lease
from chaos.toxiproxy import Toxiproxy
from chaos.toxiserver import ToxiproxyServer
from chaos.verdicts import Window
from chaos.workload import RUN_LABEL, Churn, Slot, kubectl_argv
from harness.audit import AuditLog
from harness.kubeapi import Endpoint, KubeApi, deployment_path, service_path, ws_path
from harness.paths import CRD_FILE

SLOTS = ("op-a", "op-b")
CANARY = "canary"
FOREIGN_NAMES = ("foreign-deployment", "foreign-service", "foreign-controlled")


async def _nothing() -> None:
    return None


def other_slot(slot: str) -> str:
    """The other replica's slot."""
    return next(s for s in SLOTS if s != slot)


@dataclass
class RunConfig:
    """Sizes and timings of one run; ``scenario`` has the full and the short presets."""

    name: str
    webservers: int
    namespaces: int
    rate: float
    faults: list[str]
    watch_all: bool  # operators watch all namespaces (dedicated cluster) or only the run's
    in_cluster: bool  # operators use the in-cluster configuration (token rotation needs it)
    baseline: float = 30.0
    cap: float = 60.0
    converge_timeout: float = 180.0
    quiet_window: float = 30.0
    lease_duration: float = 10.0
    renew_deadline: float = 7.0
    retry_period: float = 1.5
    watch_timeout: int = 10
    watch_stall_timeout: float = 15.0
    etcd_freeze: float = 10.0
    seed: int = 1
    operator_source: Path | None = None  # another checkout's webserver_operator (e.g. to compare two versions)
    slots: tuple[str, ...] = SLOTS  # the replica slots started at setup
    spare_slots: tuple[str, ...] = ()  # slots prepared at setup, started by a fault (``Harness.start_spare``)
    shards: int = 1  # --shards: above 1 there is no leader, each replica holds its share of the shard Leases

    @property
    def sharded(self) -> bool:
        return self.shards > 1

    @property
    def all_slots(self) -> tuple[str, ...]:
        return self.slots + self.spare_slots

    def operator_args(self, lease: str, namespaces: list[str]) -> list[str]:
        args = [
            "--log-level=INFO",
            "--leader-elect",
            f"--leader-election-id={lease}",
            f"--leader-election-namespace={AUDITED_NAMESPACE}",
            f"--lease-duration={self.lease_duration}",
            f"--renew-deadline={self.renew_deadline}",
            f"--retry-period={self.retry_period}",
            f"--watch-timeout={self.watch_timeout}",
            f"--watch-stall-timeout={self.watch_stall_timeout}",
        ]
        if self.sharded:
            args.append(f"--shards={self.shards}")
        if not self.watch_all:
            args.append(f"--namespaces={','.join(namespaces)}")
        return args


@dataclass
class Harness:
    cfg: RunConfig
    cluster_dir: Path
    kubeconfig: Path
    bin_dir: Path
    workdir: Path
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    windows: list[Window] = field(default_factory=list)
    replicas: dict[str, Replica] = field(default_factory=dict)
    tokens: dict[str, Token] = field(default_factory=dict)
    sa_dirs: dict[str, ServiceAccountDir] = field(default_factory=dict)
    foreign: list[Foreign] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    bulk_slots: list[Slot] = field(default_factory=list)
    slack_at: list[tuple[float, float, float]] = field(default_factory=list)
    setup_figures: dict[str, str] = field(default_factory=dict)
    retired_incidents: list[Any] = field(default_factory=list)
    spares: dict[str, Replica] = field(default_factory=dict)  # prepared slots not started yet (sharded runs)
    retired: dict[str, Replica] = field(default_factory=dict)  # slots stopped for good by a fault (sharded runs)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.cfg.seed)
        self.prefix = f"chaos-{self.run_id}"
        self.lease = f"{self.prefix}-leader"
        if self.cfg.sharded:
            self.namespaces = shards.spread_namespaces(self.prefix, self.cfg.namespaces, self.cfg.shards, self.rng)
        else:
            self.namespaces = [f"{self.prefix}-{i:02d}" for i in range(self.cfg.namespaces)]
        self.canary_ns = self.namespaces[0]
        self.run_label = f"{RUN_LABEL}={self.run_id}"
        self.cp = ControlPlane(self.cluster_dir, etcdctl=self.bin_dir / "etcdctl")
        self.audit = AuditLog(self.cp.audit_log, users_prefix=identity.username(f"{self.prefix}-"))
        self.endpoint = Endpoint.from_kubeconfig(self.kubeconfig)
        self.api = KubeApi(self.endpoint, user_agent="chaos-harness")
        self.toxiserver: ToxiproxyServer | None = None
        self.churn = Churn(
            api=self.api,
            kubectl=kubectl_argv(self.bin_dir / "kubectl", self.kubeconfig),
            slots=self.slots,
            run_id=self.run_id,
            rate=self.cfg.rate,
            rng=self.rng,
        )
        self.stop_churn = asyncio.Event()
        self.ownership_text = "not read yet"
        self.churn_task: asyncio.Task[None] | None = None

    @property
    def toxi(self) -> Toxiproxy:
        """The toxiproxy client of the run (the proxy of each replica)."""
        if self.toxiserver is None:
            raise RuntimeError("toxiproxy is not running: Harness.setup() starts it before any fault")
        return self.toxiserver.client

    # -- names --------------------------------------------------------------------------------------------------------

    def serviceaccount(self, slot: str) -> str:
        return f"{self.prefix}-{slot}"

    def slot_of_user(self, user: str) -> str:
        return user.rsplit(":", 1)[-1].removeprefix(f"{self.prefix}-")

    def kubectl(self, *args: str, timeout: float = 60) -> str:
        result = subprocess.run(
            [*kubectl_argv(self.bin_dir / "kubectl", self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    # -- setup --------------------------------------------------------------------------------------------------------

    async def setup(self) -> None:
        await self.api.__aenter__()
        started = time.time()
        await asyncio.to_thread(
            self.kubectl, "apply", "--server-side", "--force-conflicts", "--field-manager=chaos", "-f", str(CRD_FILE)
        )
        await asyncio.to_thread(
            self.kubectl, "wait", "--for=condition=Established", "crd/webservers.web.webserver-operator.dev"
        )
        for ns in self.namespaces:
            body = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {RUN_LABEL: self.run_id}},
            }
            await self.api.apply_object("/api/v1/namespaces", body)
        sas = [self.serviceaccount(s) for s in self.cfg.all_slots]
        await identity.grant(
            self.api, prefix=self.prefix, serviceaccounts=sas, lease_name=self.lease, shard_leases=self.cfg.sharded
        )
        self.toxiserver = await ToxiproxyServer.start(log_path=self.workdir / "toxiproxy.log")
        upstream = self.endpoint.server.removeprefix("https://")
        for slot in self.cfg.all_slots:
            port = await self.toxi.add_proxy(slot, upstream)
            token = await identity.issue_token(
                self.api, self.serviceaccount(slot), secret=f"{self.serviceaccount(slot)}-1"
            )
            self.tokens[slot] = token
            config = ReplicaConfig(
                slot=slot,
                serviceaccount=self.serviceaccount(slot),
                proxy_port=port,
                args=self.cfg.operator_args(self.lease, self.namespaces),
                operator_source=self.cfg.operator_source,
            )
            if self.cfg.in_cluster:
                sa_dir = ServiceAccountDir(self.workdir / f"{slot}-serviceaccount")
                sa_dir.populate(token=token.value, ca_file=self.endpoint.require_ca_file())
                self.sa_dirs[slot] = sa_dir
                config.sa_dir = sa_dir
            else:
                config.kubeconfig = identity.write_kubeconfig(
                    self.workdir / f"{slot}.kubeconfig",
                    server=f"https://127.0.0.1:{port}",
                    ca_file=self.endpoint.require_ca_file(),
                    token=token.value,
                )
            (self.replicas if slot in self.cfg.slots else self.spares)[slot] = Replica(config, self.workdir)
        await self._plant_foreign()
        per_ns = max(1, self.cfg.webservers // len(self.namespaces))
        for i in range(self.cfg.webservers):
            ns = self.namespaces[i % len(self.namespaces)]
            # Asked-for nodePorts come from the low band of the range, which the API server keeps for them (it
            # allocates ports for Services that ask for none from the rest first), so no allocated port takes them.
            self.slots.append(Slot(ns, f"ws-{i:03d}", node_port=30000 + i // 10 if i % 10 == 5 else None))
        self.bulk_slots = [Slot(ns, f"bulk-{j:02d}") for j, ns in enumerate(self.namespaces)]
        canary = {
            "apiVersion": "web.webserver-operator.dev/v1",
            "kind": "WebServer",
            "metadata": {"name": CANARY, "labels": {RUN_LABEL: self.run_id}},
            "spec": {"image": "nginx:1.27", "replicas": 1},
        }
        await self.api.create(ws_path(self.canary_ns, ""), canary)
        for replica in self.replicas.values():
            replica.start()
        for replica in self.replicas.values():
            if not await asyncio.to_thread(replica.wait_ready, 60):
                raise RuntimeError(f"replica {replica.slot} not ready within 60s; its logs are in {self.workdir}")
        if self.cfg.sharded:
            await self.wait_settled(60)
        else:
            await self.wait_leader(60)
        self.setup_figures["operators ready (s)"] = f"{time.time() - started:.1f}"
        created = time.time()
        took = await self.churn.bulk_create(self.slots)
        self.setup_figures[f"create {len(self.slots)} WebServers (s)"] = f"{took:.1f}"
        remaining = await self.wait_converged(self.cfg.converge_timeout)
        self.setup_figures["all converged after creation (s)"] = (
            f"{time.time() - created:.1f}" if not remaining else f"not within {self.cfg.converge_timeout:.0f}s"
        )
        if remaining:
            self.setup_figures["not converged after creation"] = "; ".join(
                f"{k[0]}/{k[1]}: {v}" for k, v in sorted(remaining.items())[:5]
            )
        per = f"{per_ns} per namespace in {len(self.namespaces)} namespaces"
        self.setup_figures["WebServers"] = f"{len(self.slots)} ({per}) + canary + {len(FOREIGN_NAMES)} conflicting"

    async def _plant_foreign(self) -> None:
        """Objects that collide with WebServers by name or labels but belong to someone else."""
        ns = [self.namespaces[i % len(self.namespaces)] for i in (1, 2, 3)]
        pod = {
            "metadata": {"labels": {"app": "foreign"}},
            "spec": {"containers": [{"name": "c", "image": "registry.example.com/foreign:1"}]},
        }
        owner_cm = await self.api.apply_object(
            f"/api/v1/namespaces/{ns[2]}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "foreign-owner"}},
        )
        bodies: list[tuple[str, dict[str, Any]]] = [
            (
                deployment_path(ns[0], FOREIGN_NAMES[0]),
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": FOREIGN_NAMES[0]},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "foreign"}}, "template": pod},
                },
            ),
            (
                service_path(ns[1], FOREIGN_NAMES[1]),
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": FOREIGN_NAMES[1]},
                    "spec": {"selector": {"app": "foreign"}, "ports": [{"port": 80}]},
                },
            ),
            (
                deployment_path(ns[2], FOREIGN_NAMES[2]),
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {
                        "name": FOREIGN_NAMES[2],
                        "labels": {
                            "app.kubernetes.io/managed-by": "webserver-operator",
                            "app.kubernetes.io/instance": FOREIGN_NAMES[2],
                            "app.kubernetes.io/name": "webserver",
                        },
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "ConfigMap",
                                "name": "foreign-owner",
                                "uid": owner_cm["metadata"]["uid"],
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "foreign"}}, "template": pod},
                },
            ),
        ]
        for (path, body), namespace in zip(bodies, ns, strict=True):
            foreign = Foreign(path)
            await foreign.plant(self.api, body)
            self.foreign.append(foreign)
            ws = {
                "apiVersion": "web.webserver-operator.dev/v1",
                "kind": "WebServer",
                "metadata": {"name": body["metadata"]["name"], "labels": {RUN_LABEL: self.run_id}},
                "spec": {"image": "nginx:1.27", "replicas": 1},
            }
            await self.api.create(ws_path(namespace), ws)

    def foreign_keys(self) -> set[tuple[str, str]]:
        return {(f.path.split("/")[-3], f.path.split("/")[-1]) for f in self.foreign}

    # -- during the run -----------------------------------------------------------------------------------------------

    def start_churn(self) -> None:
        self.stop_churn.clear()
        self.churn_task = asyncio.create_task(self.churn.run(self.stop_churn))

    async def halt_churn(self) -> None:
        self.stop_churn.set()
        if self.churn_task is not None:
            await self.churn_task

    async def leader(self) -> str | None:
        """The slot whose identity holds the Lease now, per the Lease object."""
        lease = await self.api.get_or_none(
            f"/apis/coordination.k8s.io/v1/namespaces/{AUDITED_NAMESPACE}/leases/{self.lease}"
        )
        holder = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
        slot = holder.split("_", 1)[0]
        return slot if slot in self.replicas else None

    async def leader_now(self) -> str | None:
        """``leader()``, with None when the Lease cannot be read right now (the API may be what the fault broke)."""
        try:
            return await self.leader()
        except Exception:
            return None

    async def wait_leader(self, within: float) -> str | None:
        deadline = time.time() + within
        while time.time() < deadline:
            slot = await self.leader_now()
            if slot is not None and self.replicas[slot].alive():
                return slot
            await asyncio.sleep(0.5)
        return None

    async def leader_before_fault(self, window: Window) -> str:
        """The slot a leader-targeted fault hits: the live leader, or op-a (noted) when none is found within 30s."""
        slot = await self.wait_leader(30)
        if slot is None:
            window.notes.append("no leader found before the fault; op-a taken as the target")
            return SLOTS[0]
        window.extra["leader before the fault"] = slot
        return slot

    async def steady(self) -> list[str]:
        """Before a fault: every component and replica running, a leader elected; returns what had to be fixed.

        Sharded: every shard held by one live replica, shares within one, instead of a leader.
        """
        fixed = [f"{name} restarted" for name in await asyncio.to_thread(self.cp.ensure_running)]
        await self.api_ready(60)
        for replica in self.replicas.values():
            if not await asyncio.to_thread(replica.wait_ready, 60):
                fixed.append(f"{replica.slot} not ready after 60s")
        if self.cfg.sharded:
            if await self.wait_settled(120) is None:
                fixed.append(f"shards not settled after 120s: {self.ownership_text}")
        elif await self.wait_leader(60) is None:
            fixed.append("no leader after 60s")
        return fixed

    # -- shards (sharded runs) ----------------------------------------------------------------------------------------

    async def shard_leases(self) -> list[LeaseView]:
        """The shard Leases as the API server has them now."""
        base = f"/apis/coordination.k8s.io/v1/namespaces/{AUDITED_NAMESPACE}/leases"
        views = []
        for shard in range(self.cfg.shards):
            lease = await self.api.get_or_none(f"{base}/{shard_lease(self.lease, shard)}")
            if lease is None:
                continue
            spec = lease.get("spec") or {}
            renew = spec.get("renewTime")
            duration = spec.get("leaseDurationSeconds")
            views.append(
                LeaseView(
                    shard=shard,
                    holder=str(spec.get("holderIdentity") or ""),
                    renew_time=_epoch(str(renew)) if renew else None,
                    duration=float(duration) if isinstance(duration, int) else None,
                )
            )
        return views

    def live_slots(self) -> set[str]:
        return {slot for slot, replica in self.replicas.items() if replica.alive()}

    async def holders(self) -> dict[str, list[int]]:
        """Which shards each slot holds now, per the Lease objects (unexpired grants only)."""
        now = time.time()
        held: dict[str, list[int]] = {}
        for v in await self.shard_leases():
            if v.holder and v.renew_time is not None and v.duration is not None and v.renew_time + v.duration >= now:
                held.setdefault(v.holder.split("_", 1)[0], []).append(v.shard)
        return held

    async def check_settled(self) -> bool:
        """Whether every shard is held by one live replica and the shares are within one (``ownership_text`` says)."""
        try:
            leases = await self.shard_leases()
        except Exception as err:
            self.ownership_text = f"cannot read the shard Leases: {err}"
            return False
        settled, self.ownership_text = ownership(
            leases, shards=self.cfg.shards, live=self.live_slots(), now=time.time()
        )
        return settled

    async def wait_settled(self, within: float) -> float | None:
        """Seconds until ``check_settled`` holds (polled every 0.5 s), None if not within ``within``."""
        start = time.time()
        while time.time() - start < within:
            if await self.check_settled():
                return time.time() - start
            await asyncio.sleep(0.5)
        return None

    async def start_spare(self, slot: str) -> Replica:
        """Start the prepared slot ``slot`` (a replica added to the fleet)."""
        replica = self.spares.pop(slot)
        self.replicas[slot] = replica
        replica.start()
        return replica

    async def retire(self, slot: str) -> int | None:
        """Stop ``slot`` for good (SIGTERM, drain, no restart); its exit code."""
        replica = self.replicas.pop(slot)
        self.retired[slot] = replica
        return await asyncio.to_thread(replica.stop)

    async def api_ready(self, within: float) -> float:
        """Seconds until the API server answers /readyz."""
        start = time.time()
        while time.time() - start < within:
            try:
                await self.api.request("GET", "/readyz")
                return time.time() - start
            except Exception:
                await asyncio.sleep(0.25)
        raise RuntimeError(f"the API server did not become ready within {within:.0f}s; logs in {self.cluster_dir}/logs")

    async def recover(self, window: Window) -> None:
        """Measure the canary and backlog recovery from ``window.healed``; set ``window.end``."""
        fixed = await asyncio.to_thread(self.cp.ensure_running)
        if fixed:
            window.notes.append(f"control-plane components found dead and restarted: {', '.join(fixed)}")
        seen = Backlog()
        canary, backlog = await asyncio.gather(
            canary_recovery(self.api, self.canary_ns, CANARY, healed=window.healed, cap=window.cap),
            backlog_recovery(self.api, run_label=self.run_label, healed=window.healed, cap=window.cap, seen=seen),
        )
        window.canary, window.backlog = canary, backlog
        if seen.counts:
            window.extra["backlog: WebServers behind their generation at heal time"] = seen.trail()
        if backlog is None and seen.last:
            more = f" and {len(seen.last) - 8} more" if len(seen.last) > 8 else ""
            window.extra["backlog: still behind at the limit"] = "; ".join(seen.last[:8]) + more
        window.end = time.time()

    async def wait_converged(self, within: float) -> dict[tuple[str, str], str]:
        """Poll until every WebServer (not the conflicting ones) is converged and no child is duplicated or left."""
        deadline = time.time() + within
        remaining: dict[tuple[str, str], str] = {("?", "?"): "not read yet"}
        while time.time() < deadline:
            try:
                state = await read_state(self.api, run_label=self.run_label, namespaces=set(self.namespaces))
            except Exception as err:
                remaining = {("?", "?"): f"cannot read the cluster: {err}"}
                await asyncio.sleep(2)
                continue
            remaining = unconverged(state, skip=self.foreign_keys())
            for problem in duplicates(state) + [str(left) for left in leftovers(state)]:
                remaining[("child", problem)] = problem
            if not remaining:
                return {}
            await asyncio.sleep(2)
        return remaining

    def incidents(self) -> list[Any]:
        found = list(self.retired_incidents)
        for replica in [*self.replicas.values(), *self.retired.values()]:
            found.extend(replica.incidents)
        found.sort(key=lambda i: i.time)
        return found

    def replace_replicas(self, args: list[str]) -> dict[str, int | None]:
        """Stop both replicas and start new ones with ``args`` (same ServiceAccounts, proxies, tokens)."""
        codes = {}
        for slot, old in list(self.replicas.items()):
            codes[slot] = old.stop()
            self.retired_incidents.extend(old.incidents)
            config = ReplicaConfig(
                slot=slot,
                serviceaccount=old.config.serviceaccount,
                proxy_port=old.config.proxy_port,
                args=args,
                sa_dir=old.config.sa_dir,
                kubeconfig=old.config.kubeconfig,
                operator_source=old.config.operator_source,
            )
            self.replicas[slot] = Replica(config, self.workdir / f"{slot}-{len(self.retired_incidents)}")
            self.replicas[slot].workdir.mkdir(parents=True, exist_ok=True)
        for replica in self.replicas.values():
            replica.start()
        return codes

    # -- teardown -----------------------------------------------------------------------------------------------------

    async def restore(self) -> list[str]:
        """After a harness failure: undo whatever a fault may have left behind, each step on its own; what failed.

        etcd and both replicas get SIGCONT (harmless when they run), every proxy is recreated without toxics, the
        starving FlowSchema is removed. Teardown then finds a system it can stop.
        """
        problems = []
        if self.cp.pid("etcd") is not None:
            self.cp.send("etcd", signal.SIGCONT)
        for replica in self.replicas.values():
            replica.thaw()
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("recreate every proxy", self.toxi.heal_all if self.toxiserver is not None else _nothing),
            ("remove the starving FlowSchema", lambda: identity.unstarve(self.api)),
        ]
        for what, step in steps:
            try:
                async with asyncio.timeout(60):
                    await step()
            except Exception as err:
                problems.append(f"{what}: failed ({type(err).__name__}: {err})")
        return problems

    async def teardown(self) -> dict[str, int | None]:
        await self.halt_churn()  # its operations use the API session closed below
        codes = {}
        for slot, replica in self.replicas.items():
            codes[slot] = await asyncio.to_thread(replica.stop)
        if self.toxiserver is not None:
            await self.toxiserver.close()
        try:
            await identity.unstarve(self.api)
            for ns in self.namespaces:
                await self.api.delete(f"/api/v1/namespaces/{ns}")
            slots = self.cfg.all_slots
            await identity.revoke(self.api, prefix=self.prefix, serviceaccounts=[self.serviceaccount(s) for s in slots])
            audited = f"/api/v1/namespaces/{AUDITED_NAMESPACE}"
            for slot in slots:
                for n in (1, 2):
                    await self.api.delete(f"{audited}/secrets/{self.serviceaccount(slot)}-{n}")
            leases = f"/apis/coordination.k8s.io/v1/namespaces/{AUDITED_NAMESPACE}/leases"
            await self.api.delete(f"{leases}/{self.lease}")
            for shard in range(self.cfg.shards if self.cfg.sharded else 0):
                await self.api.delete(f"{leases}/{shard_lease(self.lease, shard)}")
            if self.cfg.sharded:  # member Leases the replicas could not delete themselves (killed ones)
                members = f"webserver-operator.dev/member-of={self.lease}"
                for lease in await self.api.items(leases, labelSelector=members):
                    await self.api.delete(f"{leases}/{lease['metadata']['name']}")
        finally:
            await self.api.__aexit__(None, None, None)
        return codes

    def kill(self, slot: str) -> bool:
        return self.replicas[slot].send(signal.SIGKILL)

    def starts(self) -> dict[str, list[float]]:
        """Each slot's user and when its processes were started (``shardverdicts.incarnation``)."""
        every = {**self.replicas, **self.retired}
        return {identity.username(self.serviceaccount(slot)): r.starts() for slot, r in every.items()}


def _epoch(stamp: str) -> float:
    """A Lease's MicroTime (``2026-11-24T20:01:02.123456Z``) as epoch seconds."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
