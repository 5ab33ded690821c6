"""The zero-slack Lease-expiry rule (chaos/fencing.py) and the leader-freeze verdict built on it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from chaos import identity, trust
from chaos.fencing import covering, grants, late_writes
from chaos.replica import Incident
from chaos.toxiproxy import Toxiproxy
from chaos.verdicts import Window, lease_timeline
from harness.audit import AuditLog, Request
from tests.unit.chaos.fake_harness import FakeHarness

LEASE = "chaos-unit-leader"
A = identity.username("chaos-unit-op-a")
B = identity.username("chaos-unit-op-b")


def write(t: float, user: str, *, code: int = 200, verb: str = "patch", resource: str = "deployments") -> Request:
    return Request(f"{user}-{verb}-{t}", t, t + 0.001, user, "op", verb, resource, "ns", "web", code, "", None)


def renew(t: float, user: str, holder: str, *, renew_time: float | None = None, duration: float = 10.0) -> Request:
    """A Lease write completed at ``t`` + 5 ms, built (renewTime) at ``renew_time`` (default: 20 ms before ``t``)."""
    built = t - 0.02 if renew_time is None else renew_time
    lease = write(t, user, verb="update", resource="leases")
    return replace(
        lease, name=LEASE, completed=t + 0.005, lease_holder=holder, lease_renew_time=built, lease_duration=duration
    )


def test_a_write_one_microsecond_after_expiry_is_late_and_one_at_expiry_is_not() -> None:
    traffic = [renew(100.0, A, "op-a_1", renew_time=99.98)]  # expires at 109.98
    at_expiry, after = write(109.98, A), write(109.980001, A)
    accepted, rejected = late_writes(
        [*traffic, at_expiry, after], lease_timeline(traffic, LEASE), user=A, start=0, end=200
    )
    assert [late.write for late in accepted] == [after] and rejected == []
    assert "0.000s after the Lease expired (held as op-a_1)" in accepted[0].describe(100.0)


def test_expiry_counts_from_the_renew_time_written_not_from_when_the_server_stored_it() -> None:
    # Built at 100, stored 3 s later (a slow API): the Lease says it expires at 110, whatever the server did.
    traffic = [renew(103.0, A, "op-a_1", renew_time=100.0)]
    accepted, _ = late_writes([*traffic, write(111.0, A)], lease_timeline(traffic, LEASE), user=A, start=0, end=200)
    assert len(accepted) == 1


def test_rejected_writes_are_late_too_and_lease_writes_and_other_replicas_are_not_judged() -> None:
    traffic = [renew(100.0, A, "op-a_1"), renew(111.0, B, "op-b_1")]
    late_rejected = write(112.0, A, code=409)
    lease_retry = write(112.5, A, code=409, verb="update", resource="leases")
    standby = write(113.0, B)
    requests = [*traffic, late_rejected, lease_retry, standby]
    accepted, rejected = late_writes(requests, lease_timeline(traffic, LEASE), user=A, start=0, end=200)
    assert accepted == [] and [late.write for late in rejected] == [late_rejected]


def test_a_renewal_still_in_flight_covers_nothing_and_a_later_one_does() -> None:
    traffic = [renew(100.0, A, "op-a_1"), renew(108.0, A, "op-a_1")]  # the second completes at 108.005
    found = grants(lease_timeline(traffic, LEASE))
    assert covering(found, user=A, at=108.002) == found[0]
    assert covering(found, user=A, at=108.01) == found[1]
    inside = write(115.0, A)  # covered by the renewal stored at 108: expires at 117.98
    assert late_writes([*traffic, inside], lease_timeline(traffic, LEASE), user=A, start=0, end=200) == ([], [])


def test_a_write_no_grant_ever_covered_is_late() -> None:
    accepted, _ = late_writes([write(5.0, A)], [], user=A, start=0, end=10)
    assert accepted[0].grant is None and "never covered" in accepted[0].describe(0.0)


def test_the_audit_reader_keeps_the_renew_time_and_duration_of_a_lease_write(tmp_path: Path) -> None:
    event = {
        "auditID": "1",
        "stage": "ResponseComplete",
        "verb": "update",
        "user": {"username": A},
        "objectRef": {"resource": "leases", "namespace": "ns", "name": LEASE},
        "responseStatus": {"code": 200},
        "responseObject": {
            "spec": {"holderIdentity": "op-a_1", "renewTime": "2026-01-01T00:00:00.123456Z", "leaseDurationSeconds": 10}
        },
        "requestReceivedTimestamp": "2026-01-01T00:00:00.200000Z",
        "stageTimestamp": "2026-01-01T00:00:00.250000Z",
    }
    log = tmp_path / "audit.log"
    log.write_text(json.dumps(event) + "\n")
    (lease,) = AuditLog(log, users_prefix=A).requests()
    assert lease.lease_duration == 10.0
    assert lease.lease_renew_time is not None and round(lease.received - lease.lease_renew_time, 6) == 0.076544


def test_the_leader_freeze_verdict_fails_on_a_write_after_expiry_and_passes_without_one() -> None:
    h = FakeHarness(Toxiproxy("http://127.0.0.1:9"))
    w = Window("leader-freeze", "freeze", start=95.0, healed=120.0, end=140.0)
    w.extra["frozen replica"] = "op-a"
    w.marks.update(frozen=101.0, thawed=120.0)
    traffic = [renew(100.0, A, "op-a_1"), renew(111.5, B, "op-b_1")]
    timeline = lease_timeline(traffic, LEASE)
    (rule,) = trust.judge_leader_freeze(h.as_harness(), w, requests=[*traffic, write(120.01, A)], timeline=timeline)
    assert not rule.passed and "1 accepted, 0 rejected" in rule.detail
    assert "standby's first Lease write" in " ".join(w.extra)
    (rule,) = trust.judge_leader_freeze(h.as_harness(), w, requests=[*traffic, write(105.0, A)], timeline=timeline)
    assert rule.passed


def test_the_slow_api_verdict_fails_on_any_replica_exit_in_the_window() -> None:
    h = FakeHarness(Toxiproxy("http://127.0.0.1:9"))
    w = Window("slow-api", "slow", start=100.0, healed=160.0, end=200.0)
    (rule,) = trust.judge_slow_api(h.as_harness(), w, requests=[], timeline=[])
    assert rule.passed
    h.exits.append(Incident(150.0, "op-a", "exited", "exit code 1"))
    h.exits.append(Incident(250.0, "op-b", "exited", "exit code 1"))  # after the window: not this fault's
    (rule,) = trust.judge_slow_api(h.as_harness(), w, requests=[], timeline=[])
    assert not rule.passed and rule.detail == "1 replica exits in the window: op-a: exit code 1 at +50.0s"
