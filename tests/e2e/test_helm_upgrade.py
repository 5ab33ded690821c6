"""`helm upgrade` from the previous release's chart restarts nobody's pods (kind: real containers, real images).

tests/integration/test_upgrade.py proves it for the operator as host processes; this proves it for what users run:
the chart and the image. The previous release is BASELINE_REF (the same pin); its tree comes from `git archive`, its
image is built from its own Dockerfile by its own hack/images.sh, and its chart is installed from its own tree with
only the values that chart knows. WebServers converge under it; then `helm upgrade` moves the same release to HEAD's
chart and image (cluster.operator_image, as `make e2e-kind` builds it). After HEAD's operator pod has reconciled every
WebServer and gone quiet, per Deployment: the generation is unchanged (no rollout), the pod template is unchanged
except fields the CHANGELOG's [Unreleased] upgrade notes declare (``pod-template: <field>``), and the operator's
managedFields entries of the Deployment and the Service are unchanged (it wrote nothing to converged children).

Only on kind (``kind`` marker): the local control plane runs no images, and the host-process upgrade is covered there.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.paths import ROOT
from harness.scrape import metric_value
from tests.e2e.conftest import SCRAPER, helm, own_release_namespace, split_image
from tests.integration.test_upgrade import BASELINE_REF
from tests.support.baseline import extract_tree
from tests.support.cluster import Cluster, container_engine, wait_until
from tests.support.factories import webserver
from tests.support.scraper_pod import ScraperPod
from tests.support.traffic import Load
from tests.support.upgrades import CHANGELOG, children_state, declared_template_changes, upgrade_problems
from tests.support.watch import Watch
from tests.support.webservers import wait_ready
from webserver_operator.desired import TEMPLATE_REVISION, TEMPLATE_REVISION_ANNOTATION, selects_pre_stop_pods
from webserver_operator.kube.client import FIELD_MANAGER

pytestmark = pytest.mark.kind

FULLNAME = "wo-upgrade"
RELEASE = "wo-upgrade"
BASELINE_IMAGE = f"localhost/webserver-operator:baseline-{BASELINE_REF[:7]}"
SPECS: list[tuple[str, dict[str, Any]]] = [
    ("up-1", {"replicas": 1}),
    ("up-0", {"replicas": 0}),
    ("up-port", {"replicas": 1, "port": 8080}),
    (
        "up-res",
        {"replicas": 1, "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}},
    ),
    ("up-secret", {"replicas": 1, "imagePullSecrets": [{"name": "regcred"}]}),
]
"""Fields that reach the pod template (the host test has the long list; these are the ones cheap on real nodes)."""


@pytest.fixture(scope="module")
def baseline_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract_tree(BASELINE_REF, tmp_path_factory.mktemp("baseline-chart"))


@pytest.fixture(scope="module")
def baseline_image(cluster: Cluster, baseline_tree: Path) -> str:
    """The previous release's image, built from its own Dockerfile and loaded into the kind cluster."""
    env = {**cluster.env(), "IMG": BASELINE_IMAGE}
    for cmd in (
        [str(baseline_tree / "hack" / "images.sh"), "operator", BASELINE_IMAGE],
        [str(ROOT / "hack" / "kind.sh"), "load-image"],
    ):
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=False, env=env)
        assert result.returncode == 0, f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr[-3000:]}"
    return BASELINE_IMAGE


def _image_values(image: str) -> list[str]:
    repository, tag = split_image(image)
    return [
        "--set",
        f"image.repository={repository}",
        "--set",
        f"image.tag={tag}",
        "--set",
        "image.pullPolicy=IfNotPresent",
    ]


@pytest.fixture(scope="module")
def operator_namespace(cluster: Cluster) -> Iterator[str]:
    with own_release_namespace(cluster, "wo-upgrade", RELEASE) as name:
        yield name


