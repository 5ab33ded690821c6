"""The chaos verdicts on hand-made audit records: each rule passes on calm traffic and fails on what it targets."""

from __future__ import annotations

import json
from pathlib import Path

from chaos.replica import Incident
from chaos.verdicts import Window, deposed_writes, figures, leader_changes, lease_timeline, rules
from harness.audit import AuditLog, Request

LEASE = "chaos-leader"
A = "system:serviceaccount:webserver-operator-audited:chaos-op-a"
B = "system:serviceaccount:webserver-operator-audited:chaos-op-b"


def req(
    t: float,
    user: str,
    verb: str,
    resource: str,
    *,
    code: int = 200,
    name: str = "web",
    holder: str | None = None,
    uri: str = "",
) -> Request:
    return Request(
        audit_id=f"{user}-{verb}-{resource}-{t}",
        received=t,
        completed=t + 0.01,
        user=user,
        user_agent="webserver-operator/0.1.0",
        verb=verb,
        resource=resource,
        namespace="ns",
        name=LEASE if resource == "leases" else name,
        code=code,
        jti="",
        lease_holder=holder,
        uri=uri,
    )


def renewals(user: str, holder: str, times: list[float]) -> list[Request]:
    return [req(t, user, "update", "leases", holder=holder) for t in times]


def test_a_leader_writing_between_renewals_is_not_deposed() -> None:
    traffic = [*renewals(A, "op-a_1", [0, 2, 4, 6]), req(5, A, "patch", "deployments")]
    accepted, rejected = deposed_writes(traffic, lease_timeline(traffic, LEASE), renew_deadline=7, slack_at=[])
    assert accepted == [] and rejected == []


def test_writes_after_the_renew_deadline_and_from_a_standby_are_deposed() -> None:
    traffic = renewals(A, "op-a_1", [0, 2]) + renewals(B, "op-b_1", [12, 14])
    late = req(10.5, A, "update", "webservers/status")  # last renewal 2 + deadline 7 + slack 1 = 10
    rejected_late = req(11, A, "patch", "deployments", code=409)
    standby = req(1, B, "create", "services")  # B never held the Lease before t=12
    traffic += [late, rejected_late, standby, req(13, B, "patch", "deployments")]
    accepted, rejected = deposed_writes(traffic, lease_timeline(traffic, LEASE), renew_deadline=7, slack_at=[])
    assert sorted(accepted, key=lambda r: r.received) == [standby, late]
    assert rejected == [rejected_late]


def test_injected_latency_extends_the_deadline() -> None:
    traffic = [*renewals(A, "op-a_1", [0]), req(9.5, A, "patch", "deployments")]
    timeline = lease_timeline(traffic, LEASE)
    assert deposed_writes(traffic, timeline, renew_deadline=7, slack_at=[])[0]
    assert not deposed_writes(traffic, timeline, renew_deadline=7, slack_at=[(0, 20, 3.0)])[0]


def test_a_release_is_not_a_renewal() -> None:
    traffic = [*renewals(A, "op-a_1", [0]), req(1, A, "update", "leases", holder=""), req(9, A, "patch", "services")]
    assert deposed_writes(traffic, lease_timeline(traffic, LEASE), renew_deadline=7, slack_at=[])[0]


def test_leader_changes_are_listed_once_per_new_holder() -> None:
    traffic = renewals(A, "op-a_1", [0, 2]) + renewals(B, "op-b_1", [12, 14]) + renewals(A, "op-a_2", [30])
    assert leader_changes(lease_timeline(traffic, LEASE), 5, 40) == ["op-b_1 from +7.0s", "op-a_2 from +25.0s"]


def _figures(traffic: list[Request], incidents: list[Incident], *, baseline_rate: float) -> tuple[Window, list[bool]]:
    window = Window("f", "fault", start=0, healed=5, end=10, canary=1.0, backlog=2.0)
    timeline = lease_timeline(traffic, LEASE)
    fig = figures(
        window,
        traffic,
        timeline=timeline,
        deposed=deposed_writes(traffic, timeline, renew_deadline=7, slack_at=[]),
        incidents=incidents,
        informers_per_process=3,
        slots=2,
        webservers=10,
        baseline_rate=baseline_rate,
    )
    return window, [r.passed for r in rules(window, fig)]


def test_every_rule_passes_on_calm_traffic() -> None:
    traffic = renewals(A, "op-a_1", [0, 2, 4, 6, 8]) + [req(t, A, "get", "webservers") for t in range(10)]
    _, passed = _figures(traffic, [], baseline_rate=2.0)
    assert passed == [True, True, True, True, True]


