"""The command line: exit codes, `manifests` and `version`."""

from __future__ import annotations

from pathlib import Path

import pytest

from webserver_operator import __version__
from webserver_operator.cli import main


def test_run_exits_2_with_the_message_on_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--workers", "0"]) == 2
    assert "invalid setting workers" in capsys.readouterr().err


def test_manifests_command_writes_what_is_committed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    assert main(["manifests", "--output", str(tmp_path / "config"), "--chart-dir", str(tmp_path / "chart")]) == 0
    for written in (tmp_path / "config").rglob("*.yaml"):
        committed = root / "config" / written.relative_to(tmp_path / "config")
        assert written.read_text() == committed.read_text(), f"{committed} is stale: run `make manifests`"
    assert "wrote" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"webserver-operator {__version__}"


def test_run_help_shows_every_flag_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    from webserver_operator.manager.configuration import setting_fields  # noqa: PLC0415 - only this test needs it

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in setting_fields():
        assert f"--{name.replace('_', '-')}" in text
    assert "(default: 4)" in text  # --workers
    assert "(default: :8443)" in text  # --metrics-bind-address
    assert "--metrics-secure, --no-metrics-secure" in text
    assert "(default: off)" in text  # --leader-elect
    assert text.count("(default:") == len(setting_fields())
