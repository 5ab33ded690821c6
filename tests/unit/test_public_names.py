"""Every module of the package says which of its names are public: a literal ``__all__`` of names it binds.

Read from the source (``ast``), nothing imported: a module without ``__all__``, with one that is not a literal list
of strings, or that lists a private name or a name the module never binds, fails here with its path. Other modules
import a module's public names only (mypy strict refuses re-exports that ``__all__`` does not list), so ``__all__``
is the one place a reader learns what a module hands on.
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

import webserver_operator

PACKAGE = Path(webserver_operator.__file__).parent


def _modules() -> dict[str, Path]:
    """Every module and package of ``webserver_operator`` with its source file."""
    found = {webserver_operator.__name__: PACKAGE / "__init__.py"}
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix=f"{webserver_operator.__name__}."):
        relative = Path(*info.name.split(".")[1:])
        found[info.name] = PACKAGE / relative / "__init__.py" if info.ispkg else PACKAGE / f"{relative}.py"
    return found


MODULES = _modules()


def declared_all(tree: ast.Module) -> list[str] | None:
    """The names of a top-level ``__all__ = [...]`` (or annotated), None when the module has none."""
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            assert isinstance(value, ast.List | ast.Tuple), "__all__ is a literal list, so a reader sees it whole"
            names = [element.value for element in value.elts if isinstance(element, ast.Constant)]
            assert all(isinstance(name, str) for name in names) and len(names) == len(value.elts)
            return [str(name) for name in names]
    return None


def bound_names(tree: ast.Module) -> set[str]:
    """Every name the module binds at its top level: definitions, assignments and imports."""
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(target.id for target in targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return bound


def test_the_walk_finds_every_module() -> None:
    """The walk reads the package from disk: as many modules as .py files (a missed folder would pass silently)."""
    assert len(MODULES) == len(list(PACKAGE.rglob("*.py")))
    assert all(path.is_file() for path in MODULES.values())


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_declares_its_public_names(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    names = declared_all(tree)
    assert names is not None, (
        f"{module} has no __all__: add `__all__ = [...]` after its imports, naming the names other modules may "
        "import (`__all__: list[str] = []` when it hands on none)"
    )
    private = [name for name in names if name.startswith("_") and name != "__version__"]
    assert not private, f"{module}: __all__ lists private names {private}"
    unbound = sorted(set(names) - bound_names(tree))
    assert not unbound, f"{module}: __all__ lists {unbound}, which the module does not bind"
    assert len(set(names)) == len(names), f"{module}: __all__ lists a name twice"
