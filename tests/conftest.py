"""Pytest plumbing shared by every suite: markers by folder, the session cluster and per-test namespaces.

The cluster is only started when a collected test needs it, so `make test-unit` never touches one. Tests under
tests/integration are marked ``integration`` and tests under tests/e2e ``e2e`` automatically. ``kind`` tests need real
containers: they run with CLUSTER=kind (`make e2e-kind`) and are skipped, with that reason, on the other backends.
With CLUSTER=kind and no usable container engine, the session fails with what to do (hack/engine.sh's message).
Tests that run a tool built by `make tools` but need no cluster are marked ``tools``: `make test-unit` deselects
them (a fresh clone has no tools), `make test` runs them. Tests that draw a PNG with matplotlib (the ``plots`` extra,
which `make venv` does not install) are marked ``plots``: `make test-unit` deselects them too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, ClusterUnavailableError, provide_cluster
from tests.support.cluster import release_cluster as _release
from tests.support.markers import set_current

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    backend = os.environ.get("CLUSTER", "local")
    for item in items:
        path = Path(str(item.fspath))
        if _HERE / "integration" in path.parents:
            item.add_marker(pytest.mark.integration)
        if _HERE / "e2e" in path.parents:
            item.add_marker(pytest.mark.e2e)
        if item.get_closest_marker("kind") is not None and backend != "kind":
            item.add_marker(pytest.mark.skip(reason="kind test: needs real containers, run with `make e2e-kind`"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Record the running test for tests/support/markers.py (helpers that need built tools check its markers)."""
    set_current(item)
    try:
        return (yield)
    finally:
        set_current(None)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The cluster every integration and e2e test runs against (see tests/support/cluster.py for backends)."""
    backend = os.environ.get("CLUSTER", "local")
    try:
        provided = provide_cluster(backend)
    except ClusterUnavailableError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield provided
    finally:
        _release(provided)


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test, deleted (without waiting) afterwards."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    with cluster.temporary_namespace(f"t-{base}") as name:
        yield name
