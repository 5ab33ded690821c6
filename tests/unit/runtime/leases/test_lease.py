"""``runtime.leases.lease.Lease`` without a server: claim, hold and release against a fake Lease API.

The fake stores one Lease with a resourceVersion and answers 404/409 like the API server, so optimistic concurrency,
takeovers and deletions can be staged exactly. Time is a fake monotonic clock advanced by the injected sleep, which
is how "the record has not changed for lease_duration on OUR clock" is tested without waiting; only the hung-server
tests use real (short) time, because they are about asyncio timeouts.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.factories import lease_spec
from tests.support.fake_api import FakeApi
from tests.support.waiting import eventually
from webserver_operator import metrics
from webserver_operator.core.resources import LEASES
from webserver_operator.core.settings import LeaseSettings
from webserver_operator.kube.errors import ServerError, TransportError
from webserver_operator.runtime.leases.lease import Lease, LeaseLost

NS = "ops"
WALL = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
_names = itertools.count()


def lease_name() -> str:
    return f"lease-{next(_names)}"


def leads(e: Lease) -> bool:
    """``e.is_held`` through a call, so that mypy does not narrow the property between awaits."""
    return e.is_held


async def spin(predicate: Callable[[], bool], *, limit: int = 100_000) -> None:
    """Let other tasks run until ``predicate()`` holds (fake time: they never really sleep)."""
    for _ in range(limit):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never met")


def gauge(name: str) -> float:
    value = metrics.REGISTRY.get_sample_value("leader_election_master_status", {"name": name})
    assert value is not None
    return value


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    def reached(self, moment: float) -> Callable[[], bool]:
        return lambda: self.now >= moment

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


class FakeLeases(FakeApi):
    """The shared fake, with helpers to set and read one namespace's Leases the way a rival would write them."""

    def store(self, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        return self.put(
            LEASES.path(namespace=NS),
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": NS},
                "spec": dict(spec),
            },
        )

    @property
    def objects(self) -> dict[str, dict[str, Any]]:
        return self.collections[LEASES.path(namespace=NS)]

    def spec(self, name: str) -> dict[str, Any]:
        spec: dict[str, Any] = self.collections[LEASES.path(namespace=NS)][name]["spec"]
        return spec


def elector(
    kube: FakeLeases,
    name: str,
    *,
    identity: str = "me",
    fake: FakeTime | None = None,
    lease_duration: float = 15,
    renew_deadline: float = 10,
    retry_period: float = 2,
    request_timeout: float | None = None,
    release_timeout: float | None = None,
) -> Lease:
    kwargs: dict[str, Any] = {}
    if fake is not None:
        kwargs = {"clock": fake.clock, "sleep": fake.sleep}
    return Lease(
        kube,
        name=name,
        namespace=NS,
        identity=identity,
        settings=LeaseSettings(lease_duration=lease_duration, renew_deadline=renew_deadline, retry_period=retry_period),
        request_timeout=request_timeout,
        release_timeout=release_timeout,
        wall_clock=lambda: WALL,
        rand=lambda: 0.0,
        **kwargs,
    )


# --- acquire -------------------------------------------------------------------------------------------------------


async def test_acquire_creates_the_missing_lease() -> None:
    kube, name = FakeLeases(), lease_name()
    e = elector(kube, name)
    assert gauge(name) == 0
    assert not leads(e)
    await e.acquire()
    assert leads(e)
    assert gauge(name) == 1
    assert kube.spec(name) == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2026-11-22T10:00:00.000000Z",
        "renewTime": "2026-11-22T10:00:00.000000Z",
        "leaseTransitions": 0,
    }


@pytest.mark.parametrize("holder", ["", "me"])
async def test_acquire_released_or_own_lease_at_once(holder: str) -> None:
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    kube.store(name, lease_spec(holder))
    await elector(kube, name, fake=fake).acquire()
    assert fake.now == 1000.0, "no waiting"
    assert kube.spec(name)["holderIdentity"] == "me"
    assert kube.spec(name)["leaseTransitions"] == (4 if holder == "" else 3)


async def test_acquire_waits_until_the_record_is_unchanged_for_the_lease_duration() -> None:
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    kube.store(name, lease_spec("other", renewTime="2999-01-01T00:00:00.000000Z"))
    task = asyncio.create_task(elector(kube, name, fake=fake).acquire())
    # The holder renews for a while: every change of the record restarts our observation.
    for _ in range(5):
        await spin(fake.reached(fake.now + 10))
        kube.store(name, lease_spec("other", renewTime=f"renewed at {fake.now}"))
    renewed_last = fake.now
    assert not task.done()
    await asyncio.wait_for(task, 5)
    waited = fake.now - renewed_last
    assert 15 <= waited <= 15 + 2 * 1.2 + 2, waited
    assert kube.spec(name)["holderIdentity"] == "me"
    assert kube.spec(name)["leaseTransitions"] == 4


