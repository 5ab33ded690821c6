"""`make release` from a clean clone to a local OCI registry, and the README's install from what it published.

What runs for real: the refusals, the version bump and its commit and tag, the local registry (crane registry serve,
hack/registry.sh), the digest the registry stored, `helm push` of the chart as an OCI artifact, install.yaml, syft's
SBOM, SHA256SUMS, and `helm install oci://<registry>/charts/webserver-operator --version <released>` on the local
control plane. The image is built for real, from the Dockerfile by hack/images.sh, wherever a container engine
answers (`hack/engine.sh builder`: Docker, or podman as `make engine` installs it; without a reachable base image
hack/images.sh builds its stand-in base): the test then checks the pushed image is the operator's, by its OCI labels.
Only on a machine without any engine is the build faked, to keep the rest of the release tested there: a `docker` on
PATH whose `build` does nothing and whose `push` pushes a one-file image with crane (`engine_faked`). kwok's pods need
no image, so the installed operator's Deployment rolls out here with the released image named by digest, which is
what this test checks (`make e2e-kind` runs a released image: tests/e2e/test_release_install.py).

Each test works in its own `git clone` of HEAD, so the repository under test is never bumped or tagged.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from harness.paths import HACK, ROOT
from tests.support.cluster import Cluster, wait_until

VERSION = "0.2.0"

# docker: answers `info`; the Dockerfile's base is "present"; IMG is not built yet; `build` does nothing; `push IMG`
# pushes a one-file image to IMG with crane (over HTTP: a registry on 127.0.0.1).
FAKE_DOCKER = r"""#!/bin/bash
case "$1" in
info) exit 0 ;;
image)
  for a in "$@"; do [[ "${a}" == *Labels* || "${a}" == *.Id* ]] && exit 1; done
  exit 0
  ;;
build) exit 0 ;;
push)
  dir="$(mktemp -d)"
  echo "webserver-operator release test image" >"${dir}/release.txt"
  tar -C "${dir}" -cf "${dir}/layer.tar" release.txt
  exec "${CRANE}" append -f "${dir}/layer.tar" -t "$2"
  ;;
