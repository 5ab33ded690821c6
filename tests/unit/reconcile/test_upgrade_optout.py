"""A namespace labelled webserver-operator.dev/template-upgrade=manual keeps the pacer away; unreadable ones too."""

from __future__ import annotations

import logging

import pytest

from tests.support.fake_api import FakeApi, status_error
from webserver_operator.core.resources import NAMESPACES
from webserver_operator.reconcile.upgrade_optout import REMEMBER_SECONDS, NamespaceOptOut, opted_out


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _namespace(name: str, labels: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_only_the_manual_value_opts_out() -> None:
    label = "webserver-operator.dev/template-upgrade"
    assert opted_out({"metadata": {"labels": {label: "manual"}}})
    assert opted_out({"metadata": {"labels": {label: "Manual"}}})
    assert not opted_out({"metadata": {"labels": {label: "true"}}})
    assert not opted_out({"metadata": {"labels": {"other": "manual"}}})
    assert not opted_out({"metadata": {}})


async def test_the_label_is_read_once_and_remembered_for_a_while() -> None:
    api, clock = FakeApi(), Clock()
    api.put(NAMESPACES.path(), _namespace("frozen", {"webserver-operator.dev/template-upgrade": "manual"}))
    api.put(NAMESPACES.path(), _namespace("open", {}))
    optout = NamespaceOptOut(api, clock)
    assert await optout.manual("frozen") and not await optout.manual("open")
    assert optout.remembered_manual("frozen") and not optout.remembered_manual("open")
    reads = len(api.calls)
    assert await optout.manual("frozen") and len(api.calls) == reads, "remembered: no second read"

    api.put(NAMESPACES.path(), _namespace("frozen", {}))  # the team lifts its opt-out
    clock.now += REMEMBER_SECONDS
    assert not optout.remembered_manual("frozen")
    assert not await optout.manual("frozen")


@pytest.mark.parametrize(("code", "reason"), [(403, "Forbidden"), (503, "ServiceUnavailable")])
async def test_a_namespace_that_cannot_be_read_counts_as_opted_out_and_says_what_to_grant(
    code: int, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    api = FakeApi()
    api.put(NAMESPACES.path(), _namespace("open", {}))
    path = NAMESPACES.path(name="open")
    api.fail("GET", path, status_error(code, reason, method="GET", path=path), times=100)
    optout = NamespaceOptOut(api, Clock())
    with caplog.at_level(logging.WARNING):
        assert await optout.manual("open")
    assert "Grant the operator `get` on namespaces" in caplog.text
