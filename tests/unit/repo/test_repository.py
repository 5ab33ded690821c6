"""Repository basics a user looks for first: the license notice, the changelog, and image names that promise nothing.

- LICENSE names the license that pyproject.toml, Chart.yaml and the image labels declare, and where its text is.
- CHANGELOG.md has upgrade notes for what is not released yet.
- No public image is published, so no default and no README command may name one: the default image is the local
  name `make docker-build` produces, the same in the Makefile, the chart and config/manager.
"""

from __future__ import annotations

import re
import tomllib

import yaml

from harness.paths import ROOT
from tests.support.cluster import DEFAULT_OPERATOR_IMAGE
from tests.support.readme import quickstart_blocks
from webserver_operator import __version__

CHART = ROOT / "charts" / "webserver-operator"
SPDX = "Apache-2.0"
# Registries a reader would take for "the image is published there".
PUBLIC_REGISTRIES = re.compile(
    r"\b(ghcr\.io|quay\.io|docker\.io|registry\.k8s\.io|gcr\.io|public\.ecr\.aws)/\S*webserver-operator"
)


def test_license_notice_matches_every_declaration() -> None:
    notice = (ROOT / "LICENSE").read_text()
    assert SPDX in notice
    assert "Apache License, Version 2.0" in notice
    assert "https://www.apache.org/licenses/LICENSE-2.0" in notice
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == SPDX
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["annotations"]["artifacthub.io/license"] == SPDX
    assert f'org.opencontainers.image.licenses="{SPDX}"' in (ROOT / "Dockerfile").read_text()


def test_changelog_has_upgrade_notes_for_the_unreleased_changes_and_the_baseline() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    sections = re.split(r"^## ", changelog, flags=re.MULTILINE)
    assert sections[1].startswith("[Unreleased]"), "the newest section must be [Unreleased]"
    # Then the releases, newest first (`make release` turns [Unreleased] into [x.y.z]), down to the 0.1.0 baseline.
    (baseline,) = [i for i, s in enumerate(sections) if s.startswith("[0.1.0]")]
    for section in sections[1 : baseline + 1]:
        assert "### Upgrade notes" in section
        assert "#### Pod template changes" in section, "tests/integration/test_upgrade.py reads these"
    # Every chart default that changed has its note: in the baseline, and since then.
    for changed in ("image.repository", "runAsUser", "nodeSelector", "aggregateClusterRoles", "honorLabels"):
        assert changed in sections[baseline], changed
    assert "leaderElection.leaseDuration" in "".join(sections[1:baseline])
    # The baseline named in the changelog is the one the upgrade test runs.
    test = (ROOT / "tests" / "integration" / "test_upgrade.py").read_text()
    (ref,) = re.findall(r'^BASELINE_REF = "([0-9a-f]{40})"$', test, flags=re.MULTILINE)
    assert ref in changelog


def _makefile_img() -> str:
    match = re.search(r"^IMG \?= (\S+)$", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    assert match, "the Makefile must define IMG ?= <default image>"
    return match[1]


def test_one_local_default_image_everywhere() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    kustomization = yaml.safe_load((ROOT / "config" / "manager" / "kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    chart_default = f"{values['image']['registry']}/{values['image']['repository']}:{chart['appVersion']}"
    assert _makefile_img() == chart_default == f"{image['newName']}:{image['newTag']}" == DEFAULT_OPERATOR_IMAGE
    assert chart["appVersion"] == __version__
    # A local name: `localhost` is no registry anybody can pull from (a release pins its registry and digest in the
    # chart it publishes, not in this one: docs/releasing.md).
    assert values["image"]["registry"] == "localhost"
    assert values["image"]["digest"] == ""


def test_nothing_user_facing_names_a_public_image() -> None:
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "hack" / "demo.sh"]
    files += [p for p in CHART.rglob("*") if p.is_file()]
    files += list((ROOT / "config").rglob("*.yaml"))
    offenders = [str(p.relative_to(ROOT)) for p in files if PUBLIC_REGISTRIES.search(p.read_text(errors="replace"))]
    assert offenders == []


def test_readme_helm_commands_never_rely_on_a_published_image() -> None:
    kind, registry = quickstart_blocks()
    for commands in (kind, registry):
        installs = [i for i, c in enumerate(commands) if c.startswith("helm install")]
        assert len(installs) == 1, commands
        (index,) = installs
        command = commands[index]
        sets_image = "--set image.registry=" in command and "--set image.tag=" in command
        loaded_before = any("kind-load" in c for c in commands[:index])
        pushed_before = any("docker-push" in c for c in commands[:index])
        assert sets_image or loaded_before, command
        if sets_image:
            assert pushed_before, f"{command}: the image it names must be pushed first"
    assert kind[0] == "make docker-build kind-load"
    assert registry[0].startswith("make docker-build docker-push IMG=")
