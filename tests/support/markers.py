"""Which test is running, so helpers can refuse work the test did not declare.

Why: `make test-unit` promises "no cluster, no built tools" and deselects tests marked ``tools``. A unit test that
runs helm or kubectl without that marker would make `make test-unit` fail on a fresh clone, and only there. The
conftest hooks record the running item here; ``require_tools_marker`` (called by the helpers that locate a built
tool) fails such a test on every machine instead, with the fix in the message.
"""

from __future__ import annotations

import pytest

_current: pytest.Item | None = None

# Folders whose tests are marked automatically and never run by `make test-unit`.
_TOOL_MARKERS = ("tools", "integration", "e2e", "kind")


def set_current(item: pytest.Item | None) -> None:
    global _current  # noqa: PLW0603 - one running test per process; the hooks own this
    _current = item


def require_tools_marker(tool: str) -> None:
    """Fail the running test unless it is marked so that `make test-unit` (no tools) deselects it."""
    item = _current
    if item is None:
        return  # not inside a test (a fixture or a helper script): nothing to declare
    if not any(item.get_closest_marker(name) for name in _TOOL_MARKERS):
        pytest.fail(
            f"{item.nodeid} runs {tool} (built by `make tools`) but is not marked `tools`: add "
            "`pytestmark = pytest.mark.tools` to its module so `make test-unit` (no tools) deselects it",
            pytrace=False,
        )