esac
exit 0
"""


@functools.cache
def engine_faked() -> bool:
    """Whether no container engine answers here (hack/engine.sh builder), so `make release` builds with the fake
    ``docker`` (FAKE_DOCKER)."""
    env = {k: v for k, v in os.environ.items() if k != "ENGINE"}
    found = subprocess.run(
        [str(HACK / "engine.sh"), "builder"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    return found.returncode != 0


@dataclass
class Release:
    repo: Path
    registry: str
    env: dict[str, str]

    def make(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["make", "--no-print-directory", "release", f"VERSION={VERSION}", f"REGISTRY={self.registry}",
             f"PY={sys.executable}", *args],
            cwd=self.repo, env=self.env, capture_output=True, text=True, timeout=1200, check=False,
        )  # fmt: skip

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.repo, env=self.env, capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tool(name: str) -> Path:
    # The release tools are the newest line's build whatever Kubernetes the suite runs on (KUBERNETES_LINE=oldest).
    bindir = subprocess.run(
        [str(HACK / "tools.sh"), "bindir"],
        env={**os.environ, "KUBERNETES_LINE": "newest"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    path = Path(bindir) / name
    assert path.exists(), f"{path} is not built: run `make tools-release` (make test and make test-integration do)"
    return path


@pytest.fixture
def release(cluster: Cluster, tmp_path: Path) -> Iterator[Release]:
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-local", str(ROOT), str(repo)], check=True, timeout=300)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if engine_faked():
        (bin_dir / "docker").write_text(FAKE_DOCKER)
        (bin_dir / "docker").chmod(0o755)
    name = f"test-{uuid.uuid4().hex[:8]}"
    address = f"127.0.0.1:{_free_port()}"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("IMG", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "ENGINE")},
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CRANE": str(_tool("crane")),
        "HELM": str(cluster.helm_path),
        "KUBECTL": str(cluster.kubectl_path),
        "KUBERNETES_LINE": "newest",
        "REGISTRY_NAME": name,
        "REGISTRY_ADDRESS": address,
        "GIT_AUTHOR_NAME": "release test", "GIT_AUTHOR_EMAIL": "release@test.invalid",
        "GIT_COMMITTER_NAME": "release test", "GIT_COMMITTER_EMAIL": "release@test.invalid",
    }  # fmt: skip
    _tool("syft")
    up = subprocess.run(
        [str(HACK / "registry.sh"), "up"], env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    assert up.returncode == 0, up.stderr
    try:
        yield Release(repo=repo, registry=up.stdout.strip(), env=env)
    finally:
        subprocess.run([str(HACK / "registry.sh"), "down"], env=env, capture_output=True, timeout=60, check=False)


@pytest.mark.timeout(1800)  # the real image build: minutes on a busy 2-core machine
def test_release_publishes_the_image_by_digest_and_the_chart_that_installs_it(
    release: Release, cluster: Cluster
) -> None:
    result = release.make()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]

    # The bump is one commit, tagged, on a clean tree.
    assert release.git("log", "-1", "--format=%s") == f"Release {VERSION}"
    assert release.git("tag", "--points-at", "HEAD") == f"v{VERSION}"
    assert release.git("status", "--porcelain") == ""
    chart = yaml.safe_load((release.repo / "charts/webserver-operator/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)
    changelog = (release.repo / "CHANGELOG.md").read_text()
    assert changelog.index("## [Unreleased]") < changelog.index(f"## [{VERSION}] - ") < changelog.index("## [0.1.0]")
    # The release commit keeps the repository's own checks of versions, images and the changelog passing.
    checks = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/repo/test_repository.py",
         "tests/unit/test_cli.py", "tests/unit/chart/test_chart_metadata.py", "tests/unit/docs"],
        cwd=release.repo, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert checks.returncode == 0, checks.stdout[-5000:]

    # The image the registry stored, by digest, everywhere the release names it.
    digest = subprocess.run(
        [release.env["CRANE"], "digest", f"{release.registry}/webserver-operator:{VERSION}"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    pinned = f"{release.registry}/webserver-operator@{digest}"
    if not engine_faked():
        # The image the Dockerfile builds: its labels name the released version and the release commit.
        config = json.loads(
            subprocess.run(
                [release.env["CRANE"], "config", pinned], capture_output=True, text=True, check=True, timeout=60
            ).stdout
        )
        labels = config["config"]["Labels"]
        assert labels["org.opencontainers.image.title"] == "webserver-operator", labels
        assert labels["org.opencontainers.image.version"] == VERSION, labels
        assert config["config"]["Entrypoint"] == ["webserver-operator", "run"], config["config"]
    dist = release.repo / "dist"
    install = list(yaml.safe_load_all((dist / "install.yaml").read_text()))
    (deployment,) = [d for d in install if d and d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == pinned
    sbom = json.loads((dist / f"webserver-operator-{VERSION}.spdx.json").read_text())
    assert sbom["spdxVersion"].startswith("SPDX-") and digest.split(":")[1] in json.dumps(sbom)
    sums = {
        name: checksum for checksum, name in (line.split() for line in (dist / "SHA256SUMS").read_text().splitlines())
    }
    assert set(sums) == {f"webserver-operator-{VERSION}.tgz", "install.yaml", f"webserver-operator-{VERSION}.spdx.json"}
    for file, checksum in sums.items():
        assert hashlib.sha256((dist / file).read_bytes()).hexdigest() == checksum, file

    # The README's install, from the registry: the operator runs the released image by digest.
    namespace = f"t-release-{uuid.uuid4().hex[:6]}"
    helm = [str(cluster.helm_path), "--kubeconfig", str(cluster.kubeconfig)]
    installed = subprocess.run(
        [*helm, "install", "webserver-operator", f"oci://{release.registry}/charts/webserver-operator",
         "--version", VERSION, "-n", namespace, "--create-namespace", "--plain-http", "--take-ownership",
         "--wait", "--timeout", "3m"],
        capture_output=True, text=True, timeout=330, check=False,
    )  # fmt: skip
    try:
        assert installed.returncode == 0, installed.stderr
        deployed = wait_until(
            lambda: cluster.get_or_none("deployment", "webserver-operator", namespace=namespace),
            timeout=30,
            message="the operator Deployment",
        )
        assert deployed["spec"]["template"]["spec"]["containers"][0]["image"] == pinned
        pulled = subprocess.run(
            [*helm, "show", "chart", f"oci://{release.registry}/charts/webserver-operator", "--version", VERSION,
             "--plain-http"],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
        images = yaml.safe_load(yaml.safe_load(pulled)["annotations"]["artifacthub.io/images"])
        assert images == [{"name": "webserver-operator", "image": pinned}]
    finally:
        subprocess.run(
            [*helm, "uninstall", "webserver-operator", "-n", namespace], capture_output=True, timeout=120, check=False
        )
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)


def test_release_refuses_a_dirty_tree(release: Release) -> None:
    (release.repo / "README.md").write_text((release.repo / "README.md").read_text() + "\nlocal edit\n")
    result = release.make()
    assert result.returncode != 0
    assert "the working tree has uncommitted changes" in result.stderr, result.stderr
    assert release.git("tag") == "" and "README.md" in release.git("status", "--porcelain")


def test_release_refuses_an_unlisted_pod_template_change(release: Release) -> None:
    desired = release.repo / "webserver_operator" / "desired.py"
    text = desired.read_text()
    assert '"enableServiceLinks": False,' in text
    desired.write_text(
        text.replace('"enableServiceLinks": False,', '"enableServiceLinks": False, "hostIPC": False,', 1)
    )
    release.git("commit", "-qam", "a pod-template change without upgrade notes")
    result = release.make()
    assert result.returncode != 0
    assert "spec.template.spec.hostIPC" in result.stderr and "pod-template: <field>" in result.stderr, result.stderr
    assert release.git("tag") == "" and release.git("status", "--porcelain") == ""
    if engine_faked():
        assert shutil.which("docker", path=release.env["PATH"])  # the fake was there; nothing was built or pushed
    assert not (release.repo / "dist").exists()
