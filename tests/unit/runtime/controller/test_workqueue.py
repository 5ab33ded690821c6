"""WorkQueue: client-go semantics (dedup, one worker per key, dirty requeue, delayed adds, backoff, shutdown)."""

import asyncio
import collections

import pytest

from tests.support.clock import ManualClock
from webserver_operator import metrics
from webserver_operator.runtime.controller.workqueue import DEFAULT_RETRY_AFTER, WorkQueue

pytestmark = pytest.mark.timeout(5)

Key = tuple[str, str]
A: Key = ("ns", "a")
B: Key = ("ns", "b")


def sample(name: str, queue: str) -> float:
    value = metrics.REGISTRY.get_sample_value(name, {"controller": queue, "name": queue})
    return value or 0.0


async def test_add_deduplicates_queued_keys() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-dedup")
    for _ in range(3):
        q.add(A)
    q.add(B)
    assert len(q) == 2
    assert await q.get() == A
    assert await q.get() == B
    assert len(q) == 0
    assert sample("workqueue_adds_total", "wq-dedup") == 2
    assert sample("workqueue_depth", "wq-dedup") == 0


async def test_key_added_while_processing_is_requeued_on_done() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-dirty")
    q.add(A)
    assert await q.get() == A
    q.add(A)
    q.add(A)
    assert len(q) == 0, "a key in flight must not be handed to another worker"
    q.done(A)
    assert len(q) == 1
    assert await q.get() == A
    q.done(A)
    assert len(q) == 0


def nothing_comes_due(q: WorkQueue[Key], clock: ManualClock, why: str) -> None:
    """No delayed key is queued, however long ``clock`` runs on (a superseded delayed add never fires)."""
    clock.advance(5.0)
    q.flush_due()
    assert len(q) == 0, why


def comes_due_after(q: WorkQueue[Key], clock: ManualClock, seconds: float) -> None:
    """One more delayed key is queued exactly ``seconds`` from now on ``clock``, not a moment before."""
    before = len(q)
    clock.advance(seconds - 0.001)
    q.flush_due()
    assert len(q) == before, f"a delayed key came due before {seconds}s"
    clock.advance(0.001)
    q.flush_due()
    assert len(q) == before + 1, f"no delayed key came due at {seconds}s"


async def test_done_without_new_add_does_not_requeue() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-done")
    q.add(A)
    await q.get()
    q.done(A)
    assert len(q) == 0
    q.add(A)
    assert len(q) == 1, "a finished key is queued again by the next add (a key still in flight would not be)"


async def test_one_key_never_processed_concurrently_by_several_workers() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-concurrency")
    keys = [("ns", f"k{i}") for i in range(3)]
    active: collections.Counter[Key] = collections.Counter()
    max_active: collections.Counter[Key] = collections.Counter()
    processed: collections.Counter[Key] = collections.Counter()
    overall = {"now": 0, "max": 0}

    async def worker() -> None:
        while (key := await q.get()) is not None:
            active[key] += 1
            overall["now"] += 1
            overall["max"] = max(overall["max"], overall["now"])
            max_active[key] = max(max_active[key], active[key])
            await asyncio.sleep(0.005)
            processed[key] += 1
            active[key] -= 1
            overall["now"] -= 1
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(6)]
    for _ in range(20):
        for key in keys:
            q.add(key)
        await asyncio.sleep(0.001)
    while len(q) or overall["now"]:  # noqa: ASYNC110 - polling until the workers ran out of work
        await asyncio.sleep(0.005)
    q.shutdown()
    await asyncio.gather(*workers)

    assert all(max_active[key] == 1 for key in keys), max_active
    assert overall["max"] > 1, "workers should have run different keys in parallel"
    # Dedup collapsed the 20 adds per key into far fewer reconciles, but every key ran after its last add.
    assert all(1 <= processed[key] < 20 for key in keys), processed