def _snapshot(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    """Per WebServer: its Deployment's generation, pod template and operator managedFields, its Service's entry."""
    return children_state(
        cluster.get_json("deployments", "--show-managed-fields", namespace=namespace)["items"],
        cluster.get_json("services", "--show-managed-fields", namespace=namespace)["items"],
        [name for name, _ in SPECS],
        field_manager=FIELD_MANAGER,
    )


def _rolled_out(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("rollout", "status", f"deployment/{FULLNAME}", "-n", namespace, "--timeout=180s", timeout=200)


def _reconciled_and_quiet(scraper: ScraperPod, url: str) -> None:
    """HEAD's operator has reconciled at least every WebServer here, and its queue stayed empty for 3 scrapes."""

    def metrics() -> str:
        status, text = scraper.scrape(url)
        return text if status == 200 else ""

    wait_until(
        lambda: (
            metric_value(metrics(), "controller_runtime_reconcile_total", {"controller": "webserver"}) >= len(SPECS)
        ),
        timeout=120,
        message="HEAD's operator to reconcile every WebServer",
    )
    quiet = 0
    deadline = time.monotonic() + 120
    while quiet < 3:
        assert time.monotonic() < deadline, "HEAD's operator's work queue never went quiet"
        text = metrics()
        busy = (
            not text or metric_value(text, "workqueue_depth") or metric_value(text, "controller_runtime_active_workers")
        )
        quiet = 0 if busy else quiet + 1
        time.sleep(1)


def _install_baseline(cluster: Cluster, baseline_tree: Path, baseline_image: str, operator_namespace: str) -> None:
    """The previous release, as its README said to install it: its chart, its image, its values; rolled out."""
    helm(
        cluster,
        "install",
        RELEASE,
        str(baseline_tree / "charts" / "webserver-operator"),
        "-n",
        operator_namespace,
        "--take-ownership",
        "--set",
        f"fullnameOverride={FULLNAME}",
        *_image_values(baseline_image),
    )
    _rolled_out(cluster, operator_namespace)


def _upgrade_to_head(cluster: Cluster, operator_namespace: str, values: str) -> None:
    """``helm upgrade`` of the release to HEAD's chart and image, with ``values`` (one ``--set``)."""
    helm(
        cluster,
        "upgrade",
        RELEASE,
        str(ROOT / "charts" / "webserver-operator"),
        "-n",
        operator_namespace,
        "--set",
        f"fullnameOverride={FULLNAME}",
        "--set",
        values,
        *_image_values(cluster.operator_image),
    )


def test_helm_upgrade_from_the_previous_chart_restarts_no_pods(
    cluster: Cluster, baseline_tree: Path, baseline_image: str, operator_namespace: str, namespace: str
) -> None:
    _install_baseline(cluster, baseline_tree, baseline_image, operator_namespace)
    for name, spec in SPECS:
        cluster.apply(webserver(name, image=cluster.web_images[0], **spec), namespace=namespace)
    for name, _ in SPECS:
        wait_ready(cluster, namespace, name, timeout=180)
    time.sleep(5)  # let the previous operator finish any follow-up reconcile (status after Ready)
    before = _snapshot(cluster, namespace)

    # HEAD's chart and image on the same release; the scraper ServiceAccount may read HEAD's (secure) /metrics.
    reader = "metrics.reader.subjects[0]"
    _upgrade_to_head(
        cluster,
        operator_namespace,
        f"{reader}.kind=ServiceAccount,{reader}.name={SCRAPER},{reader}.namespace={operator_namespace}",
    )
    _rolled_out(cluster, operator_namespace)
    cluster.kubectl("create", "serviceaccount", SCRAPER, "-n", operator_namespace)
    port = cluster.get_json("service", f"{FULLNAME}-metrics", namespace=operator_namespace)["spec"]["ports"][0]["port"]
    scraper = ScraperPod(
        cluster, namespace=operator_namespace, serviceaccount=SCRAPER, image=cluster.operator_image
    ).start()
    _reconciled_and_quiet(scraper, f"https://{FULLNAME}-metrics.{operator_namespace}.svc:{port}/metrics")
    after = _snapshot(cluster, namespace)

    declared = declared_template_changes(CHANGELOG.read_text())
    problems = upgrade_problems(before, after, declared)
    assert not problems, (
        f"`helm upgrade` from the {BASELINE_REF[:7]} chart to HEAD's would restart or rewrite WebServers' children:\n  "
        + "\n  ".join(problems)
        + "\nAvoid the change, or name each pod-template field in CHANGELOG.md's [Unreleased] upgrade notes "
        "(docs/upgrades.md)."
    )


PACED = ("up-paced-a", "up-paced-b", "up-paced-c")
"""WebServers moved by the pacer after `helm upgrade` (two replicas each, so each has a budget and rolls one pod)."""
PACE = 2
"""``templateUpgrade.perMinute`` for the paced upgrade: at most two moves a minute, at most two rolling at once."""


def _rolling(deployment: dict[str, Any]) -> bool:
    """A rollout under way: the controller has not seen the spec yet, or not every pod is updated and available."""
    status = deployment.get("status") or {}
    want = deployment["spec"].get("replicas", 1)
    counts = [status.get(key) or 0 for key in ("updatedReplicas", "availableReplicas", "replicas")]
    observed = (status.get("observedGeneration") or 0) >= deployment["metadata"]["generation"]
    return not observed or counts != [want, want, want]


def _rollout_state(deployment: dict[str, Any]) -> str:
    """One Deployment's revision, generations, replica counts and conditions, for a failure message."""
    status = deployment.get("status") or {}
    counts = {key: status.get(key) for key in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")}
    conditions = [f"{c['type']}={c['status']} {c.get('reason', '')}" for c in status.get("conditions") or []]
    return (
        f"{deployment['metadata']['name']} revision {_revision(deployment)} generation "
        f"{deployment['metadata']['generation']} observed {status.get('observedGeneration')} {counts} {conditions}"
    )


def _revision(deployment: dict[str, Any]) -> int:
    annotations = deployment["metadata"].get("annotations") or {}
    return int(annotations.get(TEMPLATE_REVISION_ANNOTATION, "1"))


@pytest.mark.timeout(1200)
def test_paced_upgrade_from_the_previous_chart_serves_every_request(
    cluster: Cluster, baseline_tree: Path, baseline_image: str, operator_namespace: str, namespace: str
) -> None:
    """`helm upgrade` from the baseline with ``templateUpgrade.perMinute=2``, one WebServer under traffic.

    The pacer moves the three WebServers to the newest template revision on its own; sampled every half second, no
    more than two Deployments are ever rolling at once, all three end at the newest revision, and the WebServer
    under load (tests/support/traffic.py, from inside the control-plane node to its NodePort) answers every request
    from before the upgrade until the last move is done. Its two pods were started by the baseline without the
    preStop pause, so this holds only because its Service stops selecting them before the rollout stops the first
    (``reconcile.handover``): that order is asserted too, read from watches of the pods and the Service (a
    revision-1 pod, without the pause, is terminating too briefly for a loop of ``kubectl get`` to be sure to see).
    """
    # This test's own baseline install: the release the test above upgraded (if it ran) goes first, Lease and all.
    helm(cluster, "uninstall", RELEASE, "-n", operator_namespace, "--wait", "--timeout=120s", check=False)
    cluster.kubectl("delete", "leases", "--all", "-n", operator_namespace, check=False)
    _install_baseline(cluster, baseline_tree, baseline_image, operator_namespace)
    for name in PACED:
        cluster.apply(webserver(name, image=cluster.web_images[0], replicas=2), namespace=namespace)
    for name in PACED:
        wait_ready(cluster, namespace, name, timeout=240)
    deployments = {d["metadata"]["name"]: d for d in cluster.get_json("deployments", namespace=namespace)["items"]}
    assert {name: _revision(deployments[name]) for name in PACED} == dict.fromkeys(PACED, 1)

    most = 0
    samples = 0
    done = False
    instance = f"app.kubernetes.io/instance={PACED[0]}"
    revision_1_pods = {
        p["metadata"]["name"] for p in cluster.get_json("pods", "-l", instance, namespace=namespace)["items"]
    }
    node = next(
        n
        for n in cluster.get_json("nodes")["items"]
        if "node-role.kubernetes.io/control-plane" in n["metadata"].get("labels", {})
    )
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    served = cluster.get_json("webserver", PACED[0], namespace=namespace)
    url = f"http://{address}:{served['status']['nodePort']}/"
    pods = Watch(cluster, "pods", "-l", instance, namespace=namespace)
    service = Watch(cluster, "service", PACED[0], namespace=namespace)
    with pods, service, Load(container_engine(), node["metadata"]["name"], url) as load:
        _upgrade_to_head(cluster, operator_namespace, f"templateUpgrade.perMinute={PACE}")
        deadline = time.monotonic() + 600
        while not done:
            items = cluster.get_json("deployments", namespace=namespace)["items"]
            ours = [d for d in items if d["metadata"]["name"] in PACED]
            if time.monotonic() > deadline:
                logs = cluster.kubectl(
                    "logs", f"deployment/{FULLNAME}", "-n", operator_namespace, "--tail=60", check=False
                )
                pytest.fail(
                    f"the pacer did not move all of {PACED} in 600 s; the Deployments: "
                    + "; ".join(_rollout_state(d) for d in ours)
                    + f"\nthe operator's last log lines:\n{logs.stdout}{logs.stderr}"
                )
            rolling = [d["metadata"]["name"] for d in ours if _rolling(d)]
            most = max(most, len(rolling))
            samples += 1
            assert len(rolling) <= PACE, f"{len(rolling)} Deployments rolling at once with a pace of {PACE}: {rolling}"
            done = len(ours) == len(PACED) and not rolling and all(_revision(d) == TEMPLATE_REVISION for d in ours)
            time.sleep(0.5)
        time.sleep(2)
        tally = load.stop()
    # From the watches (so no short state is missed, and both carry the same delay): when each pod of the loaded
    # WebServer was first marked for deletion, and when its Service first selected only pods with the preStop pause.
    stopping: dict[str, float] = {}
    for event in pods.events():
        if event.type == "DELETED" or event.object["metadata"].get("deletionTimestamp"):
            stopping.setdefault(event.object["metadata"]["name"], event.arrived)
    handed_over = next((e.arrived for e in service.events() if selects_pre_stop_pods(e.object)), None)
    # Those times beside when requests failed (unix seconds).
    print(f"\n{PACED[0]} pods first seen terminating: {sorted((t, n) for n, t in stopping.items())}")
    print(f"{PACED[0]}'s Service selected only pods with the preStop pause from {handed_over}")
    print(f"failed requests at: {[round(t, 1) for t, _ in tally.failures]}")
    print(
        f"\npaced upgrade from {BASELINE_REF[:7]} (perMinute={PACE}, {len(PACED)} WebServers of 2 replicas): "
        f"{tally}; at most {most} rolling at once in {samples} looks"
    )
    assert most >= 1, "no rollout was ever seen: the pacer moved nothing, or the test looked too seldom"
    assert tally.sent > 100, f"the load generator hardly ran: {tally}"
    assert revision_1_pods <= set(stopping), (
        f"the loaded WebServer's revision-1 pods {sorted(revision_1_pods)} were not all stopped by the move: {stopping}"
    )
    assert handed_over is not None, f"{PACED[0]}'s Service never selected only the pods with the preStop pause"
    first_stop = min(stopping[name] for name in revision_1_pods)
    assert handed_over <= first_stop, (
        f"a revision-1 pod was stopping at {first_stop} while the Service still sent it traffic (it "
        f"switched at {handed_over})"
    )
    assert tally.failed == 0, f"requests failed during the paced upgrade: {tally}"
