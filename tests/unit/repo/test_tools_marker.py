"""`make test-unit` runs on a fresh clone: a unit test that needs a built tool must say so with the `tools` marker.

This module is not marked, so asking for helm or kubectl here must fail with the fix in the message (the guard in
tests/support/markers.py), while a marked test gets past the guard.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chart import helm_binary, kubectl_binary
from tests.support.markers import require_tools_marker


@pytest.mark.parametrize("locate", [helm_binary, kubectl_binary], ids=["helm", "kubectl"])
def test_an_unmarked_unit_test_cannot_run_a_built_tool(
    request: pytest.FixtureRequest, locate: Callable[[], Path]
) -> None:
    assert request.node.get_closest_marker("tools") is None
    with pytest.raises(pytest.fail.Exception, match=r"is not marked `tools`: add `pytestmark = pytest\.mark\.tools`"):
        locate()


@pytest.mark.tools
def test_a_marked_test_passes_the_guard() -> None:
    require_tools_marker("helm")  # does not fail: the marker is there
