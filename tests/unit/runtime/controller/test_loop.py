"""Controller: reconcile outcomes (success, requeue_after, errors, TerminalError), workers, stop, resync."""

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.fake_api import status_error
from tests.support.waiting import eventually
from webserver_operator import metrics
from webserver_operator.kube.errors import TooManyRequests, WritesStopped
from webserver_operator.runtime.controller.loop import Controller
from webserver_operator.runtime.controller.result import Result, TerminalError, is_terminal
from webserver_operator.runtime.controller.workqueue import WorkQueue
from webserver_operator.runtime.informers.store import Store
from webserver_operator.runtime.leases.fence import LeaseFence

pytestmark = pytest.mark.timeout(5)

Key = tuple[str, str]
A: Key = ("ns", "a")
B: Key = ("ns", "b")


class ScriptedReconciler:
    """Calls ``behaviour(key, attempt)`` per reconcile and records when each key ran."""

    def __init__(self, behaviour: Callable[[Key, int], Any], *, delay: float = 0.0) -> None:
        self.behaviour = behaviour
        self.delay = delay
        self.calls: list[tuple[Key, float]] = []
        self.attempts: collections.Counter[Key] = collections.Counter()
        self.active: collections.Counter[Key] = collections.Counter()
        self.max_active: collections.Counter[Key] = collections.Counter()

    async def reconcile(self, key: Key) -> Result:
        self.attempts[key] += 1
        self.calls.append((key, asyncio.get_running_loop().time()))
        self.active[key] += 1
        self.max_active[key] = max(self.max_active[key], self.active[key])
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            outcome = self.behaviour(key, self.attempts[key])
        finally:
            self.active[key] -= 1
        if isinstance(outcome, BaseException):
            raise outcome
        assert isinstance(outcome, Result)
        return outcome

    def times(self, key: Key) -> list[float]:
        return [t for k, t in self.calls if k == key]


@contextlib.asynccontextmanager
async def running(controller: Controller) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(controller.run())
    await asyncio.sleep(0)  # let it start: keys offered before a controller runs are dropped
    try:
        yield task
    finally:
        await controller.stop(1.0)
        await asyncio.wait_for(task, 2)


def total(controller: str, result: str) -> float:
    labels = {"controller": controller, "result": result}
    return metrics.REGISTRY.get_sample_value("controller_runtime_reconcile_total", labels) or 0.0


def reconciling(controller: str) -> float:
    """Workers inside a reconcile now, as ``controller_runtime_active_workers`` shows it."""
    labels = {"controller": controller}
    return metrics.REGISTRY.get_sample_value("controller_runtime_active_workers", labels) or 0.0


def errors(controller: str) -> float:
    labels = {"controller": controller}
    return metrics.REGISTRY.get_sample_value("controller_runtime_reconcile_errors_total", labels) or 0.0


async def test_failing_key_retries_with_growing_backoff_while_other_keys_flow() -> None:
    def behaviour(key: Key, attempt: int) -> Any:
        if key == A and attempt <= 4:
            return RuntimeError(f"boom {attempt}")
        return Result()

    rec = ScriptedReconciler(behaviour)
    queue: WorkQueue[Key] = WorkQueue(name="ctl-retry", base_backoff=0.01, max_backoff=1.0)
    controller = Controller("ctl-retry", rec, queue, workers=2)
    async with running(controller):
        controller.enqueue(A)
        for _ in range(10):
            controller.enqueue(B)
            await eventually(lambda: len(queue) == 0 and rec.active[B] == 0)
            await asyncio.sleep(0.005)
        await eventually(lambda: rec.attempts[A] == 5)
        await eventually(lambda: rec.active[A] == 0)

    gaps = [t2 - t1 for t1, t2 in zip(rec.times(A), rec.times(A)[1:], strict=False)]
    assert gaps[0] >= 0.009
    assert gaps[3] >= 0.075, f"backoff should double per failure: {gaps}"
    assert gaps[3] > gaps[0] * 3
    assert rec.attempts[B] >= 5, "other keys keep flowing while one key backs off"
    assert queue.num_requeues(A) == 0, "success forgets the backoff"
    assert errors("ctl-retry") == 4
    assert total("ctl-retry", "error") == 4
    assert total("ctl-retry", "success") == rec.attempts[A] - 4 + rec.attempts[B]


