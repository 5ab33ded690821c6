"""hack/engine.sh's rule for the kind engine: Docker only when it starts a --privileged container, else podman.

Why a unit test of a shell script: every caller (hack/kind.sh, the image scripts, tests/support/cluster.py) asks
`hack/engine.sh detect`, so this rule decides where kind runs and whether the kind suite can run at all. Fake `docker`
and `podman` commands on PATH answer the way each engine does on the machines this project meets (a docker client
without an engine, a Docker engine in a sandbox that refuses privileged containers, rootful podman); the real engines
are exercised by `make e2e-kind`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.paths import ROOT

ENGINE_SH = ROOT / "hack" / "engine.sh"
# What engine.sh runs besides the engines; PATH holds only these, so the machine's own docker/podman stay out of sight.
UTILITIES = ("bash", "dirname", "date", "tail", "mkdir", "cat")


def _fake(bin_dir: Path, name: str, *, info_ok: bool, privileged_ok: bool) -> None:
    """A fake engine CLI: `info` and `image inspect` answer, `run --privileged` succeeds or fails like runc does."""
    refuse = 'echo "runc create failed: unable to apply caps: operation not permitted" >&2; exit 126'
    script = f"""#!/bin/sh
case "$1" in
info) exit {0 if info_ok else 1} ;;
image) exit 0 ;;
run) {"exit 0" if privileged_ok else refuse} ;;
esac
exit 2
"""
    path = bin_dir / name
    path.write_text(script)
    path.chmod(0o755)


def detect(tmp_path: Path, **engines: tuple[bool, bool]) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in UTILITIES:
        found = shutil.which(tool)
        assert found, f"{tool} not found"
        (bin_dir / tool).symlink_to(found)
    for name, (info_ok, privileged_ok) in engines.items():
        _fake(bin_dir, name, info_ok=info_ok, privileged_ok=privileged_ok)
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return subprocess.run([str(ENGINE_SH), "detect"], capture_output=True, text=True, env=env, timeout=60, check=False)


def test_docker_that_runs_privileged_containers_is_chosen(tmp_path: Path) -> None:
    result = detect(tmp_path, docker=(True, True), podman=(True, True))
    assert (result.returncode, result.stdout.strip()) == (0, "docker"), result.stderr


def test_docker_that_refuses_privileged_containers_falls_back_to_podman(tmp_path: Path) -> None:
    result = detect(tmp_path, docker=(True, False), podman=(True, True))
    assert (result.returncode, result.stdout.strip()) == (0, "podman"), result.stderr


def test_a_docker_client_without_an_engine_falls_back_to_podman(tmp_path: Path) -> None:
    result = detect(tmp_path, docker=(False, False), podman=(True, True))
    assert (result.returncode, result.stdout.strip()) == (0, "podman"), result.stderr


@pytest.mark.parametrize(
    ("engines", "reason"),
    [
        ({}, "no container engine is installed"),
        ({"docker": (False, False)}, "`docker info` fails"),
        ({"docker": (True, False)}, "unable to apply caps"),
    ],
)
def test_without_a_usable_engine_detect_fails_and_says_what_to_do(
    tmp_path: Path, engines: dict[str, tuple[bool, bool]], reason: str
) -> None:
    result = detect(tmp_path, **engines)
    assert result.returncode != 0
    assert result.stdout == ""
    assert reason in result.stderr and "make engine" in result.stderr, result.stderr
