"""The chart's Artifact Hub metadata says what is true of the repository: its image, its example, its capability level.

Why: the annotations are YAML inside YAML strings, read only by Artifact Hub; nothing else fails when one is
malformed or drifts from the chart (a sample that no longer passes the CRD, an image name the chart no longer
deploys, a capability level the README does not justify).
"""

from __future__ import annotations

from typing import Any

import yaml

from harness.paths import ROOT

CHART = ROOT / "charts" / "webserver-operator"
LEVELS = ("Basic Install", "Seamless Upgrades", "Full Lifecycle", "Deep Insights", "Auto Pilot")
CHANGE_KINDS = {"added", "changed", "deprecated", "removed", "fixed", "security"}


def _annotations() -> dict[str, str]:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    annotations: dict[str, str] = chart["annotations"]
    return annotations


def _listed(name: str) -> list[dict[str, Any]]:
    value = yaml.safe_load(_annotations()[f"artifacthub.io/{name}"])
    assert isinstance(value, list) and value, name
    return value


def test_declares_an_operator_with_one_of_the_five_capability_levels_and_says_why() -> None:
    annotations = _annotations()
    assert annotations["artifacthub.io/operator"] == "true"
    level = annotations["artifacthub.io/operatorCapabilities"]
    assert level in LEVELS
    readme = (CHART / "README.md").read_text()
    section = readme.split("## Capability level", 1)[1].split("\n## ", 1)[0]
    assert f"**{level}**" in section
    following = LEVELS[LEVELS.index(level) + 1]
    assert f"Missing for {following}" in section, "the README must say what the next level needs"


def test_images_name_the_image_the_chart_deploys_by_default() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    (image,) = _listed("images")
    name = f"{values['image']['registry']}/{values['image']['repository']}"
    # A released chart names its image by digest (`make release`), an unreleased one the local name and appVersion.
    expected = f"{name}@{values['image']['digest']}" if values["image"]["digest"] else f"{name}:{chart['appVersion']}"
    assert image["image"] == expected
    assert image.get("whitelisted", False) is (values["image"]["registry"] == "localhost")


def test_crds_examples_are_the_sample_and_name_a_declared_crd() -> None:
    (example,) = _listed("crdsExamples")
    sample = yaml.safe_load((ROOT / "config" / "samples" / "web_v1_webserver.yaml").read_text())
    assert example == sample
    (crd,) = _listed("crds")
    assert crd["kind"] == example["kind"]
    assert example["apiVersion"].endswith("/" + crd["version"])


def test_changes_use_artifact_hub_kinds() -> None:
    for change in _listed("changes"):
        assert change["kind"] in CHANGE_KINDS, change
        assert change["description"].strip(), change
