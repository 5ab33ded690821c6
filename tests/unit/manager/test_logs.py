"""Log lines: JSON with fields and redacted tokens, and the text form."""

from __future__ import annotations

import json
import logging

from webserver_operator.manager.logs import JsonFormatter, TextFormatter
from webserver_operator.runtime.controller.logcontext import reconciling


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


def test_json_keys_are_controller_runtimes() -> None:
    entry = json.loads(JsonFormatter().format(_record("created Deployment", namespace="ns", object_name="web")))
    assert (entry["namespace"], entry["name"], entry["logger"]) == ("ns", "web", "webserver_operator.x")
    assert "object_name" not in entry


def test_lines_written_inside_a_reconcile_carry_its_id() -> None:
    with reconciling(controller="webserver", namespace="ns", name="web") as first:
        inside = json.loads(JsonFormatter().format(_record("repaired drift")))
    with reconciling(controller="webserver", namespace="ns", name="web") as second:
        again = json.loads(JsonFormatter().format(_record("repaired drift")))
    outside = json.loads(JsonFormatter().format(_record("caches synced")))
    assert (inside["controller"], inside["namespace"], inside["name"]) == ("webserver", "ns", "web")
    assert inside["reconcileID"] == first.reconcile_id != second.reconcile_id == again["reconcileID"]
    assert "reconcileID" not in outside
