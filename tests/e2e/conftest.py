"""The installed chart, and the operator it describes, for the e2e suite (one suite, two backends).

- local control plane (CI): kwok nodes run no containers, so the chart's operator pod is only simulated. The operator
  runs as a host process instead, with the args and env of the Deployment the chart installed (the chart's values are
  what is exercised; bind addresses and log format are overridden so the test can find and read it) and a token of
  the chart's ServiceAccount (the chart's RBAC is what is exercised).
- kind: the image built from the Dockerfile (hack/kind.sh loads it into the cluster) runs as the chart's pod, installed
  with ``image.repository``/``image.tag`` set to it, as the README's Helm section says; nothing is substituted.

/metrics is read as Prometheus reads it: HTTPS with the token of the ServiceAccount ``metrics-scraper``, which the
release binds to its metrics-reader ClusterRole (``metrics.reader.subjects``). On kind a pod of that ServiceAccount
scrapes from inside the cluster (tests/support/scraper_pod.py), through the chart's NetworkPolicy (the release
namespace carries the label it admits); locally the test scrapes the host process with a TokenRequest token.

CRD ownership is handled explicitly: integration tests may already have applied the CRD outside Helm, so the
release is installed with ``--take-ownership`` (the CRD then carries Helm's annotations and ``crds.keep`` protects it
on uninstall).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.operator import OperatorProcess
from harness.paths import ROOT
from harness.scrape import metric_value
from tests.support.cluster import Cluster, wait_until
from tests.support.scraper_pod import ScraperPod
from tests.support.serviceaccounts import service_account_token

CHART = ROOT / "charts" / "webserver-operator"
FULLNAME = "webserver-operator"
HOST_OVERRIDDEN = ("--metrics-bind-address", "--health-probe-bind-address", "--log-format", "--log-level")
SCRAPER = "metrics-scraper"
"""The ServiceAccount the release binds to its metrics-reader ClusterRole: the tests' Prometheus."""
METRICS_NAMESPACE_LABEL = {"metrics": "enabled"}
"""What the chart's NetworkPolicy admits by default (metrics.networkPolicy.namespaceSelector)."""


def split_image(image: str) -> tuple[str, str]:
    """``registry/repo:tag`` -> (``registry/repo``, ``tag``); a port in the registry is not a tag."""
    repository, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        return image, "latest"
    return repository, tag


def helm(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [str(cluster.helm_path), "--kubeconfig", str(cluster.kubeconfig), *args]
    if cluster.context:
        cmd += ["--kube-context", cluster.context]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=cluster.env())
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


