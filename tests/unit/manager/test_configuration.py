"""Settings: defaults, flags over environment, readable errors naming flag and variable, the README table."""

from __future__ import annotations

from pathlib import Path

import pytest

from webserver_operator.cli import build_parser
from webserver_operator.core.settings import MIN_MAX_LOOP_LAG, parse_bind_address
from webserver_operator.manager.configuration import Settings, SettingsError, load_settings, setting_fields
from webserver_operator.manager.probes import Heartbeat


def _parse_run(*argv: str) -> Settings:
    return load_settings(build_parser().parse_args(["run", *argv]))


def test_defaults_match_controller_runtime_conventions(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _parse_run()
    assert s.server.metrics_bind_address == ":8443"  # kubebuilder v4: HTTPS on 8443, behind authn/authz
    assert s.server.metrics_secure is True
    assert s.server.metrics_cert_path is None  # self-signed at start
    assert s.server.health_probe_bind_address == ":8081"
    assert (s.lease.lease_duration, s.lease.renew_deadline, s.lease.retry_period) == (
        15.0,
        10.0,
        2.0,
    )
    assert s.watch.namespaces == []
    assert s.client.qps is None


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBSERVER_OPERATOR_NAMESPACES", "b, a")
    monkeypatch.setenv("WEBSERVER_OPERATOR_WORKERS", "7")
    monkeypatch.setenv("WEBSERVER_OPERATOR_LEADER_ELECT", "true")
    s = _parse_run("--workers", "3")
    assert s.watch.namespaces == ["a", "b"]
    assert s.controller.workers == 3
    assert s.leader_election.leader_elect is True
    assert _parse_run("--no-leader-elect").leader_election.leader_elect is False


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--workers", "0"], "invalid setting workers (--workers / WEBSERVER_OPERATOR_WORKERS)"),
        (["--metrics-bind-address", "8080"], "is not a bind address: use HOST:PORT or :PORT"),
        (["--namespaces", "Bad_NS"], "'Bad_NS' is not a namespace name"),
        (["--renew-deadline", "20"], "renew_deadline (20.0s) must be shorter than lease_duration (15.0s)"),
        (["--retry-period", "9"], "retry_period (9.0s) must be shorter than renew_deadline"),
        (["--renew-deadline", "2.2", "--retry-period", "2"], "by more than its 20% jitter"),
        (["--retry-period", "0"], "retry_period (--retry-period / WEBSERVER_OPERATOR_RETRY_PERIOD)"),
        (["--lease-duration", "inf"], "lease_duration (--lease-duration / WEBSERVER_OPERATOR_LEASE_DURATION)"),
        (["--log-format", "xml"], "log_format (--log-format / WEBSERVER_OPERATOR_LOG_FORMAT)"),
        (["--leader-election-id", "Leader_Lock"], "'Leader_Lock' is not a Lease name: use a DNS-1123 subdomain"),
        (["--leader-election-id", "x" * 254], "is not a Lease name: use a DNS-1123 subdomain"),
        (["--leader-election-namespace", "Ops_NS"], "'Ops_NS' is not a namespace name: use a DNS-1123 label"),
        (["--leader-election-namespace", "a" * 64], "is not a namespace name: use a DNS-1123 label"),
        (["--metrics-max-connections", "0"], "metrics_max_connections (--metrics-max-connections / WEBSERVER_"),
        (["--max-loop-lag", "1"], "max_loop_lag (--max-loop-lag / WEBSERVER_OPERATOR_MAX_LOOP_LAG): must be a number"),
        (["--max-loop-lag", "0.4"], "of at least 2: the event loop's heartbeat ticks every 0.5 s"),
        (["--watch-stall-timeout", "0.01"], "watch_stall_timeout (--watch-stall-timeout / WEBSERVER_OPERATOR_WATCH_"),
        (["--watch-stall-timeout", "0"], "of at least 1: a shorter stall timeout restarts watches in a loop"),
        (
            ["--no-metrics-secure", "--metrics-cert-path", "/certs"],
            "metrics_cert_path is set but --no-metrics-secure serves /metrics over plain HTTP: drop one of them",
        ),
    ],
)
def test_invalid_settings_fail_fast_naming_the_setting(argv: list[str], expected: str) -> None:
    with pytest.raises(SettingsError) as err:
        _parse_run(*argv)
    assert expected in str(err.value)


def test_valid_lease_names_and_limits_are_accepted() -> None:
    s = _parse_run(
        "--leader-election-id=webserver-operator.leader-2",
        "--leader-election-namespace=ops-1",
        "--max-loop-lag=2",
        "--watch-stall-timeout=1",
    )
    assert s.leader_election.leader_election_id == "webserver-operator.leader-2"
    assert s.leader_election.leader_election_namespace == "ops-1"
    assert s.server.max_loop_lag == 2.0
    assert s.watch.stall_timeout == 1.0
    assert _parse_run().watch.stall_timeout is None, "unset: the informers draw 90-120 s per watch"


def test_the_smallest_loop_lag_limit_leaves_room_for_several_heartbeats() -> None:
    """Liveness must not flap: the smallest accepted --max-loop-lag spans several ticks of the loop heartbeat."""
    assert Heartbeat().interval * 4 <= MIN_MAX_LOOP_LAG


def test_bind_addresses() -> None:
    assert parse_bind_address(":8080") == ("0.0.0.0", 8080)  # noqa: S104 - the documented default
    assert parse_bind_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind_address("[::1]:9") == ("::1", 9)
    with pytest.raises(ValueError, match="not a bind address"):
        parse_bind_address("localhost:99999")
    assert _parse_run("--metrics-bind-address", "0").server.metrics_bind_address == "0"


def test_readme_documents_every_setting() -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    for name in setting_fields():
        row = f"| `--{name.replace('_', '-')}` | `WEBSERVER_OPERATOR_{name.upper()}` |"
        assert row in readme, f"README's configuration table lacks {name}: add the row {row}"