async def test_add_after_coming_due_while_queued_collapses() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-after-queued", clock=clock)
    q.add(A)
    q.add_after(A, 1.0)
    clock.advance(1.0)
    q.flush_due()
    assert len(q) == 1
    assert await q.get() == A
    q.done(A)
    assert len(q) == 0


async def test_add_after_coming_due_while_processing_requeues_once_on_done() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-after-processing", clock=clock)
    q.add(A)
    assert await q.get() == A
    q.add_after(A, 1.0)
    clock.advance(2.0)
    q.flush_due()
    assert len(q) == 0
    q.done(A)
    assert len(q) == 1


async def test_earliest_add_after_wins() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-after-earliest", clock=clock)
    q.add_after(A, 10.0)
    q.add_after(A, 5.0)
    q.add_after(A, 20.0)
    clock.advance(4.9)
    q.flush_due()
    assert len(q) == 0
    clock.advance(0.1)
    q.flush_due()
    assert len(q) == 1
    clock.advance(20.0)
    q.flush_due()
    assert len(q) == 1, "the superseded later add must not fire a second time"


async def test_an_immediate_add_supersedes_a_pending_delayed_add_of_the_same_key() -> None:
    """One entry per key, as in controller-runtime's priority queue: queued now is sooner than any delay.

    A reconcile that asked to look again later (a held-back status detail, a problem's recheck) and is then woken by
    an event decides again in that run: the old delayed add must not run it a second time for nothing.
    """
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-after-superseded", clock=clock)
    q.add_after(A, 2.0)
    q.add(A, urgent=True)
    assert await q.get() == A
    q.done(A)
    nothing_comes_due(q, clock, "the delayed add was superseded by the immediate one")


async def test_a_key_re_queued_on_done_supersedes_the_delayed_add_its_reconcile_asked_for() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-after-dirty", clock=clock)
    q.add(A)
    assert await q.get() == A
    q.add(A)  # an event while the reconcile runs
    q.add_after(A, 2.0)  # the reconcile's result
    q.done(A)
    assert await q.get() == A, "the event's change is reconciled at once"
    q.done(A)
    nothing_comes_due(q, clock, "the run after the event decides again; the earlier run's delayed add is void")


async def test_a_delayed_add_for_a_waiting_key_that_is_not_running_is_dropped() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-after-waiting", clock=clock)
    q.add(A)
    q.add_after(A, 2.0)
    assert await q.get() == A
    q.done(A)
    nothing_comes_due(q, clock, "A was queued already: its next run comes sooner than the delay")


async def test_add_after_fires_on_the_real_loop_timer() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-after-timer")
    q.add_after(A, 0.02)
    q.add_after(B, 0.01)
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 1) == B
    assert await asyncio.wait_for(q.get(), 1) == A


async def test_add_after_non_positive_delay_adds_now() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-after-zero")
    q.add_after(A, 0)
    assert len(q) == 1


async def test_backoff_grows_exponentially_caps_and_forget_resets() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-backoff", base_backoff=0.005, max_backoff=0.1)
    delays = [q.when(A) for _ in range(7)]
    assert delays == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08, 0.1, 0.1])
    assert q.num_requeues(A) == 7
    assert q.when(B) == pytest.approx(0.005), "backoff is per key"
    q.forget(A)
    assert q.num_requeues(A) == 0
    assert q.when(A) == pytest.approx(0.005)


async def test_backoff_does_not_overflow_after_many_failures() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-overflow", max_backoff=300.0)
    for _ in range(2000):
        delay = q.when(A)
    assert delay == 300.0


async def test_add_rate_limited_delays_by_backoff_and_counts_retries() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-rate-limited", base_backoff=1.0, max_backoff=100.0, clock=clock)
    before = sample("workqueue_retries_total", "wq-rate-limited")
    q.add_rate_limited(A)
    comes_due_after(q, clock, 1.0)
    assert await q.get() == A
    q.add_rate_limited(A)
    q.done(A)
    comes_due_after(q, clock, 2.0)
    assert q.num_requeues(A) == 2
    assert sample("workqueue_retries_total", "wq-rate-limited") - before == 2