async def test_terminal_error_is_counted_but_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    rec = ScriptedReconciler(lambda key, attempt: TerminalError("spec.image is empty"))
    queue: WorkQueue[Key] = WorkQueue(name="ctl-terminal", base_backoff=0.001)
    controller = Controller("ctl-terminal", rec, queue)
    with caplog.at_level(logging.ERROR):
        async with running(controller):
            controller.enqueue(A)
            await eventually(lambda: rec.attempts[A] == 1 and rec.active[A] == 0)
            await asyncio.sleep(0.05)
    assert rec.attempts[A] == 1
    assert queue.num_requeues(A) == 0
    assert errors("ctl-terminal") == 1
    terminal = metrics.REGISTRY.get_sample_value(
        "controller_runtime_terminal_reconcile_errors_total", {"controller": "ctl-terminal"}
    )
    assert terminal == 1
    assert "spec.image is empty" in caplog.text
    record = next(r for r in caplog.records if "terminally" in r.getMessage())
    assert [record.__dict__[f] for f in ("namespace", "object_name", "controller")] == ["ns", "a", "ctl-terminal"]


async def test_only_a_terminal_error_by_type_stops_the_retries() -> None:
    """A TerminalError, a subclass, or an error raised from one is terminal; a look-alike attribute is not."""

    class Refused(TerminalError):
        pass

    class LooksTerminal(Exception):
        terminal = True

    wrapped = ValueError("wrapped")
    wrapped.__cause__ = TerminalError("root")
    assert is_terminal(wrapped)
    assert is_terminal(Refused("spec refused"))
    assert not is_terminal(LooksTerminal("only an attribute")), "recognised by type, not by a duck-typed attribute"
    assert not is_terminal(RuntimeError("plain"))

    rec = ScriptedReconciler(lambda key, attempt: LooksTerminal("x") if attempt == 1 else Result())
    queue: WorkQueue[Key] = WorkQueue(name="ctl-look-alike", base_backoff=0.001)
    controller = Controller("ctl-look-alike", rec, queue)
    async with running(controller):
        controller.enqueue(A)
        await eventually(lambda: rec.attempts[A] == 2 and rec.active[A] == 0)
    assert errors("ctl-look-alike") == 1, "a look-alike is an ordinary error: retried with backoff"
    terminal = metrics.REGISTRY.get_sample_value(
        "controller_runtime_terminal_reconcile_errors_total", {"controller": "ctl-look-alike"}
    )
    assert terminal == 0


async def test_requeue_after_is_honoured_and_forgets_backoff() -> None:
    rec = ScriptedReconciler(lambda key, attempt: Result(requeue_after=0.05) if attempt == 1 else Result())
    queue: WorkQueue[Key] = WorkQueue(name="ctl-requeue-after")
    controller = Controller("ctl-requeue-after", rec, queue)
    queue.when(A)  # pretend earlier failures
    async with running(controller):
        controller.enqueue(A)
        await eventually(lambda: rec.attempts[A] == 2)
    first, second = rec.times(A)
    assert second - first >= 0.045
    assert queue.num_requeues(A) == 0
    assert total("ctl-requeue-after", "requeue_after") == 1
    assert total("ctl-requeue-after", "success") == 1


async def test_success_does_not_requeue() -> None:
    rec = ScriptedReconciler(lambda key, attempt: Result())
    queue: WorkQueue[Key] = WorkQueue(name="ctl-success")
    controller = Controller("ctl-success", rec, queue)
    async with running(controller):
        controller.enqueue(A)
        await eventually(lambda: rec.attempts[A] == 1)
        await asyncio.sleep(0.03)
    assert rec.attempts[A] == 1


