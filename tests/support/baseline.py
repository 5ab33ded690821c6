"""A previous release's source tree, taken from the repository's history with `git archive` (no worktree left behind).

Why one helper: the host-process upgrade test (tests/integration/test_upgrade.py, which pins ``BASELINE_REF``) and the
`helm upgrade` test on kind (tests/e2e/test_helm_upgrade.py) both run the previous release from its own tree; they
extract it the same way and fail with the same instructions when the history is missing (a shallow clone).
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

from harness.paths import ROOT

__all__ = ["extract_tree"]


def extract_tree(ref: str, into: Path) -> Path:
    """Extract commit ``ref`` of this repository into ``into``/src and return that directory."""
    archive = into / "baseline.tar"
    with archive.open("wb") as out:
        result = subprocess.run(
            ["git", "archive", "--format=tar", ref], cwd=ROOT, stdout=out, stderr=subprocess.PIPE, check=False
        )
    assert result.returncode == 0, (
        f"git archive {ref} failed: {result.stderr.decode()}: the test needs the repository's history "
        "(a shallow clone lacks the baseline commit: `git fetch --unshallow`)"
    )
    tree = into / "src"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree
