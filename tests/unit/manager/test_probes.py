"""Probe checks: the loop heartbeat and the per-check report."""

from __future__ import annotations

from webserver_operator.manager.probes import Heartbeat, Starting, cache_synced, run_checks, watches_running


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


def test_a_server_starting_beside_the_controller_is_not_ready_until_it_listens_and_says_why_it_never_will() -> None:
    starting = Starting("metrics server")
    assert starting.check() == (False, "metrics server starting")
    starting.listening()
    assert starting.check() == (True, "metrics server listening")
    failed = Starting("metrics server")
    failed.failed("cannot listen on 127.0.0.1:8443 (Address in use): pick another address/port")
    ok, detail = failed.check()
    assert ok is False
    assert (
        detail
        == "metrics server failed to start: cannot listen on 127.0.0.1:8443 (Address in use): pick another address/port"
    )


class _SilentInformer:
    name = "webservers"
    stall_timeout = 10.0

    def seconds_since_activity(self) -> float:
        return 3600.0  # an hour without a byte from the API server: an outage, not a wedged process


class _Group:
    def __init__(self, *, alive: bool, synced: bool) -> None:
        self.died = not alive
        self.has_synced = synced
        self.informers = [_SilentInformer()]


def test_liveness_ignores_an_unavailable_api_and_fails_only_when_a_watch_task_died() -> None:
    """An API outage (or a missing CRD or permission) must not restart every replica: liveness means wedged."""
    assert watches_running(_Group(alive=True, synced=True))()[0] is True
    ok, detail = watches_running(_Group(alive=False, synced=True))()
    assert ok is False
    assert "died" in detail


def test_readiness_reports_the_cache_and_what_to_check() -> None:
    ok, detail = cache_synced(_Group(alive=True, synced=False), "webservers")()
    assert ok is False
    assert "is the CRD installed" in detail
    assert cache_synced(_Group(alive=True, synced=True), "webservers")()[0] is True
