"""`make docker-build` and `make docker-push` need only a container engine: no Go, no privileged container.

Why: they used to ask `hack/engine.sh detect`, the kind engine rule, which builds a probe with Go and starts a
`--privileged` container; a user without Go, with rootless or locked-down Docker, or on macOS was told to run `make
engine` although a plain `docker build` works there (issue 33). Here PATH holds the utilities the Makefile and the
scripts run, `make`, and a fake `docker` that answers `info`, refuses privileged containers the way runc does in a
locked-down sandbox, and records every call; there is no `go`. The real build runs in `make e2e-kind`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.paths import ROOT

# What make, the Makefile's parse-time shell calls and hack/images.sh run besides the engine. No go among them.
UTILITIES = (
    "make", "bash", "sh", "dirname", "date", "mkdir", "cat", "grep", "sed", "head", "tail", "cut", "sort", "find",
    "sha256sum", "git", "awk", "tr", "rm", "env",
)  # fmt: skip
IMG = "registry.example/team/webserver-operator:9.9.9"

# docker: `info` answers; the base image is present; IMG is not built yet; `build`, `push` and `run` append their
# arguments (and DOCKER_BUILDKIT) to calls.log next to the script; `run --privileged` fails as runc does without
# CAP_SYS_RESOURCE.
FAKE_DOCKER = r"""#!/bin/bash
log="$(dirname "$0")/calls.log"
case "$1" in
info) exit 0 ;;
image)
  for a in "$@"; do [[ "${a}" == *Labels* || "${a}" == *.Id* ]] && exit 1; done
  exit 0
  ;;
build | push) printf '%s\n' "DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-} $*" >>"${log}"; exit 0 ;;
run | import) printf '%s\n' "$*" >>"${log}"; echo "runc create failed: unable to apply caps" >&2; exit 126 ;;
esac
exit 0
"""


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in UTILITIES:
        found = shutil.which(tool)
        assert found, f"{tool} not found"
        (bin_dir / tool).symlink_to(found)
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    return bin_dir


def make(tmp_path: Path, bin_dir: Path, target: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "IMG": IMG,
    }
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), target],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def calls(bin_dir: Path) -> list[list[str]]:
    log = bin_dir / "calls.log"
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def test_docker_build_runs_docker_build_without_go_or_a_privileged_container(tmp_path: Path, bin_dir: Path) -> None:
    assert shutil.which("go", path=str(bin_dir)) is None

    result = make(tmp_path, bin_dir, "docker-build")

    assert result.returncode == 0, result.stdout + result.stderr
    (build,) = calls(bin_dir)
    env, command, *args = build
    assert (env, command) == ("DOCKER_BUILDKIT=1", "build"), build
    assert args[-1] == str(ROOT), "the build context is the repository"
    assert args[args.index("-t") + 1] == IMG, build
    revision = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"REVISION={revision}" in args, build
    assert any(a.startswith("dev.webserver-operator.build-key=") for a in args), build
    assert "--privileged" not in " ".join(args)


def test_docker_push_pushes_img_with_docker(tmp_path: Path, bin_dir: Path) -> None:
    result = make(tmp_path, bin_dir, "docker-push")

    assert result.returncode == 0, result.stdout + result.stderr
    assert calls(bin_dir) == [["DOCKER_BUILDKIT=", "push", IMG]]


def test_without_an_engine_docker_build_says_what_to_install(tmp_path: Path, bin_dir: Path) -> None:
    (bin_dir / "docker").unlink()

    result = make(tmp_path, bin_dir, "docker-build")

    assert result.returncode != 0
    assert "install and start Docker or podman" in result.stderr, result.stderr


# The scripts behind the targets a user runs on their own machine (macOS ships bash 3.2); hack/kind-node-image.sh,
# hack/debian-base.sh and chaos/ run only where kind's offline node image is built (Linux, `make engine`).
USER_SCRIPTS = ("images.sh", "engine.sh", "kind.sh", "tools.sh", "install.sh", "demo.sh", "cluster.sh", "lib.sh")
BASH4_ONLY = ("mapfile", "readarray", "^^}", ",,}", "declare -A", "local -A")


@pytest.mark.parametrize("script", USER_SCRIPTS)
def test_user_facing_scripts_use_no_bash_4_features(script: str) -> None:
    text = (ROOT / "hack" / script).read_text()
    found = [word for word in BASH4_ONLY if word in text]
    assert not found, f"hack/{script} uses {found}, which macOS's bash 3.2 does not have"