async def test_retry_after_is_honoured_up_to_the_maximum_backoff() -> None:
    """A 429 with ``Retry-After: 86400`` (a misbehaving proxy) must not park a key for a day: it waits at most the
    queue's maximum backoff, as the client's own retries cap the same header. A shorter Retry-After is honoured."""
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-retry-after", base_backoff=1.0, max_backoff=300.0, clock=clock)
    q.add_rate_limited(A, at_least=86400.0)
    q.add_rate_limited(B, at_least=42.0)
    comes_due_after(q, clock, 42.0)  # B
    comes_due_after(q, clock, 300.0 - 42.0)  # A
    assert len(q) == 2


async def test_shutdown_releases_waiting_getters_and_ignores_adds() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-shutdown")
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    q.add_after(A, 0.01)
    q.shutdown()
    assert await asyncio.gather(*getters) == [None, None, None]
    q.add(A)
    q.add_rate_limited(B)
    assert len(q) == 0
    assert await q.get() is None
    await asyncio.sleep(0.02)
    assert len(q) == 0, "pending delayed adds are dropped at shutdown"


async def test_cancelled_getter_does_not_swallow_a_wake_up() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-cancel")
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add(A)  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    assert await asyncio.wait_for(second, 1) == A


async def test_queue_and_work_duration_metrics_and_unfinished_work() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-metrics", clock=clock)
    q.add(A)
    clock.advance(2.0)
    await q.get()
    clock.advance(3.0)
    q.update_unfinished_metrics()
    assert sample("workqueue_unfinished_work_seconds", "wq-metrics") == 3.0
    assert sample("workqueue_longest_running_processor_seconds", "wq-metrics") == 3.0
    q.done(A)
    q.update_unfinished_metrics()
    assert sample("workqueue_unfinished_work_seconds", "wq-metrics") == 0.0
    assert sample("workqueue_queue_duration_seconds_sum", "wq-metrics") == 2.0
    assert sample("workqueue_work_duration_seconds_sum", "wq-metrics") == 3.0


C: Key = ("ns", "c")


async def test_low_priority_keys_wait_behind_every_normal_key() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-low")
    q.add(A, low_priority=True)
    q.add(B)
    q.add(C, low_priority=True)
    q.add(("ns", "d"))
    assert len(q) == 4
    assert [await q.get() for _ in range(4)] == [B, ("ns", "d"), A, C], "normal first, then low, each in order"
    assert len(q) == 0


async def test_a_normal_add_moves_a_queued_low_key_up_and_it_is_handed_out_once() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-promote")
    q.add(A, low_priority=True)
    q.add(B, low_priority=True)
    q.add(B)  # e.g. its Deployment became available: no longer waits behind the new WebServer A
    q.add(B, low_priority=True)  # a later low add does not move it back down
    assert len(q) == 2
    assert await q.get() == B
    q.done(B)
    assert await q.get() == A
    q.done(A)
    assert len(q) == 0
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.get(), 0.05)  # the stale low entry of B is not handed out again
    assert sample("workqueue_depth", "wq-promote") == 0


async def test_a_key_added_while_processing_is_requeued_at_the_highest_priority_it_was_asked_for() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-requeue-priority")
    q.add(A)
    assert await q.get() == A
    q.add(A, low_priority=True)
    q.add(A)
    q.add(B)
    q.done(A)
    q.add(C)
    assert [await q.get() for _ in range(3)] == [B, A, C], "A came back at normal priority, in arrival order"

    q.add(("ns", "x"), low_priority=True)
    assert await q.get() == ("ns", "x")
    q.add(("ns", "x"), low_priority=True)
    q.add(("ns", "y"))
    q.done(("ns", "x"))
    assert [await q.get() for _ in range(2)] == [("ns", "y"), ("ns", "x")], "only low adds: back at low priority"


