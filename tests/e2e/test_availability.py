"""Ready means serving: a WebServer answers every request while it is rolled, scaled, drained and its operator restarts.

kind only (real nginx pods, real kube-proxy): `make e2e-kind`, or on a running cluster
``CLUSTER=kind .venv/bin/python -m pytest tests/e2e/test_availability.py``. One WebServer of the stand-in nginx image
(hack/images/nginx.Containerfile) is operated on while a load generator inside the control-plane node
(tests/support/traffic.py) sends one request after another to the node's own address at the WebServer's NodePort.
Every operation starts from ready replicas and asserts 0 failed requests (non-200 or no answer within 5 s); each
prints what it sent and lost, and the module writes the table of docs/availability.md to
``~/.cache/webserver-operator/e2e/availability.md``.

The tests run in file order on the same WebServer; each leaves it Ready for the next.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FULLNAME, Release
from tests.support.cluster import Cluster, container_engine, wait_until
from tests.support.factories import webserver
from tests.support.traffic import Load, Tally
from tests.support.webservers import wait_ready

pytestmark = pytest.mark.kind

NAME = "avail"
RESULTS: list[tuple[str, Tally, str]] = []
REPORT = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "webserver-operator" / "e2e" / "availability.md"
)


@pytest.fixture(scope="module")
def namespace(cluster: Cluster, release: Release) -> Iterator[str]:
    with cluster.temporary_namespace("e2e-avail") as name:
        cluster.apply(webserver(NAME, image=cluster.web_images[0], replicas=3, port=80), namespace=name)
        wait_ready(cluster, name, NAME, timeout=240)
        yield name
    _write_report()


def _write_report() -> None:
    if not RESULTS:
        return
    lines = [
        "| operation | sent | failed | answers other than 200 | seconds | note |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for what, tally, note in RESULTS:
        codes = ", ".join(f"{c}: {n}" for c, n in sorted(tally.codes().items())) or "none"
        lines.append(f"| {what} | {tally.sent} | {tally.failed} | {codes} | {tally.seconds:.0f} | {note} |")
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines) + f"\n(written to {REPORT})")


def _load(cluster: Cluster, namespace: str, name: str = NAME) -> Load:
    ws = cluster.get_json("webserver", name, namespace=namespace)
    node = _control_plane(cluster)
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    return Load(container_engine(), node["metadata"]["name"], f"http://{address}:{ws['status']['nodePort']}/")


def _control_plane(cluster: Cluster) -> dict[str, Any]:
    nodes = cluster.get_json("nodes")["items"]
    return next(n for n in nodes if "node-role.kubernetes.io/control-plane" in n["metadata"].get("labels", {}))


def _patch(cluster: Cluster, namespace: str, spec: dict[str, Any]) -> None:
    cluster.kubectl("patch", "webserver", NAME, "-n", namespace, "--type=merge", "-p", json.dumps({"spec": spec}))


def _pods(cluster: Cluster, namespace: str, name: str = NAME) -> list[dict[str, Any]]:
    items = cluster.get_json("pods", "-l", f"app.kubernetes.io/instance={name}", namespace=namespace)["items"]
    return list(items)


def _settled(cluster: Cluster, namespace: str, *, image: str, replicas: int, timeout: float = 240) -> None:
    """Ready for the current generation, and exactly ``replicas`` pods left, all ready on ``image`` (none stopping)."""

    def done() -> bool:
        ws = cluster.get_json("webserver", NAME, namespace=namespace)
        ready: dict[str, Any] = next((c for c in ws["status"].get("conditions", []) if c["type"] == "Ready"), {})
        if ready.get("status") != "True" or ws["status"].get("observedGeneration") != ws["metadata"]["generation"]:
            return False
        pods = _pods(cluster, namespace)
        return len(pods) == replicas and all(
            p["spec"]["containers"][0]["image"] == image
            and all(s.get("ready") for s in p["status"].get("containerStatuses") or [{}])
            for p in pods
        )

    wait_until(done, timeout=timeout, message=f"{replicas} ready pods on {image}, none terminating")


def _record(what: str, tally: Tally, note: str = "") -> None:
    RESULTS.append((what, tally, note))
    print(f"\n{what}: {tally}" + (f" ({note})" if note else ""))
    for when, code in tally.failures[:20]:
        print(f"  failed at {time.strftime('%H:%M:%S', time.gmtime(when))}.{int(when % 1 * 1000):03d}: {code}")


def _operate(cluster: Cluster, namespace: str, what: str, spec: dict[str, Any], *, image: str, replicas: int) -> None:
    with _load(cluster, namespace) as load:
        _patch(cluster, namespace, spec)
        _settled(cluster, namespace, image=image, replicas=replicas)
        time.sleep(2)
    tally = load.stop()
    _record(what, tally)
    assert tally.sent > 100, f"the load generator hardly ran: {tally}"
    assert tally.failed == 0, f"{what}: {tally}"


def test_new_image_at_3_replicas(cluster: Cluster, namespace: str) -> None:
    _operate(
        cluster,
        namespace,
        "new image, 3 replicas",
        {"image": cluster.web_images[1]},
        image=cluster.web_images[1],
        replicas=3,
    )


def test_scale_3_to_1(cluster: Cluster, namespace: str) -> None:
    _operate(cluster, namespace, "scale 3 → 1", {"replicas": 1}, image=cluster.web_images[1], replicas=1)
    assert cluster.get_or_none("poddisruptionbudget", NAME, namespace=namespace) is None


def test_new_image_at_1_replica(cluster: Cluster, namespace: str) -> None:
    _operate(
        cluster,
        namespace,
        "new image, 1 replica",
        {"image": cluster.web_images[0]},
        image=cluster.web_images[0],
        replicas=1,
    )


def test_scale_1_to_3(cluster: Cluster, namespace: str) -> None:
    _operate(cluster, namespace, "scale 1 → 3", {"replicas": 3}, image=cluster.web_images[0], replicas=3)
    budget = wait_until(
        lambda: cluster.get_or_none("poddisruptionbudget", NAME, namespace=namespace), timeout=30, message="the budget"
    )
    assert budget["spec"]["maxUnavailable"] == 1


@pytest.mark.timeout(600)
def test_drain_the_node_with_most_replicas(cluster: Cluster, namespace: str) -> None:
    """The budget lets the drain evict one pod at a time; each comes back on the other node before the next goes."""
    nodes = [p["spec"]["nodeName"] for p in _pods(cluster, namespace)]
    assert len(cluster.get_json("nodes")["items"]) >= 2, "draining needs a second node (hack/kind.sh: KIND_WORKERS)"
    node = max(set(nodes), key=nodes.count)
    with _load(cluster, namespace) as load:
        started = time.monotonic()
        try:
            cluster.kubectl(
                "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s", timeout=330
            )
            drained = time.monotonic() - started
            _settled(cluster, namespace, image=cluster.web_images[0], replicas=3)
        finally:
            cluster.kubectl("uncordon", node, check=False)
        time.sleep(2)
    tally = load.stop()
    _record(
        "drain the node with most replicas (3)",
        tally,
        f"{nodes.count(node)} of 3 replicas on it; `kubectl drain` took {drained:.0f} s",
    )
    assert tally.failed == 0, tally


def _serving(pod: dict[str, Any]) -> bool:
    """Ready and not terminating: a pod the Service sends new requests to."""
    conditions = pod["status"].get("conditions") or []
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return ready and not pod["metadata"].get("deletionTimestamp")


@dataclasses.dataclass(frozen=True)
class _Seen:
    """One look at the cluster during a drain: serving pods per node, pods left on the drained node, the budget."""

    serving: dict[str, int]
    on_drained: int
    disruptions_allowed: int | None


@pytest.mark.timeout(600)
def test_a_drain_of_the_node_with_the_last_ready_replicas_waits_for_the_budget(
    cluster: Cluster, release: Release
) -> None:
    """Both replicas of a 2-replica WebServer on one node; `kubectl drain` of that node may evict only one at a time.

    The budget (maxUnavailable 1) refuses the second eviction until the first pod's replacement is Ready on the other
    node: throughout the drain at least one pod serves, the budget is seen with no disruption allowed while a pod
    still waits on the drained node, and the WebServer ends with both pods Ready off it. Asserted from what the
    cluster showed (pods, the budget's status, sampled every half second), and from the traffic: 0 failed requests.
    """
    nodes = [n["metadata"]["name"] for n in cluster.get_json("nodes")["items"]]
    assert len(nodes) >= 2, "draining needs a second node (hack/kind.sh: KIND_WORKERS)"
    control_plane = _control_plane(cluster)["metadata"]["name"]
    drained = next(n for n in nodes if n != control_plane)  # keep the control plane's own pods where they are
    others = [n for n in nodes if n != drained]
    name = "avail-pdb"
    with cluster.temporary_namespace("e2e-avail-pdb") as namespace:
        # Both replicas on the node to drain: the others are cordoned while they are scheduled.
        for node in others:
            cluster.kubectl("cordon", node)
        try:
            cluster.apply(webserver(name, image=cluster.web_images[0], replicas=2, port=80), namespace=namespace)
            wait_ready(cluster, namespace, name, timeout=240)
        finally:
            for node in others:
                cluster.kubectl("uncordon", node, check=False)
        before = _pods(cluster, namespace, name)
        assert sorted(p["spec"]["nodeName"] for p in before) == [drained, drained], [
            (p["metadata"]["name"], p["spec"]["nodeName"]) for p in before
        ]
        budget = wait_until(
            lambda: cluster.get_or_none("poddisruptionbudget", name, namespace=namespace),
            timeout=30,
            message="the budget",
        )
        assert budget["spec"]["maxUnavailable"] == 1

        seen: list[_Seen] = []
        stop = threading.Event()

        def look() -> None:
            while not stop.is_set():
                pods = _pods(cluster, namespace, name)
                pdb = cluster.get_or_none("poddisruptionbudget", name, namespace=namespace) or {}
                serving: dict[str, int] = {}
                for pod in pods:
                    if _serving(pod):
                        serving[pod["spec"]["nodeName"]] = serving.get(pod["spec"]["nodeName"], 0) + 1
                allowed = (pdb.get("status") or {}).get("disruptionsAllowed")
                on_drained = sum(1 for p in pods if p["spec"].get("nodeName") == drained)
                seen.append(_Seen(serving, on_drained, allowed))
                stop.wait(0.5)

        watcher = threading.Thread(target=look, daemon=True)
        with _load(cluster, namespace, name) as load:
            watcher.start()
            started = time.monotonic()
            try:
                cluster.kubectl(
                    "drain", drained, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s", timeout=330
                )
                took = time.monotonic() - started
                _settled_pods(cluster, namespace, name, replicas=2, off=drained)
            finally:
                stop.set()
                watcher.join(timeout=30)
                cluster.kubectl("uncordon", drained, check=False)
            time.sleep(2)
        tally = load.stop()
        waited = [s for s in seen if s.disruptions_allowed == 0 and s.on_drained > 0]
        _record(
            "drain the node holding both replicas (2)",
            tally,
            f"`kubectl drain` took {took:.0f} s; the budget allowed no eviction in {len(waited)} of {len(seen)} looks",
        )
        assert seen, "the watcher saw nothing"
        assert min(sum(s.serving.values()) for s in seen) >= 1, [s.serving for s in seen]
        assert waited, f"the budget never held the drain: {seen}"
        after = _pods(cluster, namespace, name)
        assert len(after) == 2 and all(_serving(p) and p["spec"]["nodeName"] != drained for p in after)
        assert tally.sent > 100, f"the load generator hardly ran: {tally}"
        assert tally.failed == 0, tally


def _settled_pods(cluster: Cluster, namespace: str, name: str, *, replicas: int, off: str) -> None:
    """Exactly ``replicas`` pods of ``name``, all serving, none on node ``off``."""

    def done() -> bool:
        pods = _pods(cluster, namespace, name)
        return len(pods) == replicas and all(_serving(p) and p["spec"]["nodeName"] != off for p in pods)

    wait_until(done, timeout=240, message=f"{replicas} serving pods of {name} off {off}")


@pytest.mark.timeout(600)
def test_operator_restart(cluster: Cluster, namespace: str, release: Release) -> None:
    with _load(cluster, namespace) as load:
        cluster.kubectl("rollout", "restart", f"deployment/{FULLNAME}", "-n", release.namespace)
        cluster.kubectl(
            "rollout", "status", f"deployment/{FULLNAME}", "-n", release.namespace, "--timeout=240s", timeout=260
        )
        time.sleep(10)  # the new operator takes the lease and reconciles
        _settled(cluster, namespace, image=cluster.web_images[0], replicas=3)
    tally = load.stop()
    _record("operator restarted", tally)
    assert tally.failed == 0, tally


@pytest.mark.timeout(600)
def test_a_version_that_never_serves_keeps_the_old_pods_serving_and_says_why(cluster: Cluster, namespace: str) -> None:
    """spec.port 8080 on an image that listens on 80: new pods never pass their probe, the old ones keep serving."""
    with _load(cluster, namespace) as load:
        _patch(cluster, namespace, {"port": 8080})

        def probe_failing() -> dict[str, Any] | None:
            ws = cluster.get_json("webserver", NAME, namespace=namespace)
            ready: dict[str, Any] = next((c for c in ws["status"].get("conditions", []) if c["type"] == "Ready"), {})
            return ready if ready.get("reason") == "ProbeFailing" else None

        ready = wait_until(probe_failing, timeout=180, message="Ready=False ProbeFailing")
        assert ready["status"] == "False"
        assert "Readiness probe failed" in ready["message"] and ":8080/" in ready["message"], ready["message"]
        ws = cluster.get_json("webserver", NAME, namespace=namespace)
        assert ws["status"]["readyReplicas"] >= 3, ws["status"]
        _patch(cluster, namespace, {"port": 80})
        _settled(cluster, namespace, image=cluster.web_images[0], replicas=3)
        time.sleep(2)
    tally = load.stop()
    _record("port 8080 that the image never serves, then back to 80", tally, f"Ready=False {ready['reason']}")
    print(f"  the WebServer said: {ready['message']}")
    assert tally.failed == 0, tally
