"""`make release`'s file edits (tests/support/release_files.py) on the repository's own files, as they are now.

Why on the real files: each edit replaces one known line or block and refuses when it is missing; a file reworded in
a way the release no longer understands must fail here, in `make test`, not in the middle of a release.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from harness.paths import ROOT
from tests.support.release_files import (
    CHART,
    VERSION_LINES,
    ReleaseEditError,
    bump,
    bump_changelog,
    record,
)
from tests.support.upgrades import declared_template_changes, section

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_the_changelog_releases_unreleased_under_a_fresh_unreleased_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    released = bump_changelog(text, "0.2.0", "2026-11-28")
    headings = re.findall(r"^## (.+)$", released, flags=re.MULTILINE)
    assert headings[:3] == ["[Unreleased]", "[0.2.0] - 2026-11-28", headings[2]]
    assert headings[2].startswith("[0.1.0]")
    # The released section keeps the notes (and pod-template lines) that were Unreleased; the new one declares none.
    assert section(released, "0.2.0").split("\n", 1)[1] == section(text, "Unreleased").split("\n", 1)[1]
    assert declared_template_changes(released) == []
    assert "No release has been published yet" not in released
    with pytest.raises(ReleaseEditError, match=re.escape("already has a section for 0.2.0")):
        bump_changelog(released, "0.2.0", "2026-11-29")


def test_bump_states_the_new_version_everywhere_the_old_one_was(tmp_path: Path) -> None:
    for path in [Path("CHANGELOG.md"), CHART / "Chart.yaml", *(p for p, _ in VERSION_LINES)]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)

    changed = bump(tmp_path, "0.2.0", "2026-11-28")

    assert len(changed) == 2 + len(VERSION_LINES)
    chart = yaml.safe_load((tmp_path / CHART / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == ("0.2.0", "0.2.0")
    assert chart["annotations"]["artifacthub.io/prerelease"] == "false"
    (image,) = yaml.safe_load(chart["annotations"]["artifacthub.io/images"])
    assert image["image"] == "localhost/webserver-operator:0.2.0"
    for path, pattern in VERSION_LINES:
        (match,) = re.finditer(pattern, (tmp_path / path).read_text(), flags=re.MULTILINE)
        assert "0.2.0" in match[0], path


def test_record_pins_the_published_chart_to_the_image_digest(tmp_path: Path) -> None:
    chart_dir = tmp_path / "webserver-operator"
    shutil.copytree(ROOT / CHART, chart_dir)

    record(chart_dir, "registry.example:5000/team", DIGEST)

    values = yaml.safe_load((chart_dir / "values.yaml").read_text())
    assert (values["image"]["registry"], values["image"]["digest"]) == ("registry.example:5000/team", DIGEST)
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    images = yaml.safe_load(chart["annotations"]["artifacthub.io/images"])
    assert images == [
        {"name": "webserver-operator", "image": f"registry.example:5000/team/webserver-operator@{DIGEST}"}
    ]
    # Everything else in Chart.yaml is as it was.
    original = yaml.safe_load((ROOT / CHART / "Chart.yaml").read_text())
    del original["annotations"]["artifacthub.io/images"], chart["annotations"]["artifacthub.io/images"]
    assert chart == original


def test_record_refuses_what_is_no_digest(tmp_path: Path) -> None:
    with pytest.raises(ReleaseEditError, match="is not an image digest"):
        record(tmp_path, "registry.example", "latest")
