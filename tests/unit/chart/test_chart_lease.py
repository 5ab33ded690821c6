"""The chart's Lease timings: values that reach the operator's flags, with the operator's own defaults.

Why: the timings were only reachable through `extraArgs`; as values they are documented and validated, but a chart
default that differs from the operator's would silently change fail-over on `helm upgrade`, and flags rendered for
the defaults would roll the operator's Deployment on the upgrade that adds them. So the defaults are the operator's
and render no flag; other values render theirs. The rendered flags are parsed by the operator's own CLI parser and
settings, so the comparison is with what the process would really use.
"""

from __future__ import annotations

import pytest

from tests.support.chart import flag_values_of, helm_template, manager_of, render
from webserver_operator.cli import build_parser
from webserver_operator.core.settings import LeaseSettings
from webserver_operator.manager.configuration import load_settings

pytestmark = pytest.mark.tools


def _operator_settings(args: list[str]) -> LeaseSettings:
    return load_settings(build_parser().parse_args(["run", *args])).lease


def test_default_lease_timings_are_the_operators_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for timing in ("LEASE_DURATION", "RENEW_DEADLINE", "RETRY_PERIOD"):
        monkeypatch.delenv(f"WEBSERVER_OPERATOR_{timing}", raising=False)
    args = manager_of(render())["args"]
    chart = _operator_settings(args)
    default = LeaseSettings()
    assert (chart.lease_duration, chart.renew_deadline, chart.retry_period) == (
        default.lease_duration,
        default.renew_deadline,
        default.retry_period,
    )
    for flag in ("--lease-duration", "--renew-deadline", "--retry-period"):
        assert flag_values_of(args, flag) == [], f"{flag} rendered for the default value"
    explicit = manager_of(
        render(
            "--set-json",
            "leaderElection.leaseDuration=15.0",
            "--set-json",
            "leaderElection.renewDeadline=10",
            "--set-json",
            "leaderElection.retryPeriod=2.0",
        )
    )["args"]
    assert explicit == args, "the defaults set explicitly must render the same Deployment"


def test_lease_timings_from_values_reach_the_flags() -> None:
    args = manager_of(
        render("--set", "leaderElection.leaseDuration=30,leaderElection.renewDeadline=20,leaderElection.retryPeriod=4")
    )["args"]
    assert flag_values_of(args, "--lease-duration") == ["30"]
    assert flag_values_of(args, "--renew-deadline") == ["20"]
    assert flag_values_of(args, "--retry-period") == ["4"]
    chart = _operator_settings(args)
    assert (chart.lease_duration, chart.renew_deadline, chart.retry_period) == (30.0, 20.0, 4.0)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            "leaderElection.leaseDuration=10,leaderElection.renewDeadline=10",
            "leaderElection.renewDeadline (10) must be shorter than leaderElection.leaseDuration (10)",
        ),
        (
            "leaderElection.retryPeriod=9",
            "leaderElection.retryPeriod (9) x 1.2 (its jitter) must be shorter than leaderElection.renewDeadline (10)",
        ),
        ("leaderElection.retryPeriod=0", "retryPeriod"),
    ],
    ids=["renew-not-below-lease", "retry-too-close-to-renew", "zero"],
)
def test_timings_the_operator_would_refuse_fail_at_install(values: str, message: str) -> None:
    result = helm_template("--set", values, check=False)
    assert result.returncode != 0
    assert message in result.stderr
