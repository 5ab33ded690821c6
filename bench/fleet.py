"""A fleet of sharded operator replicas on the benchmark cluster: start them, wait for the split, read them, stop.

Why a module: the sharded benchmark (``bench.sharded``) treats R replicas as one system under test, but measures each
on its own: every replica is its own ``webserver-operator run --leader-elect --shards S`` process with its own log
file (``<log_dir>/<config>-replica-<i>.log``), its own plain-HTTP metrics port and its own /proc entry. The replicas
start at the same moment, as a Deployment's pods would, and the benchmark waits until the shard Leases (as ``kubectl
get leases -l webserver-operator.dev/shard-of=<group>`` lists them) are held one share per replica and every replica
is ready (its held shards' caches synced) before it creates anything.

Hands on: ``Fleet.replicas`` (``harness.operator.OperatorProcess``, for pids and logs), ``holders()`` (the Lease
table) and ``scrape()`` (``bench.fleetmetrics.ReplicaMetrics`` per replica).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.fleetmetrics import ReplicaMetrics, parse
from bench.sharded_plan import split_settled
from harness.kubeapi import KubeApi
from harness.operator import OperatorProcess

SHARD_OF = "webserver-operator.dev/shard-of"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


class FleetError(RuntimeError):
    """The replicas did not come up or did not split the shards; the message carries the Lease table and log tails."""


@dataclass
class Fleet:
    kubeconfig: Path
    api: KubeApi
    size: int
    shards: int
    lease_namespace: str
    group: str
    log_prefix: Path
    workers: int = 4
    replicas: list[OperatorProcess] = field(default_factory=list)

    def argv(self) -> list[str]:
        """The flags of every replica (after the harness's ``--no-metrics-secure --log-format=json``)."""
        return [
            "--leader-elect",
            f"--shards={self.shards}",
            f"--leader-election-namespace={self.lease_namespace}",
            f"--leader-election-id={self.group}",
            f"--workers={self.workers}",
            "--log-level=INFO",  # as users run it; the harness's DEBUG default would be a cost of its own
        ]

    async def start(self, *, seconds: float = 180) -> None:
        """Start every replica at once, then wait for each one's ports and /readyz."""
        for i in range(self.size):
            self.replicas.append(
                OperatorProcess(
                    kubeconfig=self.kubeconfig,
                    args=self.argv(),
                    log_path=self.log_prefix.with_name(f"{self.log_prefix.name}-replica-{i}.log"),
                )
            )
        for replica in self.replicas:
            await asyncio.to_thread(replica.wait_started, seconds)

    @staticmethod
    def identity(replica: OperatorProcess) -> str:
        """The identity the replica holds its Leases as (its start-up log line names it), or "" before that line."""
        return next(
            (str(line["identity"]) for line in replica.snapshot() if "identity" in line and "shards" in line), ""
        )

    async def holders(self) -> dict[int, str]:
        """Shard -> holder identity ("" when free), from the shard Leases."""
        listing = await self.api.request(
            "GET", LEASES.format(ns=self.lease_namespace), params={"labelSelector": f"{SHARD_OF}={self.group}"}
        )
        return {
            int(item["metadata"]["name"].rsplit("-", 1)[1]): str((item.get("spec") or {}).get("holderIdentity") or "")
            for item in listing.get("items") or []
        }

    async def wait_split(self, *, seconds: float = 180) -> float:
        """Seconds until every shard is held, one fair share per replica, and every replica is ready again."""
        started = time.monotonic()
        while True:
            holders = await self.holders()
            identities = [self.identity(r) for r in self.replicas]
            if split_settled(holders, identities, self.shards) and all(await self._ready()):
                return round(time.monotonic() - started, 1)
            for replica in self.replicas:
                if replica.proc.poll() is not None:
                    raise FleetError(f"a replica exited with {replica.proc.returncode}:\n{replica.tail()}")
            if time.monotonic() - started > seconds:
                table = ", ".join(f"shard {s}: {h or 'free'}" for s, h in sorted(holders.items()))
                raise FleetError(
                    f"the {self.shards} shard Leases were not split one share per replica within {seconds:.0f} s "
                    f"(replicas {identities}; Leases {table or 'none'}); read the replicas' logs "
                    f"{self.log_prefix}-replica-*.log"
                )
            await asyncio.sleep(1)

    async def _ready(self) -> list[bool]:
        answers = await asyncio.gather(*(asyncio.to_thread(r.probe, "/readyz") for r in self.replicas))
        return [status == 200 for status, _ in answers]

    async def scrape(self) -> list[ReplicaMetrics]:
        """Every replica's metrics, read at the same moment (one thread each, off the event loop)."""
        texts = await asyncio.gather(*(asyncio.to_thread(r.metrics_text) for r in self.replicas))
        return [parse(text) for text in texts]

    def pids(self) -> list[int]:
        return [r.proc.pid for r in self.replicas]

    def stop(self) -> list[str]:
        """SIGTERM every replica (each hands its shards back); the problems of those that did not stop cleanly."""
        problems = []
        for i, replica in enumerate(self.replicas):
            if replica.proc.poll() is not None:
                problems.append(f"replica {i} had exited with {replica.proc.returncode} before the end")
                continue
            try:
                code = replica.stop(timeout=60)
            except AssertionError as err:
                problems.append(f"replica {i}: {err}".splitlines()[0])
                continue
            if code != 0:
                problems.append(f"replica {i} exited with {code} on SIGTERM (log {replica.process.log_path})")
        return problems
