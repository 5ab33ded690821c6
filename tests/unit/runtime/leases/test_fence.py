"""``LeaseFence``: writes are allowed only before the send time of the last successful renew plus the renew deadline."""

from __future__ import annotations

import pytest

from tests.support.clock import ManualClock
from webserver_operator.runtime.leases.fence import LeaseFence


def test_a_new_fence_refuses_until_the_first_renew() -> None:
    fence = LeaseFence("ops/leader", clock=ManualClock())
    assert fence.why_not() == "lease ops/leader is not held by this replica (yet)"
    assert fence.valid_until is None


def test_the_deadline_counts_from_the_send_time_not_from_the_answer() -> None:
    clock = ManualClock()
    fence = LeaseFence("ops/leader", clock=clock)
    fence.renewed(sent=100.0, renew_deadline=10.0)
    clock.now = 106.0  # the answer came 6 s later: the validity still ends at 110
    assert fence.why_not() is None
    assert fence.valid_until == 110.0
    clock.now = 109.999
    assert fence.why_not() is None
    clock.now = 110.0
    why = fence.why_not()
    assert why is not None
    assert "lease ops/leader was sent 10.0s ago, beyond the renew deadline (10s)" in why


def test_a_renew_extends_and_an_older_answer_never_shortens() -> None:
    clock = ManualClock()
    fence = LeaseFence("ops/leader", clock=clock)
    fence.renewed(sent=100.0, renew_deadline=10.0)
    fence.renewed(sent=104.0, renew_deadline=10.0)
    fence.renewed(sent=102.0, renew_deadline=10.0)
    assert fence.valid_until == 114.0


def test_revoke_closes_at_once_and_a_new_acquire_reopens() -> None:
    clock = ManualClock()
    fence = LeaseFence("ops/leader", clock=clock)
    fence.renewed(sent=100.0, renew_deadline=10.0)
    fence.revoke("this replica released lease ops/leader (shutting down)")
    assert fence.why_not() == "this replica released lease ops/leader (shutting down)"
    assert fence.valid_until is None
    clock.now = 200.0
    fence.renewed(sent=199.0, renew_deadline=10.0)
    assert fence.why_not() is None
    assert fence.valid_until == 209.0


@pytest.mark.parametrize("renew_deadline", [0.0, -1.0, float("nan"), float("inf")])
def test_a_renew_deadline_must_be_a_positive_number(renew_deadline: float) -> None:
    with pytest.raises(ValueError, match="renew_deadline must be a positive number of seconds"):
        LeaseFence("ops/leader").renewed(sent=1.0, renew_deadline=renew_deadline)
