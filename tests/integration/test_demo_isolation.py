"""`make demo` and `make test` leave each other alone: separate clusters, and the demo's operator never touches ours.

The README runs `make demo` and then `make test`; the demo's operator keeps running. Here the demo script runs for
real (its own cluster, CRD, operator and sample, with its own cluster name and free ports so it cannot collide with a
demo the developer left running) next to the test cluster, and then:

- the two clusters are different API servers, and the demo's sample exists only in the demo's;
- a WebServer created in the test cluster gets no status from the demo's operator, which still manages exactly its
  own sample;
- `hack/demo.sh down` stops the demo's operator and cluster and leaves the test cluster running;
- the demo prints only its own lines (no log lines of kwok or the components it starts).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from harness.paths import HACK
from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _server(kubeconfig: Path) -> str:
    """The API server URL a kubeconfig points at."""
    config = yaml.safe_load(kubeconfig.read_text())
    (entry,) = config["clusters"]
    server: str = entry["cluster"]["server"]
    return server


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )


@pytest.mark.usefixtures("crd")
def test_demo_and_tests_leave_each_other_alone(cluster: Cluster, namespace: str) -> None:
    env = dict(os.environ)
    env.pop("CLUSTER_NAME", None)
    env.pop("KUBECONFIG", None)
    env["DEMO_CLUSTER_NAME"] = f"wo-demo-test-{uuid.uuid4().hex[:6]}"
    metrics_port, health_port = _free_port(), _free_port()
    env["DEMO_METRICS_PORT"], env["DEMO_HEALTH_PORT"] = str(metrics_port), str(health_port)
    demo = HACK / "demo.sh"
    demo_kubeconfig = Path(
        subprocess.run([str(demo), "kubeconfig"], env=env, capture_output=True, text=True, check=True).stdout.strip()
    )
    assert demo_kubeconfig != cluster.kubeconfig
    try:
        started = subprocess.run([str(demo)], env=env, capture_output=True, text=True, timeout=540, check=False)
        assert started.returncode == 0, f"hack/demo.sh failed:\n{started.stdout[-3000:]}\n{started.stderr[-3000:]}"
        # Only the demo's own lines: the components' logs (kwok's JSON lines among them) go to files.
        foreign = [line for line in (started.stdout + started.stderr).splitlines() if line.lstrip().startswith("{")]
        assert foreign == [], f"hack/demo.sh printed log lines of the tools it runs: {foreign[:3]}"
        assert _server(demo_kubeconfig) != _server(cluster.kubeconfig)

        kubectl_demo = [str(cluster.kubectl_path), "--kubeconfig", str(demo_kubeconfig)]
        sample = json.loads(
            subprocess.run(
                [*kubectl_demo, "get", "webserver", "webserver-sample", "-n", "default", "-o", "json"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert {c["type"]: c["status"] for c in sample["status"]["conditions"]}["Ready"] == "True"
        assert cluster.get_or_none("webserver", "webserver-sample", namespace="default") is None

        # A WebServer in the test cluster: the demo's operator never sees it.
        cluster.apply(webserver("isolated", replicas=1), namespace=namespace)
        time.sleep(3)
        obj = cluster.get_json("webserver", "isolated", namespace=namespace)
        assert not obj.get("status"), f"something wrote the test cluster's WebServer: {obj.get('status')}"
        assert cluster.get_or_none("deployment", "isolated", namespace=namespace) is None
        assert _metric(metrics_port, "webserver_operator_managed_webservers") == 1
        pidfile = demo_kubeconfig.parent / "demo" / "operator.pid"
        pid = int(pidfile.read_text())
        os.kill(pid, 0)  # the demo operator is running
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert str(demo_kubeconfig).encode() in cmdline
        assert str(cluster.kubeconfig).encode() not in cmdline
    finally:
        stopped = subprocess.run([str(demo), "down"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert stopped.returncode == 0, stopped.stderr
    assert not demo_kubeconfig.parent.exists()
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), timeout=30, message=f"the demo operator (pid {pid}) to exit")
    # The test cluster is still up and untouched.
    assert cluster.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    assert cluster.get_json("webserver", "isolated", namespace=namespace)["metadata"]["name"] == "isolated"
