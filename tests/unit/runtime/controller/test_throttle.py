"""Throttle: keys refused with 429 are held, one probes per Retry-After, a probe that gets through lets all go."""

from __future__ import annotations

from webserver_operator.runtime.controller.throttle import DEFAULT_RETRY_AFTER, Throttle

A, B, C = "a", "b", "c"


def nothing_out(_key: str) -> bool:
    return False


def still_out(_key: str) -> bool:
    return True


def test_no_probe_before_the_retry_after_of_the_latest_refusal() -> None:
    throttle: Throttle[str] = Throttle()
    assert throttle.hold(A, 2.0, now=10.0), "the first refusal starts a throttled period"
    assert not throttle.hold(B, 3.0, now=11.0)
    assert throttle.due(13.9, nothing_out) is None
    assert throttle.due(14.0, nothing_out) == A, "the longest-held key probes first"
    assert throttle.held() == [B]


def test_a_probe_that_gets_through_lets_every_held_key_go() -> None:
    throttle: Throttle[str] = Throttle()
    for key in (A, B, C):
        throttle.hold(key, 1.0, now=0.0)
    probe = throttle.due(1.0, nothing_out)
    throttle.ran(probe or "")
    assert throttle.settled(B) == [], "only the probe's outcome tells whether the throttling ended"
    assert sorted(throttle.settled(A)) == [B, C]
    assert not throttle.active


def test_a_probe_refused_again_is_held_again_and_the_next_probe_waits_for_the_new_retry_after() -> None:
    throttle: Throttle[str] = Throttle()
    throttle.hold(A, 1.0, now=0.0)
    throttle.hold(B, 1.0, now=0.0)
    assert throttle.due(1.0, nothing_out) == A
    assert throttle.due(1.1, still_out) is None, "one probe at a time"
    throttle.hold(A, 1.0, now=1.2)
    assert throttle.due(2.1, nothing_out) is None
    assert throttle.due(2.2, nothing_out) == B
    assert throttle.held() == [A]


def test_a_probe_that_will_not_report_is_replaced() -> None:
    throttle: Throttle[str] = Throttle()
    throttle.hold(A, 1.0, now=0.0)
    throttle.hold(B, 1.0, now=0.0)
    assert throttle.due(1.0, nothing_out) == A
    assert throttle.due(1.2, nothing_out) == B, "A is neither queued nor running: it was handed over or paused"


def test_a_refusal_without_retry_after_waits_the_api_servers_default() -> None:
    throttle: Throttle[str] = Throttle()
    throttle.hold(A, None, now=0.0)
    assert throttle.due(DEFAULT_RETRY_AFTER - 0.01, nothing_out) is None
    assert throttle.due(DEFAULT_RETRY_AFTER, nothing_out) == A


def test_keys_handed_over_are_dropped_with_the_probe() -> None:
    throttle: Throttle[str] = Throttle()
    throttle.hold(A, 1.0, now=0.0)
    throttle.hold(B, 1.0, now=0.0)
    assert throttle.due(1.0, still_out) == A
    throttle.drop(lambda key: key == A)
    assert throttle.due(1.1, still_out) == B
    throttle.drop(lambda _key: True)
    assert not throttle.active
