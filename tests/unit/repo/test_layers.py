"""The generic layers stay generic: no WebServer rule hides in the runtime or the API client as a string.

import-linter forbids ``runtime`` and ``kube`` to import ``api``, ``desired`` or ``reconcile`` (pyproject.toml); a
rule can still be copied in as a literal (a label key, a kind, a message about WebServers), which is how
``runtime/controller/enqueue.py`` once held its own copy of the instance label. This test reads every string in those
packages that is not a docstring and fails on one that names the WebServer API or a label of this project.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.paths import ROOT

PACKAGE = ROOT / "webserver_operator"
GENERIC = ("runtime", "kube")
PROJECT_WORDS = ("WebServer", "webservers", "web.webserver-operator.dev", "app.kubernetes.io/")


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


@pytest.mark.parametrize("package", GENERIC)
def test_generic_layers_name_no_rule_of_this_project(package: str) -> None:
    offending = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}"
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for line, text in _strings(path)
        if any(word in text for word in PROJECT_WORDS)
    ]
    assert not offending, "move these rules up to reconcile/ or desired.py and pass them in:\n" + "\n".join(offending)