async def test_no_key_is_reconciled_concurrently_with_several_workers() -> None:
    rec = ScriptedReconciler(lambda key, attempt: Result(), delay=0.01)
    queue: WorkQueue[Key] = WorkQueue(name="ctl-per-key")
    controller = Controller("ctl-per-key", rec, queue, workers=4)
    keys = [("ns", f"k{i}") for i in range(3)]
    async with running(controller):
        for _ in range(15):
            for key in keys:
                controller.enqueue(key)
            await asyncio.sleep(0.003)
        await eventually(lambda: len(queue) == 0 and reconciling("ctl-per-key") == 0)
    assert all(rec.max_active[key] == 1 for key in keys), rec.max_active
    assert all(rec.attempts[key] >= 2 for key in keys)
    active = metrics.REGISTRY.get_sample_value("controller_runtime_active_workers", {"controller": "ctl-per-key"})
    assert active == 0
    max_conc = metrics.REGISTRY.get_sample_value(
        "controller_runtime_max_concurrent_reconciles", {"controller": "ctl-per-key"}
    )
    assert max_conc == 4


async def test_a_broken_reconciler_result_does_not_kill_the_worker() -> None:
    class Broken:
        calls = 0

        async def reconcile(self, key: Key) -> Result:
            self.calls += 1
            return None  # type: ignore[return-value]  # a reconciler bug

    broken = Broken()
    queue: WorkQueue[Key] = WorkQueue(name="ctl-broken", base_backoff=0.001, max_backoff=0.002)
    controller = Controller("ctl-broken", broken, queue, workers=1)
    async with running(controller):
        controller.enqueue(A)
        await eventually(lambda: broken.calls >= 3)


async def test_stop_lets_in_flight_reconciles_finish_within_the_bound() -> None:
    finished: list[Key] = []

    class Slow:
        async def reconcile(self, key: Key) -> Result:
            await asyncio.sleep(0.05)
            finished.append(key)
            return Result()

    queue: WorkQueue[Key] = WorkQueue(name="ctl-stop-drain")
    controller = Controller("ctl-stop-drain", Slow(), queue, workers=1)
    task = asyncio.create_task(controller.run())
    await asyncio.sleep(0)  # started: keys offered before a controller runs are dropped
    controller.enqueue(A)
    controller.enqueue(B)
    await eventually(lambda: reconciling("ctl-stop-drain") == 1)
    assert await controller.stop(1.0) is True
    await asyncio.wait_for(task, 1)
    assert finished == [A], "the in-flight key finishes; the queued one is dropped (rebuilt on next start)"


async def test_stop_cancels_reconciles_that_outlive_the_bound() -> None:
    cancelled = asyncio.Event()

    class Stuck:
        async def reconcile(self, key: Key) -> Result:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return Result()

    queue: WorkQueue[Key] = WorkQueue(name="ctl-stop-cancel")
    controller = Controller("ctl-stop-cancel", Stuck(), queue, workers=2)
    task = asyncio.create_task(controller.run())
    await asyncio.sleep(0)  # started: keys offered before a controller runs are dropped
    controller.enqueue(A)
    await eventually(lambda: reconciling("ctl-stop-cancel") == 1)
    assert await controller.stop(0.02) is False
    await asyncio.wait_for(task, 1)
    assert cancelled.is_set()
    assert reconciling("ctl-stop-cancel") == 0


def _webserver(name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": "1"}}


async def test_periodic_resync_enqueues_every_primary_object() -> None:
    store = Store()
    store.replace([_webserver("a"), _webserver("b")], "1")
    rec = ScriptedReconciler(lambda key, attempt: Result())
    queue: WorkQueue[Key] = WorkQueue(name="ctl-resync")
    controller = Controller("ctl-resync", rec, queue, resync_period=0.03, primary=store)
    async with running(controller):
        await eventually(lambda: rec.attempts[A] >= 2 and rec.attempts[B] >= 2)


async def test_run_twice_is_refused() -> None:
    queue: WorkQueue[Key] = WorkQueue(name="ctl-twice")
    controller = Controller("ctl-twice", ScriptedReconciler(lambda key, attempt: Result()), queue)
    async with running(controller):
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="already running"):
            await controller.run()


