"""The file edits of `make release`: the version bump it commits, and the image digest it writes into the chart it
publishes.

Why text edits and not a YAML round trip: Chart.yaml, values.yaml and CHANGELOG.md are commented, hand-written files;
loading and dumping them would drop every comment. Each edit replaces exactly one known line or block and fails
loudly when it is not there, so a reworded file stops the release instead of shipping a half-bumped one.

Called by hack/release.sh (``python -m tests.support.release_files bump|record ...``); pure functions over text,
unit-tested in tests/unit/repo/test_release_files.py.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHART = Path("charts/webserver-operator")
UNRELEASED = "## [Unreleased]"
IMAGES_BLOCK = re.compile(
    r"(?P<comment>(?:  #[^\n]*\n)*)  artifacthub\.io/images: \|\n(?:    [^\n]*\n)+", flags=re.MULTILINE
)


class ReleaseEditError(ValueError):
    """A file does not have the line or block the release edits: fix the file (or this module) first."""


def _sub_one(pattern: str, replacement: str, text: str, *, what: str) -> str:
    new, count = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
    if count != 1:
        raise ReleaseEditError(f"{what}: no line matches {pattern!r}")
    return new


def bump_changelog(text: str, version: str, date: str) -> str:
    """``[Unreleased]`` becomes ``[<version>] - <date>``, under a new, empty ``[Unreleased]`` section."""
    if re.search(rf"^## \[{re.escape(version)}\]", text, flags=re.MULTILINE):
        raise ReleaseEditError(f"CHANGELOG.md already has a section for {version}")
    if UNRELEASED not in text:
        raise ReleaseEditError("CHANGELOG.md has no '## [Unreleased]' section to release")
    fresh = (
        f"{UNRELEASED}\n\nChanges since {version}.\n\n### Upgrade notes\n\n#### Pod template changes\n\n"
        f"None: upgrading the operator from {version} restarts no WebServer's pods.\n\n"
    )
    released = text.replace(UNRELEASED, f"{fresh}## [{version}] - {date}", 1)
    return released.replace("No release has been published yet. ", "", 1)


def bump_chart(text: str, version: str) -> str:
    text = _sub_one(r"^version: .*$", f"version: {version}", text, what="Chart.yaml version")
    text = _sub_one(r"^appVersion: .*$", f'appVersion: "{version}"', text, what="Chart.yaml appVersion")
    # The committed chart's Artifact Hub image is the local default (its digest goes only into the published copy).
    text = _sub_one(
        r"^(      image: localhost/webserver-operator:)\S+$", rf"\g<1>{version}", text, what="Chart.yaml images"
    )
    # A published version is no pre-release on Artifact Hub.
    return text.replace('  artifacthub.io/prerelease: "true"', '  artifacthub.io/prerelease: "false"', 1)


def bump_line(text: str, version: str, *, pattern: str, what: str) -> str:
    """Put ``version`` between groups 1 and 2 of ``pattern``'s one match."""
    return _sub_one(pattern, rf"\g<1>{version}\g<2>", text, what=what)


# (path, pattern with the version between groups 1 and 2): every place that states the operator's version.
VERSION_LINES = (
    (Path("pyproject.toml"), r'^(version = ")[^"]+(")$'),
    (Path("webserver_operator/__init__.py"), r'^(__version__ = ")[^"]+(")$'),
    (Path("Dockerfile"), r"^(ARG VERSION=)\S+()$"),
    (Path("config/manager/kustomization.yaml"), r"^(  newTag: )\S+()$"),
    # The local image name `make docker-build` and `make kind-load` use by default: the chart's default image.
    (Path("Makefile"), r"^(IMG \?= localhost/webserver-operator:)\S+()$"),
    (Path("hack/kind.sh"), r'^(IMG="\$\{IMG:-localhost/webserver-operator:)[^}]+(\}")$'),
    (Path("hack/demo.sh"), r'^(  IMG="\$\{IMG:-localhost/webserver-operator:)[^}]+(\}")$'),
)


def bump(root: Path, version: str, date: str) -> list[Path]:
    """Write the version bump into the tree at ``root``; return the files changed."""
    changed = []
    changelog = root / "CHANGELOG.md"
    changelog.write_text(bump_changelog(changelog.read_text(), version, date))
    changed.append(changelog)
    chart = root / CHART / "Chart.yaml"
    chart.write_text(bump_chart(chart.read_text(), version))
    changed.append(chart)
    for path, pattern in VERSION_LINES:
        target = root / path
        target.write_text(bump_line(target.read_text(), version, pattern=pattern, what=str(path)))
        changed.append(target)
    return changed


def record_values(text: str, registry: str, digest: str) -> str:
    """values.yaml of the published chart: the release's registry and image digest."""
    text = _sub_one(r"^  registry: .*$", f"  registry: {registry}", text, what="values.yaml image.registry")
    return _sub_one(r'^  digest: "".*$', f'  digest: "{digest}"', text, what="values.yaml image.digest")


def record_chart(text: str, image: str) -> str:
    """Chart.yaml of the published chart: Artifact Hub's ``images`` names the image by digest (scanned, not
    whitelisted: it is pullable)."""
    block = (
        "  # The image this release deploys, by digest (make release).\n"
        f"  artifacthub.io/images: |\n    - name: webserver-operator\n      image: {image}\n"
    )
    new, count = IMAGES_BLOCK.subn(lambda _: block, text, count=1)
    if count != 1:
        raise ReleaseEditError("Chart.yaml: no artifacthub.io/images block")
    return new


def record(chart_dir: Path, registry: str, digest: str) -> None:
    """Write the image's registry and digest into the chart at ``chart_dir`` (a copy that is packaged)."""
    if not re.fullmatch(r"sha256:[a-f0-9]{64}", digest):
        raise ReleaseEditError(f"{digest!r} is not an image digest (sha256:<64 hex>)")
    values = chart_dir / "values.yaml"
    values.write_text(record_values(values.read_text(), registry, digest))
    chart = chart_dir / "Chart.yaml"
    chart.write_text(record_chart(chart.read_text(), f"{registry}/webserver-operator@{digest}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.release_files")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bump", help="bump the version in the tree and release the CHANGELOG's Unreleased section")
    b.add_argument("version")
    b.add_argument("--date", default=datetime.now(UTC).strftime("%Y-%m-%d"))
    r = sub.add_parser("record", help="write the image's registry and digest into a chart copy")
    r.add_argument("chart_dir", type=Path)
    r.add_argument("registry")
    r.add_argument("digest")
    args = parser.parse_args(argv)
    try:
        if args.command == "bump":
            for path in bump(ROOT, args.version, args.date):
                print(path.relative_to(ROOT))
        else:
            record(args.chart_dir, args.registry, args.digest)
    except ReleaseEditError as err:
        print(f"make release: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