@dataclass
class Release:
    """A Helm release of the chart plus the operator it runs (host process locally, the pod on kind)."""

    cluster: Cluster
    name: str
    namespace: str
    workdir: Path
    values: list[str] = field(default_factory=list)
    host_operator: OperatorProcess | None = None
    scraper: ScraperPod | None = None

    @property
    def in_cluster(self) -> bool:
        return self.cluster.runs_containers

    def helm_values(self) -> list[str]:
        base = ["--set", f"fullnameOverride={FULLNAME}", "--set", "metrics.networkPolicy.enabled=true"]
        reader = "metrics.reader.subjects[0]"
        base += ["--set", f"{reader}.kind=ServiceAccount,{reader}.name={SCRAPER},{reader}.namespace={self.namespace}"]
        if self.in_cluster:
            repository, tag = split_image(self.cluster.operator_image)
            base += ["--set", f"image.repository={repository}", "--set", f"image.tag={tag}"]
            base += ["--set", "image.pullPolicy=IfNotPresent"]
        return base + self.values

    def operator_pods(self) -> list[dict[str, Any]]:
        """The operator's pods (not the `helm test` pod, which carries the chart's labels too)."""
        selector = "app.kubernetes.io/name=webserver-operator,app.kubernetes.io/component!=test"
        return list(self.cluster.get_json("pods", "-l", selector, namespace=self.namespace)["items"])

    def install(self) -> None:
        helm(
            self.cluster,
            "install",
            self.name,
            str(CHART),
            "-n",
            self.namespace,
            "--take-ownership",
            *self.helm_values(),
        )
        self.cluster.kubectl("create", "serviceaccount", SCRAPER, "-n", self.namespace)

    def rendered(self, kind: str, *values: str) -> dict[str, Any]:
        """The one ``kind`` object the chart renders with this release's values plus ``values``."""
        args = ("template", self.name, str(CHART), "-n", self.namespace, *self.helm_values(), *values)
        docs = [d for d in yaml.safe_load_all(helm(self.cluster, *args).stdout) if d and d["kind"] == kind]
        assert len(docs) == 1, f"expected one {kind}, the chart rendered {len(docs)}"
        doc: dict[str, Any] = docs[0]
        return doc

    def scraper_token(self) -> str:
        return service_account_token(self.cluster, namespace=self.namespace, name=SCRAPER, create=False)

    def scraper_pod(self) -> ScraperPod:
        """The in-cluster scraper (kind), started on first use."""
        if self.scraper is None:
            self.scraper = ScraperPod(
                self.cluster, namespace=self.namespace, serviceaccount=SCRAPER, image=self.cluster.operator_image
            ).start()
        return self.scraper

    def upgrade(self, *values: str) -> None:
        self.values += list(values)
        helm(self.cluster, "upgrade", self.name, str(CHART), "-n", self.namespace, *self.helm_values())

    def deployment(self) -> dict[str, Any]:
        return self.cluster.get_json("deployment", FULLNAME, namespace=self.namespace)

    def start_operator(self) -> None:
        """Run the operator the installed Deployment describes, and wait until it is ready."""
        if self.in_cluster:
            self.cluster.kubectl(
                "rollout", "status", f"deployment/{FULLNAME}", "-n", self.namespace, "--timeout=180s", timeout=200
            )
            return
        self.stop_operator()
        spec = self.deployment()["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        args = [a for a in container.get("args", []) if not a.startswith(HOST_OVERRIDDEN)]
        env = dict(os.environ)
        for var in container.get("env", []):
            if "value" in var:
                env[var["name"]] = var["value"]
            elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env[var["name"]] = f"{FULLNAME}-host-{uuid.uuid4().hex[:5]}"
            elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
                env[var["name"]] = self.namespace
        env.pop("KUBECONFIG", None)
        kubeconfig = self._serviceaccount_kubeconfig(spec["serviceAccountName"])
        self.host_operator = OperatorProcess(
            kubeconfig=kubeconfig,
            args=args,
            env=env,
            log_path=self.workdir / "operator.log",
            metrics_token=self.scraper_token(),
        ).wait_started(timeout=60)

    def stop_operator(self) -> None:
        if self.host_operator is not None:
            code = self.host_operator.stop()
            assert code == 0, f"operator exited with {code}:\n{self.host_operator.tail()}"
            self.host_operator = None

    @property
    def metrics_service_url(self) -> str:
        port = self.cluster.get_json("service", f"{FULLNAME}-metrics", namespace=self.namespace)["spec"]["ports"][0]
        return f"https://{FULLNAME}-metrics.{self.namespace}.svc:{port['port']}/metrics"

    def metrics_text(self) -> str:
        """/metrics as the tests' Prometheus reads it (the host process locally, the metrics Service on kind)."""
        if self.host_operator is not None:
            return self.host_operator.metrics_text()
        deadline = time.monotonic() + 30
        while True:
            status, text = self.scraper_pod().scrape(self.metrics_service_url)
            if status != 0 or time.monotonic() > deadline:
                break
            time.sleep(1)  # no answer at all (a rollout's pod going away): ask again, as the next scrape would
        assert status == 200, f"GET {self.metrics_service_url} from the scraper pod answered {status}: {text}"
        return text

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return metric_value(self.metrics_text(), name, labels)

    def _serviceaccount_kubeconfig(self, serviceaccount: str) -> Path:
        return self.cluster.serviceaccount_kubeconfig(
            namespace=self.namespace, serviceaccount=serviceaccount, path=self.workdir / "serviceaccount.kubeconfig"
        )


@contextlib.contextmanager
def release_namespace(cluster: Cluster, prefix: str) -> Iterator[str]:
    """A fresh namespace for a release: restricted Pod Security, scrapeable by the chart's NetworkPolicy."""
    with cluster.temporary_namespace(
        prefix, labels={"pod-security.kubernetes.io/enforce": "restricted", **METRICS_NAMESPACE_LABEL}
    ) as namespace:
        yield namespace


@contextlib.contextmanager
def own_release_namespace(cluster: Cluster, prefix: str, release: str) -> Iterator[str]:
    """``release_namespace`` for a test that installs release ``release`` itself; uninstalled afterwards."""
    with release_namespace(cluster, prefix) as namespace:
        try:
            yield namespace
        finally:
            helm(cluster, "uninstall", release, "-n", namespace, "--wait", "--timeout=120s", check=False)


@pytest.fixture(scope="module")
def release(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    with release_namespace(cluster, "wo-e2e") as namespace:
        yield from _installed(cluster, namespace, tmp_path_factory)


def _installed(cluster: Cluster, namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    rel = Release(cluster=cluster, name="wo", namespace=namespace, workdir=tmp_path_factory.mktemp("release"))
    rel.install()
    wait_until(
        lambda: cluster.get_or_none("deployment", FULLNAME, namespace=namespace),
        timeout=30,
        message="the chart's Deployment",
    )
    rel.start_operator()
    try:
        yield rel
    finally:
        rel.stop_operator()
        helm(cluster, "uninstall", rel.name, "-n", namespace, check=False)