async def test_a_low_key_re_queued_after_a_promotion_is_handed_out_once() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-stale")
    q.add(A, low_priority=True)
    q.add(A)  # promoted: a stale entry stays in the low lane
    assert await q.get() == A
    q.done(A)
    q.add(A, low_priority=True)
    q.add(B, low_priority=True)
    handed = {await q.get() for _ in range(2)}
    assert handed == {A, B}
    q.done(A)
    q.done(B)
    assert len(q) == 0
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.get(), 0.05)


async def test_urgent_keys_go_before_normal_and_low_ones_and_an_urgent_add_moves_a_queued_key_up() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-urgent")
    q.add(A, low_priority=True)  # a new WebServer
    q.add(B)  # the echo of a status write
    q.add(C)  # a Deployment's rollout progress...
    q.add(("ns", "d"), urgent=True)  # ...and another Deployment that became available
    q.add(C, urgent=True)  # now C's became available too: it moves up, behind d
    q.add(C)  # a later normal add does not move it back down
    q.add(A, urgent=True)
    assert len(q) == 4
    handed = [await q.get() for _ in range(4)]
    assert handed == [("ns", "d"), C, A, B], "urgent in arrival order of the urgent adds, then normal"
    for key in (("ns", "d"), C, A, B):
        q.done(key)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.get(), 0.05)  # the stale lower entries of C and A are not handed out again
    assert sample("workqueue_depth", "wq-urgent") == 0


async def test_a_key_asked_for_urgently_while_processing_comes_back_first() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-urgent-requeue")
    q.add(A)
    assert await q.get() == A
    q.add(A)
    q.add(A, urgent=True)  # its Deployment became available while the last reconcile ran
    q.add(B)
    q.done(A)
    q.add(C, low_priority=True)
    assert [await q.get() for _ in range(3)] == [A, B, C]


async def test_discard_forgets_urgent_keys_too() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-urgent-discard")
    q.add(A, urgent=True)
    q.add(B, urgent=True)
    q.add(C)
    assert q.discard(lambda key: key == A) == 1
    assert [await q.get() for _ in range(2)] == [B, C]


async def test_discard_forgets_a_shards_keys_queued_delayed_and_due_again_and_admit_keeps_them_out() -> None:
    queue: WorkQueue[tuple[str, str]] = WorkQueue(name="discard-test")
    mine, theirs = ("a", "1"), ("b", "1")
    queue.add(("b", "2"), low_priority=True)
    queue.add(theirs)
    queue.add(mine)
    queue.add_after(("b", "3"), 0.01)
    queue.add_rate_limited(("b", "4"))
    first = await queue.get()
    assert first == theirs
    queue.add(theirs)  # dirty while processing: due again at done()
    queue.admit(lambda key: key[0] != "b")
    assert queue.discard(lambda key: key[0] == "b") == 4
    assert queue.in_flight(lambda key: key[0] == "b") == {theirs}
    queue.done(theirs)
    queue.add(("b", "5"))
    queue.add_after(("b", "6"), 0.0)
    await asyncio.sleep(0.05)  # the delayed adds would have come due by now
    assert queue.queued() == frozenset({mine})
    assert await queue.get() == mine
    assert queue.num_requeues(("b", "4")) == 0, "the backoff left with the key"


# -- keys held after a 429 ------------------------------------------------------------------------------------------


async def refused(q: WorkQueue[Key], key: Key, retry_after: float | None) -> bool:
    """``key`` is handed out, its request is refused with 429, and its worker is done: what the controller does."""
    assert await q.get() == key
    starts = q.hold(key, retry_after)
    q.done(key)
    return starts


