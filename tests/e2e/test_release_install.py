"""The README's install block, as written, on kind from a local registry: `make release`, install, serve, upgrade.

Issue 33's acceptance: a user with a cluster in hand runs the README's first screen against a published release.
Here the release is published for real: `make release VERSION=<the README's VERSION> REGISTRY=<local registry>` in a
clone of HEAD builds the operator image with the container engine, pushes it and the OCI chart to a registry on this
machine (hack/registry.sh: crane's, listening on every address so the kind nodes reach it at their network's
gateway; `hack/kind.sh registry-hosts` points each node's containerd there over HTTP). Then the README's install block,
parsed from README.md (tests/support/readme.py) so the test breaks when the README drifts, runs as one shell script
with only ``<registry>`` substituted: `helm install oci://...`, the unprivileged sample, `kubectl wait`,
`kubectl port-forward` and `curl` of the page. Finally a second `make release` (the next patch version) and
`helm upgrade` of the same release to it: the sample's pods are the same pods afterwards, none restarted.

What the machine around the block provides, as a user's would: KUBECONFIG for the kind cluster; kubectl and helm
on PATH, where ``helm`` adds ``--plain-http`` to the commands that name the local registry (it speaks HTTP, as a
registry on localhost usually does; a published registry such as ghcr.io needs nothing); the CRD left by earlier e2e
tests marked for adoption by the block's release (as in test_readme_quickstart.py); and, because this machine cannot
pull Docker Hub, the suite's stand-in nginx rebuilt to listen on 8080 and loaded under the sample's image name.

kind only (``kind`` marker): real image builds, real pulls from the registry.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from harness.paths import HACK, ROOT
from tests.e2e.test_readme_quickstart import _adopt_crd, _disown_crd, _kind_cluster_name, load_into_kind
from tests.support.cluster import Cluster, container_engine, wait_until
from tests.support.readme import first_screen_blocks
from tests.support.webservers import condition

pytestmark = pytest.mark.kind

SAMPLE = ROOT / "config" / "samples" / "web_v1_webserver_unprivileged.yaml"

HELM_WRAPPER = r"""#!/bin/bash
# helm, talking plain HTTP to the local registry of this test (REGISTRY_HOST) and to nothing else.
for a in "$@"; do
  if [[ "$a" == "oci://${REGISTRY_HOST}/"* ]]; then exec "${REAL_HELM}" "$@" --plain-http; fi
done
exec "${REAL_HELM}" "$@"
"""


@dataclass
class Published:
    repo: Path
    registry: str
    env: dict[str, str]

    def release(self, version: str) -> None:
        result = subprocess.run(
            ["make", "--no-print-directory", "release", f"VERSION={version}", f"REGISTRY={self.registry}",
             f"PY={sys.executable}"],
            cwd=self.repo, env=self.env, capture_output=True, text=True, timeout=2400, check=False,
        )  # fmt: skip
        assert result.returncode == 0, (
            f"make release VERSION={version} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # the registry then listens on every address at this port
        port: int = s.getsockname()[1]
        return port


def _install_block() -> list[str]:
    install, _ = first_screen_blocks()
    return install


def _block_value(commands: list[str], variable: str) -> str:
    (value,) = [c.split("=", 1)[1].strip() for c in commands if c.startswith(f"{variable}=")]
    return value


def _release_of(commands: list[str]) -> tuple[str, str]:
    """The release name and namespace of the block's `helm install`."""
    (install,) = [shlex.split(c) for c in commands if c.startswith("helm install")]
    return install[2], install[install.index("-n") + 1]


def _sample_image() -> str:
    image: str = yaml.safe_load(SAMPLE.read_text())["spec"]["image"]
    return image if "/" in image.split("/", 1)[0] or "." in image.split("/", 1)[0] else f"docker.io/{image}"