async def test_a_stale_cache_conflict_is_retried_quietly_not_reported_as_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 409 because our cache was behind is routine: requeued with backoff, no ERROR line, no error count."""
    conflict = status_error(409, "Conflict", method="PATCH", path="/apis/apps/v1/namespaces/ns/deployments/a")
    rec = ScriptedReconciler(lambda key, attempt: conflict if attempt == 1 else Result())
    queue: WorkQueue[Key] = WorkQueue(name="ctl-conflict", base_backoff=0.001)
    controller = Controller("ctl-conflict", rec, queue)
    with caplog.at_level(logging.DEBUG):
        async with running(controller):
            controller.enqueue(A)
            await eventually(lambda: rec.attempts[A] == 2 and rec.active[A] == 0)
    assert errors("ctl-conflict") == 0
    assert total("ctl-conflict", "requeue") == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert all(r.exc_info is None for r in caplog.records)


async def test_keys_offered_before_the_controller_runs_are_dropped_and_the_start_enqueues_every_primary() -> None:
    """A standby (not leading) must not fill its queue (workqueue_depth would read N forever)."""
    primary = Store()
    for name in ("a", "b"):
        primary.upsert({"metadata": {"namespace": "ns", "name": name, "resourceVersion": "1"}})
    rec = ScriptedReconciler(lambda key, attempt: Result())
    queue: WorkQueue[Key] = WorkQueue(name="ctl-standby")
    controller = Controller("ctl-standby", rec, queue, primary=primary)
    controller.enqueue(A)
    assert len(queue) == 0
    assert (
        metrics.REGISTRY.get_sample_value("workqueue_depth", {"controller": "ctl-standby", "name": "ctl-standby"}) == 0
    )
    async with running(controller):
        await eventually(lambda: rec.attempts[A] == 1 and rec.attempts[B] == 1)


async def test_stop_hooks_run_after_the_drain_with_the_time_left() -> None:
    """Work the reconciles handed off (queued Events) gets what is left of the drain timeout; none when deposed."""
    order: list[str] = []
    given: list[float] = []

    started = asyncio.Event()

    class Quick:
        async def reconcile(self, key: Key) -> Result:
            started.set()
            await asyncio.sleep(0.05)
            order.append("reconciled")
            return Result()

    async def hook(seconds_left: float) -> None:
        order.append("hook")
        given.append(seconds_left)

    queue: WorkQueue[Key] = WorkQueue(name="ctl-stop-hook")
    controller = Controller("ctl-stop-hook", Quick(), queue, workers=1)
    controller.on_stop(hook)
    task = asyncio.create_task(controller.run())
    await asyncio.sleep(0)
    controller.enqueue(A)
    await started.wait()
    assert await controller.stop(1.0) is True
    await asyncio.wait_for(task, 1)
    assert order == ["reconciled", "hook"]
    assert 0.5 < given[0] <= 0.96, "the drain took about 0.05 s of the 1 s"
    assert await controller.stop(0.0) is True
    assert given[1] == 0.0


def test_the_terminal_error_counter_is_exported_at_zero_from_the_start() -> None:
    """As controller-runtime: a dashboard panel and an alert read it before anything ever failed terminally."""
    Controller(
        "ctl-terminal-zero", ScriptedReconciler(lambda key, attempt: Result()), WorkQueue(name="ctl-terminal-zero")
    )
    terminal = metrics.REGISTRY.get_sample_value(
        "controller_runtime_terminal_reconcile_errors_total", {"controller": "ctl-terminal-zero"}
    )
    assert terminal == 0


class SlowRenewals:
    """A leader whose Lease renewals are slow: the real ``LeaseFence`` on a clock the test moves, as the write gate."""

    RENEW_DEADLINE = 7.0

    def __init__(self) -> None:
        self.now = 100.0
        self.fence = LeaseFence("ns/leader", clock=lambda: self.now)
        self.renewed()

    def renewed(self) -> None:
        self.fence.renewed(sent=self.now, renew_deadline=self.RENEW_DEADLINE)

    def renewal_overdue(self) -> None:
        self.now += self.RENEW_DEADLINE + 1.0

    def check(self, _path: str) -> str | None:
        return self.fence.why_not()

    def write(self, key: Key) -> Result:
        """What the reconciler's gated client does with the write of ``key``: refuse it while the fence is closed."""
        path = f"/apis/apps/v1/namespaces/{key[0]}/deployments/{key[1]}"
        if (why := self.check(path)) is not None:
            raise WritesStopped(method="PATCH", path=path, why=why)
        return Result()


