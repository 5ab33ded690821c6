"""Probe checks: the loop heartbeat and the per-check report."""

from __future__ import annotations

from webserver_operator.manager.probes import Heartbeat, run_checks


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

    ok, text = run_checks({"good": lambda: (True, "fine"), "bad": broken})
    assert ok is False
    assert "[+]good ok: fine" in text
    assert "[-]bad failed: check raised RuntimeError('boom')" in text
