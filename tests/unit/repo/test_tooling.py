"""The Makefile and hack/ scripts build only what a target runs, use the user's own tools, and explain what is missing.

Each test runs the real `make` or script on a machine simulated by PATH: a folder of links to every command of
/usr/bin except the ones the test takes away (go, kubectl, helm, kind) or replaces with a fake that records its
arguments. Nothing here needs a cluster, a built tool or a network: a fake `go` answers the few questions
hack/tools.sh asks and records what it was told to build, and a fake engine and kind record what is loaded where.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from harness.paths import ROOT

HACK = ROOT / "hack"
# Taken away from the simulated machine unless a test puts (a fake of) them back.
USER_TOOLS = frozenset({"go", "kubectl", "helm", "kind", "docker", "podman"})


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)
    return path


class Machine:
    """A PATH with the system's commands minus USER_TOOLS, plus fakes; a cache folder of its own."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.record = tmp_path / "record.log"
        self.record.touch()
        for folder in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
            for entry in sorted(Path(folder).iterdir()) if Path(folder).is_dir() else []:
                target = self.bin / entry.name
                if entry.name not in USER_TOOLS and not target.exists():
                    target.symlink_to(entry)
        python = self.bin / "python3"
        python.unlink(missing_ok=True)
        python.symlink_to(sys.executable)

    def fake(self, name: str, body: str) -> Path:
        """A command that appends `name args...` to the record, then runs ``body``."""
        (self.bin / name).unlink(missing_ok=True)
        return _script(self.bin / name, f'echo "{name} $*" >>"{self.record}"\n{body}')

    def fake_versioned(self, name: str, version: str) -> Path:
        """kubectl/helm/kind answering their version command with ``version``."""
        lines = {
            "kubectl": f'[[ "$1" == version ]] && {{ echo "Client Version: {version}"; exit 0; }}',
            "helm": f'[[ "$1" == version ]] && {{ echo "{version}+gdeadbeef"; exit 0; }}',
            "kind": f'[[ "$1" == version ]] && {{ echo "kind {version} go1.26.0 linux/amd64"; exit 0; }}',
        }
        return self.fake(name, lines[name] + "\nexit 0\n")

    def fake_go(self) -> Path:
        """A `go` that answers hack/tools.sh's questions and records what it builds (creating nothing)."""
        gomod = self.root / "kubernetes.go.mod"
        gomod.write_text("module k8s.io/kubernetes\n")
        return self.fake(
            "go",
            f"""case "$1 $2" in
"env GOVERSION") printf 'go1.26.0\\nlinux\\namd64\\n' ;;
"mod download") echo '{{"GoMod": "{gomod}"}}' ;;
"mod edit") [[ "$3" == -json ]] && echo '{{"Replace": []}}' ;;
esac
exit 0
""",
        )

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": str(self.bin),
            "HOME": str(self.root / "home"),
            "XDG_CACHE_HOME": str(self.root / "cache"),
            "LANG": "C.UTF-8",
        }
        env.update(extra)
        return env

    def run(self, *cmd: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(cmd), cwd=ROOT, env=self.env(**extra), capture_output=True, text=True, timeout=120, check=False
        )

    def make(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return self.run("make", "--no-print-directory", *args, **extra)

    def recorded(self, name: str) -> list[str]:
        return [line for line in self.record.read_text().splitlines() if line.startswith(f"{name} ")]


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def _built_packages(machine: Machine) -> str:
    return "\n".join(line for line in machine.recorded("go") if line.startswith(("go install", "go build")))


def _assert_no_tool_build(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr
    assert "tools.sh build" not in result.stdout, result.stdout
    assert "command not found" not in result.stderr, result.stderr


# -- kubectl and helm: the user's own


def test_deploy_with_the_users_kubectl_and_helm_builds_nothing(machine: Machine) -> None:
    machine.fake_versioned("kubectl", "v1.34.2")
    machine.fake_versioned("helm", "v3.19.0")
    result = machine.make("-n", "deploy", "KUBECTL=kubectl", "HELM=helm")
    _assert_no_tool_build(result)
    assert "KUBECTL='kubectl' hack/install.sh deploy" in result.stdout


@pytest.mark.parametrize("target", ["install", "uninstall", "deploy", "undeploy", "build-installer"])
def test_a_recent_kubectl_on_path_is_picked_and_named(machine: Machine, target: str) -> None:
    kubectl = machine.fake_versioned("kubectl", "v1.35.4")
    result = machine.make("-n", target)
    _assert_no_tool_build(result)
    assert f"KUBECTL='{kubectl}'" in result.stdout
    assert f"kubectl: v1.35.4 from PATH ({kubectl})" in result.stderr


def test_chart_package_picks_a_recent_helm_on_path(machine: Machine) -> None:
    helm = machine.fake_versioned("helm", "v4.0.1")
    result = machine.make("-n", "chart-package")
    _assert_no_tool_build(result)
    assert f"{helm} lint --strict charts/webserver-operator" in result.stdout
    assert "helm: v4.0.1 from PATH" in result.stderr


def test_an_old_kubectl_on_path_is_replaced_by_the_projects_build_and_only_kubectl_is_built(machine: Machine) -> None:
    machine.fake_versioned("kubectl", "v1.25.0")
    machine.fake_go()
    result = machine.make("-n", "deploy")
    assert result.returncode == 0, result.stderr
    assert "older than v1.34.0: using the project's build instead" in result.stderr
    builds = [line for line in result.stdout.splitlines() if "tools.sh build" in line]
    assert builds == ["hack/tools.sh build kubectl"], result.stdout


def test_no_kubectl_and_no_go_says_how_to_get_either(machine: Machine) -> None:
    result = machine.make("deploy")
    assert result.returncode != 0
    assert "command not found" not in result.stderr, result.stderr
    assert "go is not on PATH: install Go >= 1.26" in result.stderr
    assert "or put kubectl >= v1.34.0 on PATH (or pass KUBECTL=<path>)" in result.stderr


def test_undeploy_needs_no_image(machine: Machine) -> None:
    machine.fake_versioned("kubectl", "v1.34.2")
    result = machine.make("-n", "undeploy", "KUBECTL=kubectl")
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if "hack/install.sh undeploy" in line]
    assert "IMG=" not in line


def test_install_script_undeploys_without_img_and_still_refuses_deploy_without_it(machine: Machine) -> None:
    # A kubectl that renders kustomize output by cat-ing the overlay (enough to see which image it asks for) and
    # records deletions; the script runs for real.
    machine.fake(
        "kubectl",
        """case "$1" in
version) echo "Client Version: v1.34.2" ;;
kustomize) cat "$2/kustomization.yaml" ;;
esac
exit 0
""",
    )
    env = {"KUBECTL": str(machine.bin / "kubectl")}
    undeploy = machine.run(str(HACK / "install.sh"), "undeploy", **env)
    assert undeploy.returncode == 0, undeploy.stderr
    deletes = [line for line in machine.recorded("kubectl") if line.startswith("kubectl delete")]
    assert len(deletes) == 1, machine.recorded("kubectl")
    deploy = machine.run(str(HACK / "install.sh"), "deploy", **env)
    assert deploy.returncode != 0
    assert "IMG is not set: pass IMG=<registry>/webserver-operator:<tag>" in deploy.stderr


# -- Go and Python: their own messages first


@pytest.mark.parametrize("command", [["build"], ["build", "kubectl"], ["build", "cluster"], ["ensure", "helm"]])
def test_tools_without_go_says_to_install_go_first(machine: Machine, command: list[str]) -> None:
    result = machine.run(str(HACK / "tools.sh"), *command)
    assert result.returncode != 0
    assert "command not found" not in result.stderr, result.stderr
    first_error = next(line for line in result.stderr.splitlines() if "ERROR" in line)
    assert "go is not on PATH: install Go >= 1.26" in first_error


def test_tools_bindir_works_without_go(machine: Machine) -> None:
    result = machine.run(str(HACK / "tools.sh"), "bindir")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(str(machine.root / "cache" / "webserver-operator" / "tools"))
    assert result.stderr == ""


def test_tools_refuses_an_unknown_tool_before_building_anything(machine: Machine) -> None:
    machine.fake_go()
    result = machine.run(str(HACK / "tools.sh"), "build", "kwok", "kubeclt")
    assert result.returncode != 0
    assert "unknown tool 'kubeclt': use kubectl, helm" in result.stderr
    assert _built_packages(machine) == ""


def test_venv_without_python_says_to_install_python(machine: Machine, tmp_path: Path) -> None:
    result = machine.make("venv", "PYTHON=python3.99", f"VENV={tmp_path / 'venv'}")
    assert result.returncode != 0
    assert "python3.99 is not on PATH: install Python >= 3.11" in result.stderr
    assert not (tmp_path / "venv").exists()


def test_venv_with_an_old_python_says_which_version_it_found(machine: Machine, tmp_path: Path) -> None:
    old = _script(
        tmp_path / "python-old",
        """for a in "$@"; do [[ "$a" == *platform* ]] && { echo 3.9.18; exit 0; }; done
exit 1
""",
    )
    result = machine.make("venv", f"PYTHON={old}", f"VENV={tmp_path / 'venv'}")
    assert result.returncode != 0
    assert "is Python 3.9.18; the project needs >= 3.11" in result.stderr


# -- each target builds only what it runs


def _packages(lines: Iterable[str]) -> set[str]:
    return {word for line in lines for word in line.split() if "/cmd/" in word or word.startswith("./cmd/")}


def test_the_local_cluster_builds_its_own_tools_only(machine: Machine) -> None:
    """What `make demo` and `make cluster-up` build cold: the control plane, etcd and kwok; no helm, promtool, kind."""
    machine.fake_go()
    result = machine.run(str(HACK / "cluster.sh"), "up", CLUSTER_NAME="tooling-test")
    assert result.returncode != 0  # the fake go built nothing runnable: kwokctl cannot start a cluster
    built = _packages(machine.recorded("go"))
    assert {
        "sigs.k8s.io/kwok/cmd/kwok@v0.8.0",
        "sigs.k8s.io/kwok/cmd/kwokctl@v0.8.0",
        "./cmd/etcd",
        "k8s.io/kubernetes/cmd/kube-apiserver",
        "k8s.io/kubernetes/cmd/kubectl",
    } <= built, built
    assert not [p for p in built if "helm" in p or "prometheus" in p or "sigs.k8s.io/kind" in p], built


@pytest.mark.parametrize("line", ["", "oldest"])
def test_stopping_a_cluster_that_is_not_running_builds_nothing(machine: Machine, line: str) -> None:
    """CI stops leftover clusters of both Kubernetes lines before its tests: that must not build a control plane (it
    built the oldest one silently, its output sent to /dev/null, outside the step that says it builds)."""
    machine.fake_go()
    result = machine.run(str(HACK / "cluster.sh"), "down", CLUSTER_NAME="tooling-test", KUBERNETES_LINE=line)
    assert result.returncode == 0, result.stderr
    assert _built_packages(machine) == ""


def test_demo_and_kind_load_targets_have_no_tool_prerequisites(machine: Machine) -> None:
    for target in ("demo", "kind-load"):
        result = machine.make("-n", target)
        assert result.returncode == 0, result.stderr
        assert "tools.sh build" not in result.stdout, (target, result.stdout)
        assert "images.sh" not in result.stdout, (target, result.stdout)  # kind-load never rebuilds the image


def test_tools_build_kubectl_builds_kubectl_alone(machine: Machine) -> None:
    machine.fake_go()
    result = machine.run(str(HACK / "tools.sh"), "build", "kubectl")
    assert result.returncode == 0, result.stderr
    assert _packages(machine.recorded("go")) == {"k8s.io/kubernetes/cmd/kubectl"}


# -- kind: the user's kind and the user's cluster


def _kind_machine(machine: Machine, clusters: list[str], *, image_present: bool = True) -> dict[str, str]:
    listing = "\n".join(clusters) if clusters else "No kind clusters found."
    machine.fake(
        "kind",
        f"""case "$1" in
version) echo "kind v0.32.0 go1.26.0 linux/amd64" ;;
get) printf '%s\\n' "{listing}" ;;
esac
exit 0
""",
    )
    machine.fake(
        "podman",
        f"""case "$1" in
image) exit {0 if image_present else 1} ;;
save) shift; while [[ $# -gt 0 ]]; do [[ "$1" == -o ]] && touch "$2"; shift; done ;;
esac
exit 0
""",
    )
    return {"ENGINE": "podman", "IMG": "localhost/webserver-operator:0.1.0"}


def _loaded_into(machine: Machine) -> list[str]:
    lines = [line.split() for line in machine.recorded("kind") if line.startswith("kind load")]
    return [words[words.index("--name") + 1] for words in lines]


def test_kind_load_loads_into_the_only_kind_cluster_without_building(machine: Machine) -> None:
    env = _kind_machine(machine, ["dev"])
    result = machine.run(str(HACK / "kind.sh"), "load-image", **env)
    assert result.returncode == 0, result.stderr
    assert _loaded_into(machine) == ["dev"]
    assert "loading into the only kind cluster, dev (KIND_CLUSTER_NAME=<name> picks another)" in result.stderr
    assert "kind: v0.32.0 from PATH" in result.stderr
    assert not [line for line in machine.recorded("podman") if line.startswith("podman build")]


def test_kind_load_uses_an_older_kind_from_path_and_builds_none(machine: Machine) -> None:
    """`kind load` works with any kind: an older one on PATH is used, not replaced by a Go build (issue 33)."""
    env = _kind_machine(machine, ["dev"])
    machine.fake(
        "kind", 'case "$1" in\nversion) echo "kind v0.20.0 go1.20.4 linux/amd64" ;;\nget) echo dev ;;\nesac\nexit 0\n'
    )
    machine.fake_go()
    result = machine.run(str(HACK / "kind.sh"), "load-image", **env)
    assert result.returncode == 0, result.stderr
    assert _loaded_into(machine) == ["dev"]
    assert "kind: v0.20.0 from PATH" in result.stderr
    assert _built_packages(machine) == ""


def test_kind_load_follows_the_kubectl_context_among_several_clusters(machine: Machine) -> None:
    env = _kind_machine(machine, ["a", "b"])
    machine.fake("kubectl", '[[ "$1 $2" == "config current-context" ]] && echo kind-b\nexit 0\n')
    result = machine.run(str(HACK / "kind.sh"), "load-image", **env)
    assert result.returncode == 0, result.stderr
    assert _loaded_into(machine) == ["b"]


def test_kind_load_names_the_clusters_when_the_choice_is_unclear(machine: Machine) -> None:
    env = _kind_machine(machine, ["a", "b"])
    result = machine.run(str(HACK / "kind.sh"), "load-image", **env)
    assert result.returncode != 0
    assert "several kind clusters exist (a b) and none is the current kubectl context" in result.stderr
    assert "KIND_CLUSTER_NAME=<name>" in result.stderr
    explicit = machine.run(str(HACK / "kind.sh"), "load-image", KIND_CLUSTER_NAME="a", **env)
    assert explicit.returncode == 0, explicit.stderr
    assert _loaded_into(machine) == ["a"]


def test_kind_load_without_the_image_says_to_build_it(machine: Machine) -> None:
    env = _kind_machine(machine, ["dev"], image_present=False)
    result = machine.run(str(HACK / "kind.sh"), "load-image", **env)
    assert result.returncode != 0
    assert "is not in podman's images: build it first (`make docker-build kind-load`" in result.stderr
    assert _loaded_into(machine) == []


# -- kind: pulling from a registry on this machine (hack/registry.sh)


def test_kind_config_points_containerd_at_hosts_files_with_or_without_a_registry(machine: Machine) -> None:
    """Always: a registry can then be added to the running cluster (`hack/kind.sh registry-hosts`), as the e2e
    test of the README's install does on the cluster `make e2e-kind` made without KIND_REGISTRY."""
    for env in ({}, {"KIND_REGISTRY": "127.0.0.1:5001"}):
        result = machine.run(str(HACK / "kind.sh"), "config", **env)
        assert result.returncode == 0, result.stderr
        (patch,) = yaml.safe_load(result.stdout)["containerdConfigPatches"]
        assert '[plugins."io.containerd.cri.v1.images".registry]' in patch
        assert 'config_path = "/etc/containerd/certs.d"' in patch


def test_registry_hosts_lets_every_node_pull_the_local_registry_over_http(machine: Machine) -> None:
    machine.fake("kind", 'case "$1 $2" in\n"get nodes") printf "c-control-plane\\nc-worker\\n" ;;\nesac\nexit 0\n')
    hosts = machine.root / "hosts"
    machine.fake(
        "podman",
        f"""case "$1" in
network) echo 10.89.0.1 ;;
exec) cat >>"{hosts}"; echo "node=$3 path=${{@: -1}}" >>"{hosts}" ;;
esac
exit 0
""",
    )
    result = machine.run(
        str(HACK / "kind.sh"), "registry-hosts", ENGINE="podman", KIND=str(machine.bin / "kind"),
        KIND_CLUSTER_NAME="c", KIND_REGISTRY="127.0.0.1:5001",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = hosts.read_text()
    entry = 'server = "http://127.0.0.1:5001"\n\n[host."http://10.89.0.1:5001"]\n  capabilities = ["pull", "resolve"]\n'
    assert written.count(entry) == 2, written
    assert "node=c-control-plane" in written and "node=c-worker" in written
    assert written.count("/etc/containerd/certs.d/127.0.0.1:5001/hosts.toml") == 2


def test_registry_down_removes_the_local_tags_of_what_was_pushed_to_it_and_no_other(machine: Machine) -> None:
    """Each release test pushed an image to a registry on a new port and left its tag (about 325 MB) in the engine's
    storage after the registry, and what it held, were gone."""
    machine.fake(
        "docker",
        """case "$1" in
info) exit 0 ;;
images) printf '%s\n' 127.0.0.1:5123/webserver-operator:0.2.0 127.0.0.1:51234/webserver-operator:0.2.0 \\
  localhost/webserver-operator:0.2.0 127.0.0.1:5123/webserver-operator:0.2.1 ;;
esac
exit 0
""",
    )
    state = machine.root / "cache" / "webserver-operator" / "registry" / "r"
    state.mkdir(parents=True)
    (state / "address").write_text("0.0.0.0:5123\n")
    result = machine.run(str(HACK / "registry.sh"), "down", REGISTRY_NAME="r")
    assert result.returncode == 0, result.stderr
    assert [line for line in machine.recorded("docker") if " rmi " in f"{line} "] == [
        "docker rmi 127.0.0.1:5123/webserver-operator:0.2.0 127.0.0.1:5123/webserver-operator:0.2.1"
    ]
    assert not state.exists()


def test_make_test_builds_the_oldest_line_while_the_newest_lines_suite_runs(machine: Machine) -> None:
    """Cold, the oldest line's control plane is about 7 minutes of compiles that only the second half of `make test`
    needs: it is built in the background during the first half, waited for before the second, and not also built as
    a prerequisite before either (docs/development.md#cold-ci-measured-step-by-step-2026-11-28)."""
    result = machine.make("-n", "test")
    assert result.returncode == 0, result.stderr
    recipe = result.stdout
    steps = [
        "KUBERNETES_LINE=oldest nice -n 19 hack/tools.sh build all >_out/tools-oldest.log 2>&1 & oldest=$!",
        "-m pytest tests ",
        "if ! wait $oldest",
        "KUBERNETES_LINE=oldest CLUSTER_NAME=",
    ]
    assert all(step in recipe for step in steps), recipe
    assert [recipe.index(step) for step in steps] == sorted(recipe.index(step) for step in steps), recipe
    assert "KUBERNETES_LINE=oldest hack/tools.sh build" not in recipe, recipe
