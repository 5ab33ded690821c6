"""``RepeatedFailure``: a failure that goes on is a warning when it starts and once a period, debug in between."""

from __future__ import annotations

import logging

import pytest

from tests.support.clock import ManualClock
from webserver_operator.runtime.leases.repeats import RepeatedFailure


def test_warns_when_it_starts_then_once_a_period_with_the_count() -> None:
    clock = ManualClock(0.0)
    failures = RepeatedFailure(every=60.0, clock=clock)
    levels = []
    for second in range(0, 125, 2):
        clock.now = float(second)
        levels.append((second, failures.failed("renew: timed out")))
    warnings = [(second, report) for second, report in levels if report.level == logging.WARNING]
    assert [second for second, _ in warnings] == [0, 60, 120]
    assert warnings[0][1].suffix == ""
    assert warnings[1][1].suffix == " (failed 30 times since the last warning)"
    assert all(report.level == logging.DEBUG for second, report in levels if second not in (0, 60, 120))


def test_a_different_failure_is_a_warning_at_once_and_success_starts_over() -> None:
    clock = ManualClock(0.0)
    failures = RepeatedFailure(every=60.0, clock=clock)
    assert failures.failed("acquire: 503").level == logging.WARNING
    assert failures.failed("acquire: 503").level == logging.DEBUG
    assert failures.failed("acquire: 403").level == logging.WARNING
    assert failures.succeeded() is True
    assert failures.succeeded() is False
    assert failures.failed("acquire: 403").level == logging.WARNING


def test_the_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="every must be a positive number of seconds"):
        RepeatedFailure(every=0)
