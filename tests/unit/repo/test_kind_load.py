"""hack/kind.sh load-image with podman: the image archive it hands to `kind load image-archive` is its own.

Why: with podman, load-image saves the image to an archive under the kind state directory and loads that. `podman
save` refuses to write over an existing archive ("docker-archive doesn't support modifying existing images"), so one
run killed between save and load (or a second run at the same time) left every later `make e2e-kind` failing at the
load step. Fake `podman` and `kind` on PATH behave like the real ones at that step; the real engines are exercised by
`make e2e-kind`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from harness.paths import ROOT

KIND_SH = ROOT / "hack" / "kind.sh"
UTILITIES = ("bash", "dirname", "date", "mkdir", "rm", "cat", "mktemp", "grep")
IMG = "localhost/webserver-operator:0.1.0"

# podman: `image inspect` finds the image; `save -o FILE` fails like podman 4/5 when FILE exists, else writes it.
FAKE_PODMAN = r"""#!/bin/bash
case "$1" in
image) exit 0 ;;
save)
  out=""
  while (($#)); do
    if [[ "$1" == -o ]]; then out="$2"; shift; fi
    shift
  done
  if [[ -e "${out}" ]]; then echo "Error: docker-archive doesn't support modifying existing images" >&2; exit 125; fi
  echo "image archive" >"${out}"
  exit 0
  ;;
esac
exit 2
"""

# kind: `load image-archive --name N FILE` records what it loaded next to itself.
FAKE_KIND = r"""#!/bin/bash
if [[ "$1 $2" == "load image-archive" ]]; then
  cat "${@: -1}" >>"$(dirname "$0")/loaded"
  exit 0
fi
exit 2
"""


def _bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in UTILITIES:
        found = shutil.which(tool)
        assert found, f"{tool} not found"
        (bin_dir / tool).symlink_to(found)
    for name, script in (("podman", FAKE_PODMAN), ("kind", FAKE_KIND)):
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def load_image(tmp_path: Path, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "ENGINE": "podman",
        "KIND": str(bin_dir / "kind"),
        "KIND_CLUSTER_NAME": "webserver-operator",
        "IMG": IMG,
    }
    return subprocess.run(
        [str(KIND_SH), "load-image"], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_an_archive_left_by_a_killed_run_does_not_break_the_next_load(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    state = tmp_path / "cache" / "webserver-operator" / "kind"
    state.mkdir(parents=True)
    (state / "load.tar").write_text("half-written archive of a killed run")

    result = load_image(tmp_path, bin_dir)

    assert result.returncode == 0, result.stderr
    assert (bin_dir / "loaded").read_text() == "image archive\n"
    assert sorted(p.name for p in state.iterdir() if p.name.endswith(".tar")) == []


def test_the_archive_is_removed_after_the_load(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)

    first, second = load_image(tmp_path, bin_dir), load_image(tmp_path, bin_dir)

    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    state = tmp_path / "cache" / "webserver-operator" / "kind"
    assert sorted(p.name for p in state.iterdir() if p.name.endswith(".tar")) == []
