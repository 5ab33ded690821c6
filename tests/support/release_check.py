"""`make release`'s pod-template gate: the upgrade test's judgement, made before anything is published.

Why here: tests/integration/test_upgrade.py judges an upgrade by diffing the pod templates a previous release and
HEAD render for the same WebServers, and passes a changed field only when the CHANGELOG's [Unreleased] upgrade notes
list it as `pod-template: <field>` (docs/upgrades.md). A release must not ship a change that test would refuse, and
the release should not need a cluster to know: this renders both versions' Deployment pod templates in two
subprocesses (each version's own ``desired_deployment``, from a ``git archive`` of the previous release and from the
working tree) for the upgrade test's own WebServer variants, and judges them with the same functions
(tests/support/upgrades.py). Called by hack/release.sh; prints the problems and exits 1 when there are any.

Run: ``python -m tests.support.release_check [--previous <git ref>]``; the previous release is the newest tag
``v<x.y.z>`` before HEAD, else the 0.1.0 baseline commit (``BASELINE_REF``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from tests.support.upgrades import CHANGELOG, declared_template_changes, template_changes, undeclared

ROOT = CHANGELOG.parent

# Renders one pod template per WebServer read from stdin, with the module of this version that builds the Deployment
# (0.1.0 had webserver_operator.builders.deployment; later versions webserver_operator.desired).
RENDER = """
import importlib, json, sys
from pathlib import Path
import webserver_operator
package = Path(webserver_operator.__file__).parent
# By file, not by trying imports: an editable install's finder would serve a module this version lacks from the
# working tree of another version.
name = "desired" if (package / "desired.py").exists() else "builders.deployment"
module = importlib.import_module(f"webserver_operator.{name}")
assert Path(module.__file__).is_relative_to(package), (module.__file__, package)
from webserver_operator.api.models import WebServer
out = {}
for obj in json.load(sys.stdin):
    out[obj["metadata"]["name"]] = module.desired_deployment(WebServer.model_validate(obj))["spec"]["template"]
json.dump(out, sys.stdout)
"""


def webservers() -> list[dict[str, Any]]:
    """The upgrade test's WebServers (every field that reaches the pod template), as stored objects."""
    from tests.integration.test_upgrade import _specs  # noqa: PLC0415 - the test's own variants, not a copy
    from tests.support.factories import webserver  # noqa: PLC0415

    return [webserver(name, uid=f"uid-{name}", generation=1, **fields) for name, fields in _specs()]


def previous_release() -> str:
    """The newest ``v<x.y.z>`` tag reachable from HEAD, else the 0.1.0 baseline commit."""
    found = subprocess.run(
        ["git", "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*.[0-9]*.[0-9]*", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode == 0:
        return found.stdout.strip()
    from tests.integration.test_upgrade import BASELINE_REF  # noqa: PLC0415

    return BASELINE_REF


def render(tree: Path, objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod templates the operator in ``tree`` renders for ``objs``, by WebServer name."""
    # Run in ``tree``: `python -c` puts the working directory first on sys.path, before PYTHONPATH, so from anywhere
    # else it would import whichever webserver_operator is there.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    result = subprocess.run(
        [sys.executable, "-c", RENDER],
        input=json.dumps(objs),
        cwd=tree,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"rendering the pod templates of {tree} failed:\n{result.stderr}")
    templates: dict[str, Any] = json.loads(result.stdout)
    return templates


def extract(ref: str, into: Path) -> Path:
    archive = into / "previous.tar"
    with archive.open("wb") as out:
        result = subprocess.run(
            ["git", "archive", "--format=tar", ref], cwd=ROOT, stdout=out, stderr=subprocess.PIPE, check=False
        )
    if result.returncode != 0:
        raise SystemExit(
            f"git archive {ref} failed: {result.stderr.decode().strip()}: the release check needs the previous "
            "release in the repository's history (a shallow clone lacks it: `git fetch --unshallow --tags`)"
        )
    with tarfile.open(archive) as tar:
        tar.extractall(into / "src", filter="data")
    return into / "src"


def problems(before: dict[str, Any], after: dict[str, Any], declared: list[str]) -> list[str]:
    """Per WebServer, the changed pod-template fields the upgrade notes do not list."""
    found = []
    for name in sorted(before):
        unlisted = undeclared(template_changes(before[name], after[name]), declared)
        if unlisted:
            found.append(f"{name}: {', '.join(unlisted)}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.release_check", description=__doc__)
    parser.add_argument("--previous", help="git ref of the previous release (default: newest v* tag, else 0.1.0)")
    args = parser.parse_args(argv)
    previous = args.previous or previous_release()
    objs = webservers()
    with tempfile.TemporaryDirectory(prefix="release-check-") as tmp:
        before = render(extract(previous, Path(tmp)), objs)
    after = render(ROOT, objs)
    declared = declared_template_changes(CHANGELOG.read_text())
    found = problems(before, after, declared)
    if found:
        print(
            f"The operator renders WebServers' pod templates differently from the previous release ({previous[:12]}) "
            "in fields CHANGELOG.md's [Unreleased] upgrade notes do not list: upgrading would restart their pods.\n  "
            + "\n  ".join(found)
            + "\nList each field under [Unreleased], Upgrade notes, Pod template changes, as a line starting with "
            "`pod-template: <field>` in backticks saying what changes and how it rolls out (docs/upgrades.md), or "
            "avoid the change; then run `make release` again.",
            file=sys.stderr,
        )
        return 1
    print(f"pod templates: no unlisted change since {previous[:12]} ({len(objs)} WebServers rendered by both)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