async def test_acquire_retries_after_losing_a_write_race_and_after_errors() -> None:
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    kube.store(name, lease_spec(""))
    kube.failures.extend(
        [
            TransportError(method="GET", path="p", cause="connection refused"),
            ServerError(status=503, reason="ServiceUnavailable", message="busy", method="GET", path="p"),
        ]
    )
    e = elector(kube, name, fake=fake)
    original = kube.request
    raced = False

    async def racing(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        nonlocal raced
        if method == "PUT" and not raced:
            raced = True
            kube.store(name, lease_spec("rival", leaseTransitions=4))  # the rival's write lands between our GET and PUT
        return await original(method, path, **kwargs)

    kube.request = racing  # type: ignore[method-assign]
    await asyncio.wait_for(e.acquire(), 5)
    assert raced
    assert kube.spec(name)["holderIdentity"] == "me"
    assert kube.spec(name)["leaseTransitions"] == 5, "rival took it (4), then we did (5)"
    assert fake.now - 1000.0 >= 15, "the rival's fresh lease was respected for its whole duration"


async def test_two_candidates_exactly_one_wins() -> None:
    kube, name = FakeLeases(), lease_name()
    a = elector(kube, name, identity="a", retry_period=0.01, renew_deadline=1, lease_duration=10)
    b = elector(kube, name, identity="b", retry_period=0.01, renew_deadline=1, lease_duration=10)
    tasks = [asyncio.create_task(a.acquire()), asyncio.create_task(b.acquire())]
    done, pending = await asyncio.wait(tasks, timeout=0.3)
    assert len(done) == 1
    assert len(pending) == 1
    winner = a if tasks[0] in done else b
    assert winner.is_held
    assert kube.spec(name)["holderIdentity"] == winner.identity
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


# --- hold ----------------------------------------------------------------------------------------------------------


async def _leading(kube: FakeLeases, name: str, fake: FakeTime, **kwargs: Any) -> Lease:
    e = elector(kube, name, fake=fake, **kwargs)
    await e.acquire()
    return e


async def test_hold_renews_with_one_put_per_period() -> None:
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    e = await _leading(kube, name, fake)
    kube.calls.clear()
    task = asyncio.create_task(e.hold())
    await spin(lambda: len(kube.calls) >= 5)
    assert {(call.method, call.path) for call in kube.calls} == {("PUT", LEASES.path(namespace=NS, name=name))}, (
        "fast path: no GET while renewing"
    )
    assert e.is_held
    assert gauge(name) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not leads(e)
    assert gauge(name) == 0
    assert kube.spec(name)["holderIdentity"] == "me", "cancelling hold does not release"


async def test_hold_ends_when_someone_else_holds_the_lease() -> None:
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    e = await _leading(kube, name, fake)
    kube.store(name, lease_spec("intruder"))
    started = fake.now
    with pytest.raises(LeaseLost, match="held by intruder"):
        await asyncio.wait_for(e.hold(), 5)
    assert fake.now - started <= 2, "one renew period, not the whole deadline"
    assert not e.is_held
    assert gauge(name) == 0
    await e.release()
    assert kube.spec(name)["holderIdentity"] == "intruder", "release never touches someone else's Lease"


async def test_hold_ends_when_the_lease_is_deleted_or_released_by_someone_else() -> None:
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    e = await _leading(kube, name, fake)
    del kube.objects[name]
    with pytest.raises(LeaseLost, match="deleted"):
        await asyncio.wait_for(e.hold(), 5)

    e = await _leading(kube, name, fake)
    kube.store(name, lease_spec(""))
    with pytest.raises(LeaseLost, match="released by someone else"):
        await asyncio.wait_for(e.hold(), 5)


async def test_hold_survives_errors_shorter_than_the_renew_deadline() -> None:
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    e = await _leading(kube, name, fake)
    error = TransportError(method="PUT", path="p", cause="connection reset")
    kube.failures.extend([error] * 3)  # fail at +2, +4, +6 s; the renew at +8 s makes the 10 s deadline
    task = asyncio.create_task(e.hold())
    await spin(lambda: not kube.failures and len(kube.calls) >= 6)
    assert not task.done()
    assert e.is_held
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_writes_stop_at_the_renew_deadline_and_hold_ends_after_a_whole_failed_round() -> None:
    """The fence closes 10 s after the last successful renew was sent, before the 15 s lease can expire; hold() gives
    the failing renew round its whole renew deadline (client-go) and ends after it."""
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    e = await _leading(kube, name, fake)
    acquired_at = fake.now
    kube.fail_always = TransportError(method="PUT", path="p", cause="connection refused")
    task = asyncio.create_task(e.hold())
    await spin(fake.reached(acquired_at + 8))
    assert e.fence.why_not() is None
    await spin(fake.reached(acquired_at + 10))
    assert e.fence.why_not() is not None, "no write may leave once the renew deadline has passed"
    assert not e.is_held
    with pytest.raises(LeaseLost, match="renew deadline"):
        await asyncio.wait_for(task, 5)
    assert fake.now - acquired_at == pytest.approx(2 + 10), "one retry period, then a whole failed renew round"
    assert f"this replica lost lease ops/{name}: could not renew" in (e.fence.why_not() or "")
    assert gauge(name) == 0


async def test_hold_ends_in_time_against_a_hung_api_server() -> None:
    """Real time: a request that never answers is cut by the elector's own timeout."""
    kube, name = FakeLeases(), lease_name()
    e = elector(kube, name, lease_duration=0.6, renew_deadline=0.4, retry_period=0.1)
    await e.acquire()
    kube.hang = True
    started = time.monotonic()
    with pytest.raises(LeaseLost):
        await asyncio.wait_for(e.hold(), 5)
    elapsed = time.monotonic() - started
    assert elapsed < 0.4 + 0.15, elapsed
    assert gauge(name) == 0


async def test_a_frozen_event_loop_closes_the_write_gate_before_a_standby_can_take_over() -> None:
    """Real time, as reported: renew deadline 2 s, lease 3 s. The event loop is blocked (CPU throttling, a big relist)
    for longer than the renew deadline, so nothing in this process runs, the renew loop included. The first code that
    resumes must find writes refused; a flag cleared by the renew loop would still say "leader"."""
    kube, name = FakeLeases(), lease_name()
    e = elector(kube, name, lease_duration=3, renew_deadline=2, retry_period=0.5)
    await e.acquire()
    task = asyncio.create_task(e.hold())
    await asyncio.sleep(0.7)  # at least one renewal
    assert leads(e)
    time.sleep(2.1)  # noqa: ASYNC251 - the point: a loop blocked past the renew deadline since the last renew
    assert not leads(e), "the write gate must close by time, without the renew loop having run"
    assert e.fence.why_not() is not None
    assert "renew deadline" in (e.fence.why_not() or "")
    # The loop runs again: nobody took the Lease, so the next renewal (due within the 0.5 s retry period; a busy
    # machine may take longer) reopens the gate.
    await eventually(lambda: e.fence.why_not() is None, within=5, what="the next renewal reopens the write gate")
    assert not task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert e.fence.why_not() is not None, "a cancelled hold() closes the gate"


class SlowLeases(FakeLeases):
    """Every call answers after ``latency`` seconds of real time (an overloaded API server)."""

    latency = 0.0

    async def request(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        await asyncio.sleep(self.latency)
        return await super().request(method, path, **options)


async def test_a_slow_api_server_costs_neither_the_acquire_nor_the_lease() -> None:
    """Calls slower than half the renew deadline (the old per-call timeout) still acquire and renew: each renew gets
    the whole renew deadline, as in client-go. Scaled down from a 6 s latency at a 10 s renew deadline."""
    kube, name = SlowLeases(), lease_name()
    kube.latency = 1.2  # the old per-call timeout was max(retry period, renew deadline / 2) = 1 s
    e = elector(kube, name, lease_duration=3, renew_deadline=2, retry_period=0.3)
    await asyncio.wait_for(e.acquire(), 10)
    version = kube.objects[name]["metadata"]["resourceVersion"]
    task = asyncio.create_task(e.hold())
    await asyncio.sleep(2.8)  # past the renew deadline after the acquire: renewals must have landed
    assert not task.done(), "hold() must survive renewals that take 60 % of the renew deadline"
    assert kube.objects[name]["metadata"]["resourceVersion"] != version, "renewals landed"
    assert kube.spec(name)["holderIdentity"] == "me"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_failure_that_goes_on_is_warned_about_every_minute(caplog: pytest.LogCaptureFixture) -> None:
    """A standby that cannot read the Lease (403, say) keeps saying so at warning level, not once and then never."""
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    kube.fail_always = ServerError(status=503, reason="ServiceUnavailable", message="busy", method="GET", path="p")
    e = elector(kube, name, identity="standby", fake=fake)
    task = asyncio.create_task(e.acquire())
    started = fake.now
    with caplog.at_level(logging.DEBUG, logger="webserver_operator.runtime.leases.lease"):
        await spin(fake.reached(started + 130))
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "acquire of lease" in r.getMessage()]
    assert len(warnings) == 3, [r.getMessage() for r in warnings]  # at 0 s, about 60 s and about 120 s
    assert "times since the last warning" in warnings[1].getMessage()
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and "acquire of lease" in r.getMessage()]
    assert len(debug) > 40, "the repeats in between are kept at debug"


