"""An operator upgrade restarts nobody's pods: the previous release converges 20 WebServers, HEAD takes over, and no
Deployment's pod template changes unless the CHANGELOG's upgrade notes name the change.

Why: the pod template is the one field whose every change rolls out new pods. A release that renders it even
slightly differently (a new default, a reordered field the API server keeps, a label) restarts every WebServer's
pods in the cluster at once when the operator is upgraded; unit tests of the builders compare against the new
rendering and cannot see that. This test compares against what the previous release really left in the cluster.

The previous release is BASELINE_REF, checked out with `git archive` (offline, no worktree left behind) and run from
its own tree with the test's interpreter: PYTHONPATH and the working directory point at the checkout, so its
``webserver_operator`` package is the one imported (checked before the test relies on it). Its CRD is applied first,
then HEAD's, as an upgrade does. No release has been published yet, so there is no tag: BASELINE_REF is commit
cccf780, the state recorded as the 0.1.0 baseline in CHANGELOG.md (the last commit on main before the user-facing
work after it). When a release is tagged, BASELINE_REF becomes that tag and the CHANGELOG's [Unreleased] section
starts over.

What counts as "no restart" (per Deployment, after HEAD's operator has reconciled every WebServer and gone quiet):
- ``metadata.generation`` unchanged: no rollout was started;
- ``spec.template`` unchanged, except for fields the [Unreleased] upgrade notes declare with a
  ``pod-template: <field>`` line (tests/support/upgrades.py, docs/upgrades.md);
- the managedFields entry of the operator's field manager unchanged on the Deployment and the Service: HEAD wrote
  nothing to converged children (the time in that entry changes with any write, even one that changes nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.operator import OperatorProcess
from harness.paths import CRD_FILE, ROOT
from tests.integration.conftest import apply_crd
from tests.support.baseline import extract_tree
from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver
from tests.support.upgrades import CHANGELOG, children_state, declared_template_changes, upgrade_problems
from tests.support.webservers import wait_field, wait_ready
from webserver_operator.desired import TEMPLATE_REVISION_ANNOTATION, UPGRADE_ANNOTATION
from webserver_operator.kube.client import FIELD_MANAGER

BASELINE_REF = "cccf78031ec30c12a8a80469c9d93b38d83774e2"
"""The previous release: the 0.1.0 baseline commit CHANGELOG.md records (no release is published yet)."""
CRD_PATH = CRD_FILE.relative_to(ROOT)
COUNT = 20


def _specs() -> list[tuple[str, dict[str, Any]]]:
    """20 WebServers using every field that reaches the pod template, so a rendering change of any of them shows."""
    restricted = {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    variants: list[dict[str, Any]] = [
        {"replicas": 1},
        {"replicas": 0},
        {"replicas": 2, "port": 8080},
        {"replicas": 1, "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}},
        {"replicas": 1, "imagePullSecrets": [{"name": "regcred"}]},
        {"replicas": 1, "securityContext": restricted},
        {"replicas": 1, "image": "nginx@sha256:" + "ab" * 32},
    ]
    return [(f"web-{i:02d}", variants[i % len(variants)]) for i in range(COUNT)]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BASELINE_REF's tree, extracted with `git archive`."""
    return extract_tree(BASELINE_REF, tmp_path_factory.mktemp("baseline"))


def _baseline_env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    return env


@pytest.fixture
def baseline_crd(cluster: Cluster, crd: str, baseline: Path) -> Iterator[None]:
    """The baseline's CRD for the test; HEAD's again afterwards (the session's other tests expect it)."""
    apply_crd(cluster, baseline / CRD_PATH)
    try:
        yield
    finally:
        apply_crd(cluster, CRD_FILE)


