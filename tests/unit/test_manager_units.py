"""Pure parts of the manager layer: settings validation and messages, log formatting, heartbeat, CLI."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from webserver_operator.cli import build_parser, main
from webserver_operator.manager.health import Heartbeat, _run_checks
from webserver_operator.manager.logs import JsonFormatter, TextFormatter
from webserver_operator.manager.settings import Settings, SettingsError, load_settings, parse_bind_address


def _parse_run(*argv: str) -> Settings:
    return load_settings(build_parser().parse_args(["run", *argv]))


def test_defaults_match_controller_runtime_conventions(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _parse_run()
    assert s.metrics_bind_address == ":8080"
    assert s.health_probe_bind_address == ":8081"
    assert (s.lease_duration, s.renew_deadline, s.retry_period) == (15.0, 10.0, 2.0)
    assert s.namespaces == []
    assert s.qps is None


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBSERVER_OPERATOR_NAMESPACES", "b, a")
    monkeypatch.setenv("WEBSERVER_OPERATOR_WORKERS", "7")
    monkeypatch.setenv("WEBSERVER_OPERATOR_LEADER_ELECT", "true")
    s = _parse_run("--workers", "3")
    assert s.namespaces == ["a", "b"]
    assert s.workers == 3
    assert s.leader_elect is True
    assert _parse_run("--no-leader-elect").leader_elect is False


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--workers", "0"], "invalid setting workers (--workers / WEBSERVER_OPERATOR_WORKERS)"),
        (["--metrics-bind-address", "8080"], "is not a bind address: use HOST:PORT or :PORT"),
        (["--namespaces", "Bad_NS"], "'Bad_NS' is not a namespace name"),
        (["--renew-deadline", "20"], "renew_deadline (20.0s) must be shorter than lease_duration (15.0s)"),
        (["--retry-period", "9"], "retry_period (9.0s) must be shorter than renew_deadline"),
        (["--log-format", "xml"], "log_format (--log-format / WEBSERVER_OPERATOR_LOG_FORMAT)"),
    ],
)
def test_invalid_settings_fail_fast_naming_the_setting(argv: list[str], expected: str) -> None:
    with pytest.raises(SettingsError) as err:
        _parse_run(*argv)
    assert expected in str(err.value)


def test_run_exits_2_with_the_message_on_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--workers", "0"]) == 2
    assert "invalid setting workers" in capsys.readouterr().err


def test_bind_addresses() -> None:
    assert parse_bind_address(":8080") == ("0.0.0.0", 8080)  # noqa: S104 - the documented default
    assert parse_bind_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind_address("[::1]:9") == ("::1", 9)
    with pytest.raises(ValueError, match="not a bind address"):
        parse_bind_address("localhost:99999")
    assert _parse_run("--metrics-bind-address", "0").metrics_bind_address == "0"


def _record(msg: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("webserver_operator.x", logging.INFO, __file__, 1, msg, (), None)
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_json_log_line_carries_fields_and_redacts_tokens() -> None:
    line = JsonFormatter().format(
        _record("calling with Authorization: Bearer abcdefghijklmnop", namespace="ns", result="success")
    )
    entry = json.loads(line)
    assert entry["level"] == "info"
    assert entry["namespace"] == "ns"
    assert entry["result"] == "success"
    assert "abcdefghijklmnop" not in line
    assert "Bearer <redacted>" in entry["msg"]
    assert "\n" not in line


def test_text_log_line() -> None:
    line = TextFormatter().format(_record("reconciled", namespace="ns", object_name="web"))
    assert line.endswith("INFO    webserver_operator.x: reconciled namespace=ns object_name=web")


def test_heartbeat_detects_a_blocked_loop() -> None:
    now = [100.0]
    beat = Heartbeat(clock=lambda: now[0])
    assert beat.check(max_lag=5)[0] is True
    now[0] += 6
    ok, detail = beat.check(max_lag=5)
    assert ok is False
    assert "event loop blocked for 6.0s" in detail


def test_probe_report_lists_each_check_and_survives_a_broken_one() -> None:
    def broken() -> tuple[bool, str]:
        raise RuntimeError("boom")

    ok, text = _run_checks({"good": lambda: (True, "fine"), "bad": broken})
    assert ok is False
    assert "[+]good ok: fine" in text
    assert "[-]bad failed: check raised RuntimeError('boom')" in text


def test_manifests_command_writes_what_is_committed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    assert main(["manifests", "--output", str(tmp_path / "config"), "--chart-dir", str(tmp_path / "chart")]) == 0
    for written in (tmp_path / "config").rglob("*.yaml"):
        committed = root / "config" / written.relative_to(tmp_path / "config")
        assert written.read_text() == committed.read_text(), f"{committed} is stale: run `make manifests`"
    assert "wrote" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == "webserver-operator 0.1.0"


def test_readme_documents_every_setting() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for name in Settings.model_fields:
        row = f"| `--{name.replace('_', '-')}` | `WEBSERVER_OPERATOR_{name.upper()}` |"
        assert row in readme, f"README's configuration table lacks {name}: add the row {row}"