async def test_hold_needs_acquire() -> None:
    e = elector(FakeLeases(), lease_name())
    with pytest.raises(RuntimeError, match="acquire"):
        await e.hold()


async def test_unexpected_exception_ends_hold() -> None:
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    e = await _leading(kube, name, fake)

    async def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise ZeroDivisionError

    kube.request = broken  # type: ignore[method-assign]
    with pytest.raises(ZeroDivisionError):
        await asyncio.wait_for(e.hold(), 5)
    assert not e.is_held
    assert gauge(name) == 0


# --- release -------------------------------------------------------------------------------------------------------


async def test_release_hands_the_lease_over_and_a_standby_takes_it_at_once() -> None:
    kube, name, fake = FakeLeases(), lease_name(), FakeTime()
    e = await _leading(kube, name, fake)
    standby = elector(kube, name, identity="standby", fake=fake)
    waiting = asyncio.create_task(standby.acquire())
    await fake.sleep(5)
    assert not waiting.done()
    await e.release()
    assert not e.is_held
    assert gauge(name) == 0
    assert kube.spec(name)["holderIdentity"] == ""
    assert kube.spec(name)["leaseDurationSeconds"] == 1
    released_at = fake.now
    await asyncio.wait_for(waiting, 5)
    assert fake.now - released_at <= 2 * 1.2
    assert kube.spec(name)["holderIdentity"] == "standby"
    assert kube.spec(name)["leaseTransitions"] == 1