def _snapshot(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    """Per WebServer: its Deployment's generation, pod template and operator managedFields, its Service's entry."""
    return children_state(
        cluster.get_json("deployments", "--show-managed-fields", namespace=namespace)["items"],
        cluster.get_json("services", "--show-managed-fields", namespace=namespace)["items"],
        [name for name, _ in _specs()],
        field_manager=FIELD_MANAGER,
    )


def _reconciled_and_quiet(op: OperatorProcess) -> None:
    """Wait until ``op`` has reconciled every WebServer once and its work queue stayed empty for 2 s."""
    wait_until(
        lambda: op.metric("controller_runtime_reconcile_total", {"controller": "webserver"}) >= COUNT,
        timeout=90,
        message=lambda: f"{COUNT} reconciles by the operator:\n{op.tail()}",
    )
    quiet_since = time.monotonic()
    deadline = quiet_since + 60
    while time.monotonic() - quiet_since < 2:
        assert time.monotonic() < deadline, f"the operator's work queue never went quiet:\n{op.tail()}"
        if op.metric("workqueue_depth") or op.metric("controller_runtime_active_workers"):
            quiet_since = time.monotonic()
        time.sleep(0.2)


def _revisions(cluster: Cluster, namespace: str) -> dict[str, str | None]:
    return {
        d["metadata"]["name"]: (d["metadata"].get("annotations") or {}).get(TEMPLATE_REVISION_ANNOTATION)
        for d in cluster.get_json("deployments", namespace=namespace)["items"]
    }


def _moves_only_what_is_edited_scaled_or_annotated(cluster: Cluster, namespace: str) -> dict[str, str | None]:
    """Template revisions (docs/upgrades.md): after the upgrade every Deployment is still at revision 1; a new image
    (web-00) and the owner's annotation (web-03) move exactly those two to revision 2, a scale (web-01) moves
    nothing. Returns the three Deployments' recorded revisions."""
    assert set(_revisions(cluster, namespace).values()) == {None}, "the upgrade moved a Deployment by itself"
    cluster.kubectl(
        "patch", "webserver", "web-00", "-n", namespace, "--type=merge", "-p", '{"spec":{"image":"nginx:1.28"}}'
    )
    cluster.kubectl("scale", "webserver", "web-01", "-n", namespace, "--replicas=2")
    cluster.kubectl("annotate", "webserver", "web-03", "-n", namespace, f"{UPGRADE_ANNOTATION}=true")
    wait_until(
        lambda: _revisions(cluster, namespace)["web-00"] == _revisions(cluster, namespace)["web-03"] == "2",
        timeout=60,
        message="web-00 (new image) and web-03 (annotated) to move to template revision 2",
    )
    wait_field(cluster, "deployment", "web-01", namespace=namespace, path="spec.replicas", expected=2)
    revisions = _revisions(cluster, namespace)
    others = {name: revision for name, revision in revisions.items() if name not in {"web-00", "web-01", "web-03"}}
    assert set(others.values()) == {None}, others
    return {name: revisions[name] for name in ("web-00", "web-01", "web-03")}


@pytest.mark.usefixtures("baseline_crd")
def test_upgrade_from_the_previous_release_restarts_no_pods(
    cluster: Cluster, namespace: str, baseline: Path, tmp_path: Path
) -> None:
    env = _baseline_env(baseline)
    imported = subprocess.run(
        [sys.executable, "-c", "import webserver_operator; print(webserver_operator.__file__)"],
        cwd=baseline,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(imported).is_relative_to(baseline), f"the baseline run would import {imported}, not {baseline}"

    old = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        args=[f"--namespaces={namespace}"],
        env=env,
        cwd=baseline,
        log_path=tmp_path / "baseline.log",
        before_secure_metrics=True,
    )
    try:
        old.wait_started(timeout=60)
        for name, spec in _specs():
            cluster.apply(webserver(name, **spec), namespace=namespace)
        for name, _ in _specs():
            wait_ready(cluster, namespace, name, timeout=120)
        _reconciled_and_quiet(old)
    finally:
        assert old.stop() == 0, f"the baseline operator did not stop cleanly:\n{old.tail()}"
    before = _snapshot(cluster, namespace)

    apply_crd(cluster, CRD_FILE)
    new = OperatorProcess(
        kubeconfig=cluster.kubeconfig, args=[f"--namespaces={namespace}"], log_path=tmp_path / "head.log"
    )
    try:
        new.wait_started(timeout=60)
        _reconciled_and_quiet(new)
        after = _snapshot(cluster, namespace)
        moved = _moves_only_what_is_edited_scaled_or_annotated(cluster, namespace)
    finally:
        assert new.stop() == 0, f"HEAD's operator did not stop cleanly:\n{new.tail()}"

    assert moved == {"web-00": "2", "web-01": None, "web-03": "2"}, moved
    declared = declared_template_changes(CHANGELOG.read_text())
    problems = upgrade_problems(before, after, declared)
    assert not problems, (
        f"upgrading the operator from {BASELINE_REF[:7]} to HEAD would restart or rewrite WebServers' children:\n  "
        + "\n  ".join(problems)
        + "\nAvoid the change, or apply it only when a WebServer changes (docs/upgrades.md). If a pod-template change "
        "must reach running WebServers, name each field in CHANGELOG.md under [Unreleased], Upgrade notes, Pod "
        "template changes, as a line starting with `pod-template: <field>` in backticks, followed by what changes "
        "and how it rolls out. Writes to converged Services have no such exception."
    )
