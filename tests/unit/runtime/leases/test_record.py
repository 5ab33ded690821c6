"""The Lease record rules (``runtime.leases.record``): who may claim, and the records written, as client-go writes
them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.support.factories import lease_spec
from webserver_operator.runtime.leases.record import (
    Sighting,
    claimed_lease,
    format_micro_time,
    holder_of,
    is_live,
    lease_duration_seconds,
    may_claim,
    new_lease,
    released_lease,
    sighted,
)

NS = "ops"
WALL = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)


# --- pure logic ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("observed", "now", "expected"),
    [
        pytest.param(None, 0.0, True, id="no-lease"),
        pytest.param({}, 0.0, True, id="empty-spec"),
        pytest.param({"holderIdentity": ""}, 0.0, True, id="released"),
        pytest.param({"holderIdentity": None, "leaseDurationSeconds": 15}, 0.0, True, id="null-holder"),
        pytest.param(lease_spec("me"), 0.0, True, id="ours"),
        pytest.param(lease_spec("other"), 0.0, False, id="other-just-seen"),
        pytest.param(lease_spec("other"), 14.9, False, id="other-before-expiry"),
        pytest.param(lease_spec("other"), 15.0, True, id="other-expired"),
        pytest.param(lease_spec("other", leaseDurationSeconds=30), 20.0, False, id="record-duration-wins"),
        pytest.param(lease_spec("other", leaseDurationSeconds=30), 30.0, True, id="record-duration-expired"),
        pytest.param(lease_spec("other", leaseDurationSeconds=None), 9.9, False, id="no-duration-uses-ours"),
        pytest.param(lease_spec("other", leaseDurationSeconds=None), 10.0, True, id="no-duration-expired"),
    ],
)
def test_may_claim(observed: dict[str, Any] | None, now: float, expected: bool) -> None:
    assert may_claim(observed, identity="me", now=now, observed_at=0.0, lease_duration=10.0) is expected


@pytest.mark.parametrize("renew_time", ["1999-01-01T00:00:00.000000Z", "2999-01-01T00:00:00.000000Z"])
def test_may_claim_ignores_timestamps_in_the_record(renew_time: str) -> None:
    """A renewTime far in the past (or future) says nothing: only how long WE have seen the record unchanged."""
    observed = lease_spec("other", renewTime=renew_time, acquireTime=renew_time)
    assert not may_claim(observed, identity="me", now=5.0, observed_at=0.0, lease_duration=15)
    assert may_claim(observed, identity="me", now=15.0, observed_at=0.0, lease_duration=15)


def test_micro_time_and_duration_rounding() -> None:
    assert format_micro_time(WALL) == "2026-11-22T10:00:00.000000Z"
    east = datetime(2026, 11, 22, 11, 0, 0, 123456, tzinfo=UTC).astimezone(timezone(timedelta(hours=1)))
    assert format_micro_time(east) == "2026-11-22T11:00:00.123456Z"
    with pytest.raises(ValueError, match="aware"):
        format_micro_time(datetime(2026, 1, 1))
    assert lease_duration_seconds(2) == 2
    assert lease_duration_seconds(1.5) == 2
    assert lease_duration_seconds(0.2) == 1


def test_new_lease() -> None:
    lease = new_lease(namespace=NS, name="l", identity="me", lease_duration=14.2, now=WALL)
    assert lease == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l", "namespace": NS},
        "spec": {
            "holderIdentity": "me",
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-11-22T10:00:00.000000Z",
            "renewTime": "2026-11-22T10:00:00.000000Z",
            "leaseTransitions": 0,
        },
    }


def test_claimed_lease_takeover_counts_a_transition_and_keeps_unknown_fields() -> None:
    observed = {"metadata": {"name": "l", "resourceVersion": "7"}, "spec": lease_spec("other", preferredHolder="x")}
    lease = claimed_lease(observed, identity="me", lease_duration=15, now=WALL)
    assert lease["metadata"] == {"name": "l", "resourceVersion": "7"}
    assert lease["spec"] == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2026-11-22T10:00:00.000000Z",
        "renewTime": "2026-11-22T10:00:00.000000Z",
        "leaseTransitions": 4,
        "preferredHolder": "x",
    }
    assert observed["spec"]["holderIdentity"] == "other", "the observed object must not be modified"


def test_claimed_lease_renewal_keeps_acquire_time_and_transitions() -> None:
    observed = {"metadata": {"resourceVersion": "7"}, "spec": lease_spec("me")}
    spec = claimed_lease(observed, identity="me", lease_duration=15, now=WALL)["spec"]
    assert spec["acquireTime"] == "2026-11-22T09:00:00.000000Z"
    assert spec["renewTime"] == "2026-11-22T10:00:00.000000Z"
    assert spec["leaseTransitions"] == 3


def test_claimed_lease_after_release_counts_a_transition() -> None:
    released = released_lease({"metadata": {}, "spec": lease_spec("me")}, now=WALL)
    assert claimed_lease(released, identity="me", lease_duration=15, now=WALL)["spec"]["leaseTransitions"] == 4


def test_released_lease_as_client_go() -> None:
    observed = {"metadata": {"resourceVersion": "9"}, "spec": lease_spec("me")}
    lease = released_lease(observed, now=WALL)
    assert lease["metadata"] == {"resourceVersion": "9"}
    assert lease["spec"] == {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "acquireTime": "2026-11-22T10:00:00.000000Z",
        "renewTime": "2026-11-22T10:00:00.000000Z",
        "leaseTransitions": 3,
    }
    assert holder_of(lease["spec"]) == ""
    assert holder_of(None) == ""
    assert holder_of({"holderIdentity": 3}) == ""


def test_a_sighting_keeps_its_start_while_the_record_stays_the_same() -> None:
    first = sighted(None, lease_spec("other"), now=1.0)
    assert sighted(first, lease_spec("other"), now=9.0) is first
    renewed = sighted(first, lease_spec("other", renewTime="2026-11-22T10:00:09.000000Z"), now=9.0)
    assert renewed.since == 9.0
    assert sighted(renewed, None, now=10.0) == Sighting(None, 10.0)


@pytest.mark.parametrize(
    ("spec", "now", "live"),
    [
        pytest.param(lease_spec("other"), 14.9, True, id="renewed-within-its-duration"),
        pytest.param(lease_spec("other"), 15.0, False, id="expired"),
        pytest.param(lease_spec(""), 0.0, False, id="released"),
        pytest.param(None, 0.0, False, id="missing"),
    ],
)
def test_is_live(spec: dict[str, Any] | None, now: float, live: bool) -> None:
    assert is_live(Sighting(spec, 0.0), now=now, lease_duration=10.0) is live