async def test_a_key_refused_by_the_lease_fence_is_written_as_soon_as_a_renewal_reopens_it() -> None:
    """Issue 32's slow-api backlog: a write refused because a renewal is late is not a failure of the key.

    With the API slow, a renewal can take longer than the renew deadline, so the fence closes for a few seconds again
    and again; each refusal costs milliseconds. Counted as failures, a minute of that gave keys 13-16 backoff steps
    (20-164 s at 5 ms doubling) and they were written long after the API had recovered. Here the key is refused
    twelve times (a step each would be 0.01 s * 2**11 = 20 s); once a renewal succeeds it must be written at once.
    """
    lease = SlowRenewals()
    written: list[Key] = []

    def behaviour(key: Key, attempt: int) -> Any:
        result = lease.write(key)
        written.append(key)
        return result

    rec = ScriptedReconciler(behaviour)
    queue: WorkQueue[Key] = WorkQueue(name="ctl-fence-closed", base_backoff=0.01, max_backoff=60.0)
    controller = Controller("ctl-fence-closed", rec, queue, workers=2)
    controller.gate_writes(lease.check)
    async with running(controller):
        lease.renewal_overdue()
        for attempt in range(1, 13):
            controller.enqueue(A)  # a change to the WebServer while writes may not leave

            def refused(attempt: int = attempt) -> bool:
                return rec.attempts[A] == attempt and rec.active[A] == 0

            await eventually(refused)
        assert written == []
        lease.renewed()
        await eventually(lambda: written == [A], within=1.0)
    assert queue.num_requeues(A) == 0
    assert errors("ctl-fence-closed") == 0, "a paused write is not a reconcile error"