def _load_sample_stand_in(cluster: Cluster, tmp_path: Path) -> None:
    """The stand-in nginx (hack/images/nginx.Containerfile, uid 33) on 8080, named like the sample's image."""
    engine = container_engine()
    context = tmp_path / "sample-image"
    context.mkdir()
    (context / "Containerfile").write_text(
        f"FROM {cluster.web_images[0]}\n"
        "USER 0\n"
        "RUN sed -i 's/listen 80;/listen 8080;/' /etc/nginx/nginx.conf \\\n"
        "    && nginx -t -c /etc/nginx/nginx.conf && rm -rf /tmp/*\n"  # nginx -t as root leaves its pid file
        "USER 33:33\n"
        "EXPOSE 8080\n"
    )
    image = _sample_image()
    subprocess.run(
        [engine, "build", "-t", image, "-f", str(context / "Containerfile"), str(context)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    load_into_kind(image, tmp_path)


@pytest.fixture
def published(cluster: Cluster, tmp_path: Path) -> Iterator[Published]:
    """A local registry the kind nodes pull from, and a clone of HEAD to release from."""
    port = _free_port()
    name = f"e2e-release-{uuid.uuid4().hex[:6]}"
    env = {
        **{k: v for k, v in cluster.env().items() if k not in ("IMG", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "CLUSTER")},
        "REGISTRY_NAME": name,
        "REGISTRY_ADDRESS": f"0.0.0.0:{port}",
        "KIND_CLUSTER_NAME": _kind_cluster_name(),
        "KUBERNETES_LINE": "newest",
        "GIT_AUTHOR_NAME": "release test", "GIT_AUTHOR_EMAIL": "release@test.invalid",
        "GIT_COMMITTER_NAME": "release test", "GIT_COMMITTER_EMAIL": "release@test.invalid",
    }  # fmt: skip
    up = subprocess.run(
        [str(HACK / "registry.sh"), "up"], env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    assert up.returncode == 0, up.stderr
    registry = up.stdout.strip().splitlines()[-1]
    try:
        hosts = subprocess.run(
            [str(HACK / "kind.sh"), "registry-hosts"],
            env={**env, "KIND_REGISTRY": registry}, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert hosts.returncode == 0, hosts.stderr
        repo = tmp_path / "repo"
        subprocess.run(["git", "clone", "-q", "--no-local", str(ROOT), str(repo)], check=True, timeout=300)
        yield Published(repo=repo, registry=registry, env=env)
    finally:
        subprocess.run([str(HACK / "registry.sh"), "down"], env=env, capture_output=True, timeout=60, check=False)


def _user_env(cluster: Cluster, published: Published, tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "user-bin"
    bin_dir.mkdir()
    (bin_dir / "helm").write_text(HELM_WRAPPER)
    (bin_dir / "helm").chmod(0o755)
    env = cluster.env()
    for inherited in ("IMG", "CLUSTER", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "KUBE_CONTEXT"):
        env.pop(inherited, None)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["REAL_HELM"] = str(cluster.helm_path)
    env["REGISTRY_HOST"] = published.registry
    return env


def _sample_pods(cluster: Cluster) -> dict[str, int]:
    """The sample's pods: uid -> restarts of its containers."""
    items = cluster.get_json("pods", "-l", "app.kubernetes.io/instance=webserver-unprivileged", namespace="default")
    return {
        p["metadata"]["uid"]: sum(s.get("restartCount", 0) for s in p["status"].get("containerStatuses") or [])
        for p in items["items"]
        if not p["metadata"].get("deletionTimestamp")
    }


@pytest.mark.timeout(3600)
def test_readme_install_block_from_a_release_on_kind_then_helm_upgrade_restarts_nothing(
    cluster: Cluster, published: Published, tmp_path: Path
) -> None:
    block = _install_block()
    version = _block_value(block, "VERSION")
    release, namespace = _release_of(block)
    published.release(version)
    _load_sample_stand_in(cluster, tmp_path)
    _adopt_crd(cluster, release, namespace)
    script = "\n".join(c.replace("<registry>", published.registry) for c in block)
    env = _user_env(cluster, published, tmp_path)
    try:
        # One script, as a user pastes the block: REGISTRY and VERSION carry from line to line. Its own session, so
        # the port-forward it leaves running is stopped with it; its output goes to files, which that port-forward
        # keeps open after the script has ended (a pipe would never reach its end).
        out_path, err_path = tmp_path / "block.out", tmp_path / "block.err"
        with out_path.open("w") as out_file, err_path.open("w") as err_file:
            process = subprocess.Popen(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=published.repo, env=env, stdout=out_file, stderr=err_file, text=True, start_new_session=True,
            )  # fmt: skip
            try:
                code = process.wait(timeout=900)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        out, err = out_path.read_text(), err_path.read_text()
        assert code == 0, f"the README's install block failed ({code}):\n{out[-3000:]}\n{err[-3000:]}"
        assert "Welcome to nginx" in out, f"curl of the sample's page through port-forward printed:\n{out[-2000:]}"
        ws = cluster.get_json("webserver", "webserver-unprivileged", namespace="default")
        ready = condition(ws)
        assert ready is not None and ready["status"] == "True", ws.get("status")
        operator = cluster.get_json("deployment", release, namespace=namespace)
        image = operator["spec"]["template"]["spec"]["containers"][0]["image"]
        assert re.fullmatch(rf"{re.escape(published.registry)}/webserver-operator@sha256:[0-9a-f]{{64}}", image), image

        # The next release, and `helm upgrade` to it: the sample's pods stay the same pods.
        before = _sample_pods(cluster)
        assert len(before) == 2 and set(before.values()) == {0}, before
        deployment = cluster.get_json("deployment", "webserver-unprivileged", namespace="default")
        major, minor, patch = (int(p) for p in version.split("."))
        following = f"{major}.{minor}.{patch + 1}"
        published.release(following)
        upgraded = subprocess.run(
            ["helm", "upgrade", release, f"oci://{published.registry}/charts/webserver-operator", "--version",
             following, "-n", namespace, "--wait", "--timeout", "5m"],
            env=env, capture_output=True, text=True, timeout=360, check=False,
        )  # fmt: skip
        assert upgraded.returncode == 0, upgraded.stderr
        operator = cluster.get_json("deployment", release, namespace=namespace)
        assert operator["spec"]["template"]["spec"]["containers"][0]["image"] != image, "the upgrade changed nothing"
        # The new operator has reconciled the sample (its status names the generation it saw) and gone quiet.
        wait_until(
            lambda: (
                cluster.get_json("pods", "-l", "app.kubernetes.io/name=webserver-operator", namespace=namespace)[
                    "items"
                ]
                and condition(cluster.get_json("webserver", "webserver-unprivileged", namespace="default"))
            ),
            timeout=60,
            message="the upgraded operator",
        )
        time.sleep(20)
        after = _sample_pods(cluster)
        assert after == before, (
            f"`helm upgrade` to {following} restarted or replaced the sample's pods: {before} -> {after}"
        )
        again = cluster.get_json("deployment", "webserver-unprivileged", namespace="default")
        assert again["metadata"]["generation"] == deployment["metadata"]["generation"]
        assert again["spec"]["template"] == deployment["spec"]["template"]
    finally:
        cluster.kubectl("delete", "-f", str(SAMPLE), "-n", "default", "--ignore-not-found", check=False)
        subprocess.run(
            [str(cluster.helm_path), "--kubeconfig", str(cluster.kubeconfig), "uninstall", release, "-n", namespace,
             "--wait", "--timeout", "120s"],
            capture_output=True, timeout=300, check=False,
        )  # fmt: skip
        _disown_crd(cluster)