async def test_keys_held_after_a_429_take_no_backoff_step_and_wait_for_one_probe() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-hold", clock=clock)
    q.add(A)
    q.add(B)
    assert await refused(q, A, 2.0), "the first refusal starts a throttled period"
    assert not await refused(q, B, 3.0)
    assert q.held() == [A, B] and len(q) == 0
    assert q.num_requeues(A) == q.num_requeues(B) == 0
    clock.advance(2.999)
    q.flush_due()
    assert len(q) == 0, "no probe before the latest Retry-After"
    clock.advance(0.001)
    q.flush_due()
    assert q.held() == [B] and len(q) == 1, "one probe, the key held longest"
    assert await q.get() == A
    clock.advance(10.0)
    q.flush_due()
    assert len(q) == 0, "one probe at a time"
    q.done(A)  # the probe's run ended without a 429: the server answers again
    assert q.held() == [] and len(q) == 1
    assert await q.get() == B


async def test_a_probe_refused_again_waits_for_the_new_retry_after_and_the_next_key_probes() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-hold-again", clock=clock)
    q.add(A)
    q.add(B)
    await refused(q, A, 1.0)
    await refused(q, B, 1.0)
    clock.advance(1.0)
    q.flush_due()
    assert not await refused(q, A, 5.0)
    assert q.held() == [B, A]
    clock.advance(4.9)
    q.flush_due()
    assert len(q) == 0
    clock.advance(0.1)
    q.flush_due()
    assert await q.get() == B


async def test_a_refusal_without_retry_after_waits_the_api_servers_default() -> None:
    clock = ManualClock(1000.0)
    q: WorkQueue[Key] = WorkQueue(name="wq-hold-default", clock=clock)
    q.add(A)
    await refused(q, A, None)
    clock.advance(DEFAULT_RETRY_AFTER - 0.01)
    q.flush_due()
    assert len(q) == 0
    clock.advance(0.01)
    q.flush_due()
    assert len(q) == 1


async def held_queue(name: str, clock: ManualClock, *keys: Key) -> WorkQueue[Key]:
    """A queue whose ``keys`` were each refused with ``Retry-After: 1``."""
    q: WorkQueue[Key] = WorkQueue(name=name, clock=clock)
    for key in keys:
        q.add(key)
        await refused(q, key, 1.0)
    return q


async def test_an_event_for_a_held_key_queues_it() -> None:
    clock = ManualClock(1000.0)
    q = await held_queue("wq-hold-event", clock, A, B)
    q.add(B)  # the user changed it: it runs now, and is held again only if refused again
    assert q.held() == [A] and len(q) == 1
    assert await q.get() == B
    q.done(B)
    assert q.held() == [A], "only the probe's outcome tells whether the throttling ended"


async def test_a_probe_handed_over_mid_run_is_replaced_by_the_next_held_key() -> None:
    clock = ManualClock(1000.0)
    q = await held_queue("wq-hold-probe-handover", clock, A, B)
    clock.advance(1.0)
    q.flush_due()
    assert await q.get() == A  # the probe
    q.admit(lambda key: key != A)
    q.discard(lambda key: key == A)  # its shard was handed over while it ran
    q.done(A)
    assert q.held() == [B], "a probe that is no longer ours tells nothing"
    q.flush_due()
    assert await q.get() == B


async def test_a_held_key_of_a_shard_handed_over_is_dropped() -> None:
    clock = ManualClock(1000.0)
    q = await held_queue("wq-hold-handover", clock, A, B)
    q.admit(lambda key: key != A)
    assert q.discard(lambda key: key == A) == 0
    clock.advance(1.0)
    q.flush_due()
    assert q.held() == [] and await q.get() == B, "B probes; A is not reconciled here any more"


async def test_the_probe_goes_on_the_queues_own_timer() -> None:
    q: WorkQueue[Key] = WorkQueue(name="wq-hold-timer")
    q.add(A)
    await refused(q, A, 0.05)
    assert await asyncio.wait_for(q.get(), 1.0) == A