class Apf:
    """An API server whose priority level is starved: while ``throttling``, every write is refused with 429."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        self.throttling = True
        self.refused = 0

    def write(self, key: Key) -> Result:
        if self.throttling:
            self.refused += 1
            raise TooManyRequests(
                status=429,
                reason="TooManyRequests",
                message="Too many requests, please try again later.",
                method="PATCH",
                path=f"/apis/apps/v1/namespaces/{key[0]}/deployments/{key[1]}",
                retry_after=self.retry_after,
            )
        return Result()


async def test_keys_refused_with_429_take_no_backoff_step_and_one_probe_per_retry_after_finds_the_recovery() -> None:
    """make chaos's apf-starvation: 410 refusals in a minute left one key about 50 s of backoff after the recovery.

    Eight keys are refused for two seconds with ``Retry-After: 0.2``. Counted as failures each would be retried at its
    backoff or the Retry-After, whichever is longer: about seven times each, 56 requests the throttled server must
    refuse. Held, they cost one probe per Retry-After; once the server answers, all of them are written at once.
    """
    apf = Apf(retry_after=0.2)
    keys = [("ns", f"k{i}") for i in range(8)]
    written: set[Key] = set()

    def behaviour(key: Key, attempt: int) -> Any:
        result = apf.write(key)
        written.add(key)
        return result

    rec = ScriptedReconciler(behaviour)
    queue: WorkQueue[Key] = WorkQueue(name="ctl-apf", base_backoff=0.01, max_backoff=60.0)
    controller = Controller("ctl-apf", rec, queue, workers=2)
    async with running(controller):
        for key in keys:
            controller.enqueue(key)
        await asyncio.sleep(2.0)
        refused_while_throttled = apf.refused
        apf.throttling = False
        await eventually(lambda: written == set(keys), within=1.5, what="every held key written after the recovery")
    assert refused_while_throttled <= len(keys) + 2.0 / 0.2 + 2, f"{refused_while_throttled} requests refused"
    assert all(queue.num_requeues(key) == 0 for key in keys)
    assert errors("ctl-apf") == 0, "a throttled request is not a reconcile error"


async def test_a_paused_key_is_left_alone_once_its_shard_is_handed_over() -> None:
    """Sharded: a key refused while its shard's fence was closed, then handed over, is not queued here again."""
    lease = SlowRenewals()
    rec = ScriptedReconciler(lambda key, attempt: lease.write(key))
    queue: WorkQueue[Key] = WorkQueue(name="ctl-fence-handover", base_backoff=0.01)
    controller = Controller("ctl-fence-handover", rec, queue)
    controller.gate_writes(lease.check)
    async with running(controller):
        lease.renewal_overdue()
        controller.enqueue(A)
        controller.enqueue(B)
        await eventually(lambda: rec.attempts[A] == 1 and rec.attempts[B] == 1 and not queue.in_flight(lambda k: True))
        queue.admit(lambda key: key != A)
        assert await controller.release(lambda key: key == A, drain_timeout=1.0)
        lease.renewed()
        await eventually(lambda: rec.attempts[B] == 2)
        await asyncio.sleep(0.3)
    assert rec.attempts[A] == 1


async def test_without_a_gate_named_a_refused_write_backs_off_like_any_failure() -> None:
    """A controller not told which gate refuses its writes cannot see it reopen: the key is retried with backoff."""
    lease = SlowRenewals()
    lease.renewal_overdue()
    rec = ScriptedReconciler(lambda key, attempt: lease.write(key) if attempt <= 3 else Result())
    queue: WorkQueue[Key] = WorkQueue(name="ctl-fence-ungated", base_backoff=0.01)
    controller = Controller("ctl-fence-ungated", rec, queue)
    async with running(controller):
        controller.enqueue(A)
        await eventually(lambda: rec.attempts[A] == 4 and rec.active[A] == 0)
    gaps = [t2 - t1 for t1, t2 in zip(rec.times(A), rec.times(A)[1:], strict=False)]
    assert gaps[2] >= 0.035, f"backoff doubles per refusal: {gaps}"
    assert errors("ctl-fence-ungated") == 3


async def test_the_paused_keys_are_written_in_their_turn_before_a_change_made_after_the_fence_reopened() -> None:
    """Their changes are older: queued low (as a start's list) they would wait behind every change made later."""
    lease = SlowRenewals()
    busy: Key = ("ns", "busy")
    fresh: Key = ("ns", "fresh")
    release_busy = asyncio.Event()
    order: list[Key] = []

    class Reconciler:
        async def reconcile(self, key: Key) -> Result:
            if key == busy:
                await release_busy.wait()
                return Result()
            result = lease.write(key)
            order.append(key)
            return result

    queue: WorkQueue[Key] = WorkQueue(name="ctl-fence-order")
    controller = Controller("ctl-fence-order", Reconciler(), queue, workers=1)
    controller.gate_writes(lease.check)
    async with running(controller):
        lease.renewal_overdue()
        controller.enqueue(A)
        controller.enqueue(B)
        await eventually(lambda: len(queue) == 0 and not queue.in_flight(lambda k: True))
        controller.enqueue(busy)  # the one worker is busy when the fence reopens
        await eventually(lambda: bool(queue.in_flight(lambda k: k == busy)))
        lease.renewed()
        await asyncio.sleep(0.5)  # the paused keys are queued again meanwhile
        controller.enqueue(fresh)
        release_busy.set()
        await eventually(lambda: len(order) == 3)
    assert order == [A, B, fresh]
