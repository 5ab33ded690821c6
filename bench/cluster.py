"""A fresh local control plane per benchmark run, through hack/cluster.sh, and its CRD and namespace.

Why fresh: an API server that has already stored thousands of objects (and an etcd that has compacted them) is not
the same server; every system is measured on a cluster created for it alone. The benchmark's cluster has its own
name (``webserver-bench``, or ``BENCH_CLUSTER_NAME`` so that two checkouts can measure one after the other without
deleting each other's cluster) so it never touches the development or test cluster, the /16 Service range, enough
kwok nodes for the pods of a rollout (each node takes 110 pods), room for one NodePort per WebServer (the default range
holds 2768: larger runs get a wider ``--service-node-port-range``), and bench/audit-policy.yaml.

kube-controller-manager gets a client QPS of ``KCM_API_QPS`` (burst twice that) instead of Kubernetes' default 20:
at 20 requests per second, making 1000 Deployments available took 240 s and rolling a new image out to them 360 s,
for every system alike, which is the controller-manager's pace and not the operators'. The same setting applies to
every system in every run, and the report says so.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.procstat import control_plane_pids
from harness.kubeapi import Endpoint, KubeApi
from harness.paths import CRD_FILE, HACK, ROOT, tools_bin

USER_AGENT = "webserver-bench"
CLUSTER_NAME = os.environ.get("BENCH_CLUSTER_NAME") or "webserver-bench"
KCM_API_QPS = 200
MAX_NODES = 50
DEFAULT_NODE_PORTS = 2768  # kube-apiserver's default --service-node-port-range, 30000-32767


def admin_api(kubeconfig: Path) -> KubeApi:
    """The benchmark's own client of its cluster: 200 connections (bulk writes at 50 in flight plus the watches)."""
    endpoint = Endpoint.from_kubeconfig(
        kubeconfig,
        loopback_only="the benchmark only talks to a local control plane on 127.0.0.1 (it creates and deletes "
        "thousands of objects); use the cluster that `python -m bench` starts",
    )
    return KubeApi(endpoint, timeout=60, max_connections=200, user_agent=USER_AGENT)


class ClusterError(RuntimeError):
    """The benchmark cluster could not be started or prepared; the message carries the tool's own output."""


def nodes_for(n: int, replicas: int) -> int:
    """kwok nodes for ``n`` WebServers of ``replicas`` pods, room for a surge pod each during a rollout."""
    pods = n * replicas * 2 + 10
    return max(1, min(MAX_NODES, math.ceil(pods / 100)))


def node_port_range_for(n: int) -> str | None:
    """A ``--service-node-port-range`` with room for ``n`` NodePort Services and slack; None if the default has it."""
    if n + 100 <= DEFAULT_NODE_PORTS:
        return None
    return f"30000-{30000 + n + 1000 - 1}"


@dataclass
class BenchCluster:
    nodes: int
    name: str = CLUSTER_NAME
    node_port_range: str | None = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            CLUSTER_NAME=self.name,
            NODES=str(self.nodes),
            AUDIT_POLICY=str(ROOT / "bench" / "audit-policy.yaml"),
            KCM_API_QPS=str(KCM_API_QPS),
        )
        env.pop("NODE_PORT_RANGE", None)
        if self.node_port_range is not None:
            env["NODE_PORT_RANGE"] = self.node_port_range
        return env

    def _hack(self, *args: str, timeout: float = 600) -> str:
        result = subprocess.run(
            [str(HACK / "cluster.sh"), *args],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise ClusterError(
                f"hack/cluster.sh {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}"
            )
        return result.stdout.strip()

    @property
    def kubeconfig(self) -> Path:
        return Path(self._hack("kubeconfig"))

    @property
    def audit_log(self) -> Path:
        return Path(self._hack("audit-log"))

    @property
    def cluster_dir(self) -> Path:
        return self.kubeconfig.parent

    def kubectl(self, *args: str, timeout: float = 120) -> str:
        cmd = [str(tools_bin() / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if result.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def up(self, namespace: str) -> None:
        """Delete any previous benchmark cluster, create a fresh one, install the CRD and the namespace."""
        for attempt in (1, 2):  # a loaded machine occasionally misses a start-up deadline: one retry
            self._hack("down", timeout=300)
            try:
                self._hack("up", timeout=900)
                break
            except ClusterError:
                if attempt == 2:
                    raise
        self.kubectl("apply", "--server-side", "--field-manager=webserver-bench", "-f", str(CRD_FILE))
        self.kubectl(
            "wait", "--for=condition=Established", "crd/webservers.web.webserver-operator.dev", "--timeout=60s"
        )
        self.kubectl("create", "namespace", namespace)
        # Established is not yet served: the CRD's storage answers 429 for a moment.
        deadline = time.monotonic() + 60
        while True:
            try:
                self.kubectl("get", "webservers", "-n", namespace)
                return
            except ClusterError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def down(self) -> None:
        self._hack("down", timeout=300)

    def control_plane(self) -> dict[str, int]:
        return control_plane_pids(self.cluster_dir)