def test_a_retry_storm_a_relist_loop_a_liveness_failure_and_a_traceback_each_fail_their_rule() -> None:
    storm = [req(3 + i / 100, A, "put", "webservers/status", code=503) for i in range(200)]
    relists = [req(4 + i / 100, A, "list", "deployments") for i in range(40)]
    incidents = [Incident(4, "op-a", "liveness", "HTTP 500"), Incident(4, "op-a", "traceback", "boom")]
    traffic = renewals(A, "op-a_1", [0, 2, 4, 6, 8]) + storm + relists
    window, passed = _figures(traffic, incidents, baseline_rate=2.0)
    assert passed == [True, False, True, False, False]
    window.backlog = None
    assert not rules(
        window, figures(window, traffic, timeline=[], deposed=([], []), incidents=[], informers_per_process=3, slots=2)
    )[0].passed


def test_a_recovery_measured_past_the_limit_fails_it() -> None:
    """The last look of a poll can begin before the limit and end after it: what it measured is what is judged."""
    traffic = renewals(A, "op-a_1", [0, 2, 4, 6, 8])
    window, passed = _figures(traffic, [], baseline_rate=2.0)
    assert passed[0]
    window.backlog = window.cap + 2.3
    verdict = rules(
        window, figures(window, traffic, timeline=[], deposed=([], []), incidents=[], informers_per_process=3, slots=2)
    )[0]
    assert not verdict.passed


def test_the_audit_reader_keeps_one_record_per_request_and_only_the_run_users(tmp_path: Path) -> None:
    def event(audit_id: str, stage: str, user: str, verb: str = "watch", code: int = 200) -> str:
        return json.dumps(
            {
                "auditID": audit_id,
                "stage": stage,
                "verb": verb,
                "user": {"username": user, "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"]}},
                "userAgent": "webserver-operator/0.1.0",
                "objectRef": {"resource": "leases", "namespace": "ns", "name": LEASE},
                "responseStatus": {"code": code},
                "responseObject": {"spec": {"holderIdentity": "op-a_1"}},
                "requestReceivedTimestamp": "2026-01-01T00:00:00.000000Z",
                "stageTimestamp": "2026-01-01T00:00:01.000000Z"
                if stage == "ResponseComplete"
                else "2026-01-01T00:00:00.500000Z",
            }
        )

    log = tmp_path / "audit.log"
    log.write_text(
        "\n".join(
            [
                event("1", "ResponseStarted", A),
                event("1", "ResponseComplete", A),
                event("2", "ResponseComplete", "kwok-admin", verb="update"),
                event("3", "ResponseComplete", A, verb="update"),
            ]
        )
        + "\n"
    )
    found = AuditLog(log, users_prefix=A).requests()
    assert [(r.audit_id, r.verb, r.jti) for r in found] == [("1", "watch", "abc"), ("3", "update", "abc")]
    assert found[1].lease_holder == "op-a_1" and found[0].lease_holder is None


def test_lease_lists_of_sharded_rounds_count_with_the_other_requests_not_with_informer_relists() -> None:
    w = Window("shard-kill", "kill", start=0.0, healed=5.0, end=10.0)
    rounds = [req(t, A, "list", "leases") for t in (1.0, 2.5, 4.0)]
    relist = req(6.0, A, "list", "deployments")
    fig = figures(w, [*rounds, relist], timeline=[], deposed=([], []), incidents=[], informers_per_process=3, slots=1)
    assert fig.lists == 1 and fig.other == 3


def test_the_pages_of_one_paginated_list_count_as_one_list_and_a_relist_loop_still_fails() -> None:
    w = Window("apiserver-restart", "restart", start=0.0, healed=5.0, end=10.0)
    path = "/apis/web.webserver-operator.dev/v1/webservers?limit=10"
    pages = [req(6.0, A, "list", "webservers", uri=path)]
    pages += [req(6.0 + i / 10, A, "list", "webservers", uri=f"{path}&continue=tok{i}") for i in range(1, 20)]
    fig = figures(w, pages, timeline=[], deposed=([], []), incidents=[], informers_per_process=4, slots=1)
    assert fig.lists == 1 and fig.lists <= fig.list_allowance
    loop = [req(6.0 + i / 10, A, "list", "webservers", uri=path) for i in range(20)]
    fig = figures(w, loop, timeline=[], deposed=([], []), incidents=[], informers_per_process=4, slots=1)
    assert fig.lists == 20 and fig.lists > fig.list_allowance


def test_a_reconciles_list_of_pod_events_counts_with_the_other_requests_not_as_a_relist() -> None:
    w = Window("slow-api", "latency", start=0.0, healed=5.0, end=10.0)
    looks = [req(1.0 + i, A, "list", "events") for i in range(8)]
    relist = req(6.0, A, "list", "services")
    fig = figures(w, [*looks, relist], timeline=[], deposed=([], []), incidents=[], informers_per_process=4, slots=1)
    assert fig.lists == 1 and fig.other == 8
