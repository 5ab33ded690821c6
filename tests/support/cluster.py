"""Test cluster backends and a kubectl wrapper that always uses the project's own kubectl.

Why a wrapper around the kubectl binary rather than the Python client for test setup and assertions: the tests
assert what a user would see with `kubectl get`, and they must not depend on the operator's own client code (a bug
there would otherwise hide itself). The kubectl used is the one built by hack/tools.sh: the machine's PATH may hold
an older one that cannot talk to a 1.36 API server properly.

Backends (environment variable CLUSTER):
- ``local`` (default): the control plane built from Go modules (hack/cluster.sh), reused when already running,
  otherwise started for the session and stopped at its end. Never the demo's cluster (hack/demo.sh runs its own).
- ``existing``: a cluster you own, named explicitly with KUBE_CONTEXT (the suites install cluster-scoped objects,
  so there is no silent default).
- ``kind``: a kind cluster (hack/kind.sh) whose pods are real containers, on a machine with a container engine that
  runs privileged containers (hack/engine.sh: Docker, else rootful podman; `make engine` installs one). It is reused
  when already running (`make e2e-kind` starts it first, so its long first build shows its progress), otherwise
  started for the session and deleted at its end.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from harness.paths import HACK, tools_bin
from webserver_operator import __version__

T = TypeVar("T")


class ClusterUnavailableError(RuntimeError):
    """The requested test cluster cannot be provided; the message says why and what to do."""


DEFAULT_OPERATOR_IMAGE = f"localhost/webserver-operator:{__version__}"
"""The Makefile's default IMG: what hack/kind.sh builds and loads into kind unless IMG names another image (so a
suite run by pytest directly on a cluster `make e2e-kind` kept uses the image it loaded)."""
DEFAULT_WEB_IMAGES = ("nginx:1.27", "nginx:1.28")
"""The web server images WebServers run (the sample's, then the one an image change moves to) where no container
runs them (local control plane); kind clusters get theirs from hack/kind.sh web-images."""


def container_engine() -> str:
    """The engine kind uses here (``docker`` or ``podman``), by the rule of hack/engine.sh, which every script shares:
    Docker only when a --privileged container starts, else podman. Raises ClusterUnavailableError saying what to do."""
    try:
        result = subprocess.run(
            [str(HACK / "engine.sh"), "detect"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ClusterUnavailableError(f"hack/engine.sh detect did not answer: {err}") from err
    if result.returncode != 0:
        raise ClusterUnavailableError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "no engine")
    return result.stdout.strip()


@dataclass
class Cluster:
    """A reachable Kubernetes cluster: its kubeconfig (and context) plus the kubectl to talk to it."""

    backend: str
    kubeconfig: Path
    context: str | None = None
    bin_dir: Path = field(default_factory=tools_bin)
    started_here: bool = False
    operator_image: str = DEFAULT_OPERATOR_IMAGE
    web_images: tuple[str, str] = DEFAULT_WEB_IMAGES

    @property
    def runs_containers(self) -> bool:
        """True where pods are real containers (kind); the local control plane's kwok nodes only simulate them."""
        return self.backend == "kind"

    @property
    def kubectl_path(self) -> Path:
        return self.bin_dir / "kubectl"

    @property
    def helm_path(self) -> Path:
        return self.bin_dir / "helm"

    def kubectl_args(self) -> list[str]:
        args = [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig)]
        if self.context:
            args += ["--context", self.context]
        return args

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl; with check=True a failure raises with kubectl's own stderr in the message."""
        cmd = [*self.kubectl_args(), *args]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
        return result

    def get_json(self, *args: str, namespace: str | None = None) -> dict[str, Any]:
        ns = ["-n", namespace] if namespace else []
        out = self.kubectl("get", *args, *ns, "-o", "json")
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def get_or_none(self, kind: str, name: str, *, namespace: str) -> dict[str, Any] | None:
        out = self.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found", check=True)
        if not out.stdout.strip():
            return None
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def apply(self, manifest: dict[str, Any] | str, *, namespace: str | None = None) -> None:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        ns = ["-n", namespace] if namespace else []
        self.kubectl("apply", *ns, "-f", "-", input=text)

    @contextlib.contextmanager
    def temporary_namespace(self, prefix: str, *, labels: dict[str, str] | None = None) -> Iterator[str]:
        """A fresh namespace ``<prefix>-<random>`` (test-labelled), deleted without waiting afterwards."""
        name = f"{prefix[:50].rstrip('-')}-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", name)
        all_labels = {"webserver-operator.dev/test": "true", **(labels or {})}
        self.kubectl("label", "namespace", name, *(f"{k}={v}" for k, v in all_labels.items()))
        try:
            yield name
        finally:
            self.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)

    def serviceaccount_kubeconfig(self, *, namespace: str, serviceaccount: str, path: Path) -> Path:
        """A kubeconfig that authenticates as the ServiceAccount (TokenRequest), for RBAC-true runs."""
        token = self.kubectl("create", "token", serviceaccount, "-n", namespace, "--duration=2h").stdout.strip()
        admin = json.loads(self.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "cluster", "cluster": admin["clusters"][0]["cluster"]}],
            "users": [{"name": serviceaccount, "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "cluster", "user": serviceaccount}}],
            "current-context": "sa",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def env(self) -> dict[str, str]:
        """Environment for child processes (operator, helm) that should talk to this cluster."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        return env


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.25,
    message: str | Callable[[], str] = "condition not met",
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``message`` (and the last value) on timeout."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:.0f}s: {text} (last: {last!r})")
        time.sleep(interval)


def _run_hack(args: Sequence[str], *, timeout: float) -> None:
    result = subprocess.run(
        [str(HACK / args[0]), *args[1:]], capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise ClusterUnavailableError(
            f"hack/{' '.join(args)} failed ({result.returncode}):\n{result.stderr[-4000:]}\n"
            "Fix the error above, or run `make cluster-down` to clear a broken cluster and try again."
        )


def local_cluster_running() -> bool:
    result = subprocess.run([str(HACK / "cluster.sh"), "status"], capture_output=True, timeout=60, check=False)
    return result.returncode == 0


def local_kubeconfig() -> Path:
    out = subprocess.run([str(HACK / "cluster.sh"), "kubeconfig"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def demo_kubeconfig() -> Path:
    """Where `make demo`'s own cluster keeps its kubeconfig (hack/demo.sh names that cluster)."""
    out = subprocess.run([str(HACK / "demo.sh"), "kubeconfig"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def provide_cluster(backend: str) -> Cluster:
    """Return a ready cluster for ``backend``; the caller stops it with ``release_cluster`` if started here."""
    if backend == "local":
        if local_kubeconfig() == demo_kubeconfig():
            raise ClusterUnavailableError(
                f"CLUSTER_NAME={os.environ.get('CLUSTER_NAME', '')!r} names the cluster of `make demo`: the test "
                "suites never share a cluster (or an operator) with the demo. Unset CLUSTER_NAME to use the tests' "
                "own cluster, or pick another name."
            )
        if local_cluster_running():
            return Cluster(backend="local", kubeconfig=local_kubeconfig())
        _run_hack(["cluster.sh", "up"], timeout=3600)
        return Cluster(backend="local", kubeconfig=local_kubeconfig(), started_here=True)
    if backend == "existing":
        context = os.environ.get("KUBE_CONTEXT", "")
        if not context:
            raise ClusterUnavailableError(
                "CLUSTER=existing needs KUBE_CONTEXT=<context name>: the suites install cluster-scoped objects "
                "(the CRD, ClusterRoles), so they only run against a context you name explicitly."
            )
        kubeconfig = Path(os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config")).split(os.pathsep)[0])
        return Cluster(backend="existing", kubeconfig=kubeconfig, context=context)
    if backend == "kind":
        container_engine()
        running = subprocess.run([str(HACK / "kind.sh"), "status"], capture_output=True, timeout=120, check=False)
        if running.returncode != 0:
            _run_hack(["kind.sh", "up"], timeout=3600)
        return Cluster(
            backend="kind",
            kubeconfig=Path(_hack_output("kind.sh", "kubeconfig")),
            started_here=running.returncode != 0,
            operator_image=os.environ.get("IMG") or DEFAULT_OPERATOR_IMAGE,
            web_images=_web_images(),
        )
    raise ClusterUnavailableError(f"unknown CLUSTER={backend!r}: use local (default), existing or kind")


def _hack_output(*args: str) -> str:
    return subprocess.run([str(HACK / args[0]), *args[1:]], check=True, capture_output=True, text=True).stdout.strip()


def _web_images() -> tuple[str, str]:
    lines = _hack_output("kind.sh", "web-images").splitlines()
    if len(lines) != 2:
        raise ClusterUnavailableError(f"hack/kind.sh web-images printed {lines}, expected two image names")
    return lines[0], lines[1]


def release_cluster(cluster: Cluster) -> None:
    if not cluster.started_here or os.environ.get("KEEP_CLUSTER"):
        return
    script = "cluster.sh" if cluster.backend == "local" else "kind.sh"
    _run_hack([script, "down"], timeout=300)