async def test_release_without_leading_makes_no_call() -> None:
    kube, name = FakeLeases(), lease_name()
    kube.store(name, lease_spec("other"))
    await elector(kube, name).release()
    assert kube.calls == []
    assert kube.spec(name)["holderIdentity"] == "other"


async def test_release_after_a_cancelled_acquire_releases_a_write_that_landed() -> None:
    kube, name = FakeLeases(), lease_name()
    e = elector(kube, name)
    original = kube.request

    async def lost_answer(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        result = await original(method, path, **kwargs)
        if method == "POST":
            await asyncio.Event().wait()  # stored, but the answer never comes back
        return result

    kube.request = lost_answer  # type: ignore[method-assign]
    task = asyncio.create_task(e.acquire())
    await spin(lambda: bool(kube.objects))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    kube.request = original  # type: ignore[method-assign]
    await e.release()
    assert kube.spec(name)["holderIdentity"] == ""


@pytest.mark.parametrize("failure", ["error", "hang"])
async def test_release_never_raises(failure: str, caplog: pytest.LogCaptureFixture) -> None:
    kube, name = FakeLeases(), lease_name()
    e = elector(kube, name, release_timeout=0.1)
    await e.acquire()
    if failure == "hang":
        kube.hang = True
    else:
        kube.fail_always = ServerError(status=500, reason="InternalError", message="boom", method="GET", path="p")
    started = time.monotonic()
    await e.release()
    assert time.monotonic() - started < 1
    assert gauge(name) == 0
    assert "could not release" in caplog.text


async def test_release_is_one_round_trip_so_the_drain_and_release_fit_the_grace_period() -> None:
    """Release writes on the Lease it last wrote (one PUT); a GET only after a 409. SIGKILL must not land first."""
    kube, name = FakeLeases(), lease_name()
    e = elector(kube, name)
    await e.acquire()
    kube.calls.clear()
    await e.release()
    assert [call.method for call in kube.calls] == ["PUT"]
    assert kube.spec(name)["holderIdentity"] == ""


async def test_release_after_someone_wrote_the_lease_reads_it_and_leaves_it_alone() -> None:
    kube, name = FakeLeases(), lease_name()
    e = elector(kube, name)
    await e.acquire()
    kube.store(name, lease_spec("rival"))
    await e.release()
    assert kube.spec(name)["holderIdentity"] == "rival"


def test_an_empty_identity_is_refused() -> None:
    with pytest.raises(ValueError, match="identity must not be empty"):
        Lease(FakeLeases(), name="l", namespace=NS, identity="", settings=LeaseSettings())
