"""A rate-limited, delaying work queue with client-go ``workqueue`` semantics, for asyncio.

Why these semantics: they are what makes a level-triggered controller correct with several workers.

* **De-duplication** (the ``dirty`` set): a key is queued at most once, however many events arrive for it. The
  reconciler reads the latest state from the cache anyway, so ten events cost one reconcile.
* **One worker per key** (the ``processing`` set): a key handed out by ``get`` is not handed out again until ``done``.
  If it is added meanwhile it is only marked dirty and re-queued by ``done``, so no two workers ever reconcile the same
  object concurrently, yet the change that arrived mid-reconcile is not lost.
* **Three priorities**, after controller-runtime's priority queue: urgent, normal and low
  (``add(key, urgent=True)``, ``add(key)``, ``add(key, low_priority=True)``). A key is handed out only when no key of
  a higher priority is queued; within a priority, first in first out. A key queued at one priority and added again
  at a higher one moves up; a key added while processing is re-queued at the highest priority it received
  meanwhile. The controller queues ADDED events low (see ``runtime.controller.builder``): a new object's first
  reconcile, or the
  initial list after a start, waits behind changes to objects that already exist, so a deleted child is handled in
  milliseconds even during a bulk create of thousands. Urgent is for the changes a user is waiting to see in the
  status (an owned Deployment's availability changed): they go ahead of the echoes of the operator's own writes and
  of rollout progress that otherwise fill the normal queue during a bulk create.
* **Delayed adds** (``add_after``): kept in a timer heap, one entry per key, the soonest wins. When an entry comes due
  it goes through ``add``, so it collapses into a queued or in-flight copy of the key instead of duplicating it. A key
  handed out by ``get`` loses its pending delayed add, as in controller-runtime's priority queue (one item per key: an
  add without delay makes a waiting item ready): the run that starts reads the latest state and asks for its own
  delayed add if it still needs one. Without this, a key woken by an event before its delay ran once more for
  nothing when the delay came due (a held-back status detail superseded by the Ready write: one reconcile in four
  of a bulk create).
* **Per-key exponential backoff** (``add_rate_limited``/``forget``): client-go's ``ItemExponentialFailureRateLimiter``
  (base 5 ms, doubling, capped at 5 min, no jitter), computed by ``core.backoff.BackoffPolicy`` with one attempt
  count per key. A server's ``Retry-After`` (``at_least``) is honoured up to the same cap. ``forget`` resets it
  after a success. controller-runtime also combines this with an overall token bucket; the API client's own rate
  limiting covers that here.

* **Keys held after a 429** (``hold``): a request refused because the API server is throttling this client (API
  Priority and Fairness, or max-in-flight) says nothing about the key, so it takes no backoff step. Counted as a
  failure, each throttled attempt doubled the key's wait: in ``make chaos``'s apf-starvation fault (410 refusals in
  half a minute) one key came back 50 s after the others (docs/reliability.md). Nor is each held key retried on its
  own: while the server throttles, each retry is one more request it must refuse. Once the latest ``Retry-After`` has
  passed, the key held longest goes back to the queue as a probe; when the probe's run ends without a new ``hold``
  (the server answered, whatever it said) every held key is queued at normal priority; a probe held again waits
  for its new ``Retry-After``. So a throttled client sends one probe per ``Retry-After`` on top of what events bring,
  and its keys come back within one ``Retry-After`` of the recovery. An add of a held key (an event) queues it as
  usual. client-go does not count 429s against the controller either: its REST client sleeps through
  ``Retry-After`` inside the reconcile, a worker per refused request.

Deviation from client-go: after ``shutdown`` ``get`` returns ``None`` at once instead of draining queued keys. The
queue is rebuilt from the informer caches on the next start (level-triggered), so stopping quickly loses nothing.

Metrics mirror controller-runtime's workqueue metrics (labels ``controller`` and ``name``, both the queue's name)
so existing dashboards work. All timing uses a monotonic clock, injectable for tests; timers are scheduled on the
running loop (``add_after`` must be called from it).

Filled by the event mappings ``runtime.controller.builder`` registers on the informers; drained by
``runtime.controller.loop``.
"""

import asyncio
import collections
import heapq
import itertools
import logging
import math
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from webserver_operator import metrics
from webserver_operator.core.backoff import BackoffPolicy

__all__ = ["DEFAULT_RETRY_AFTER", "WorkQueue"]

K = TypeVar("K", bound=Hashable)

logger = logging.getLogger(__name__)

_URGENT, _NORMAL, _LOW = 0, 1, 2
#: The wait when a 429 carries no ``Retry-After``: what the API server's APF and max-in-flight filters send.
DEFAULT_RETRY_AFTER = 1.0
_DEFAULT_BASE_BACKOFF = 0.005
_DEFAULT_MAX_BACKOFF = 300.0


def _admit_all(_key: object) -> bool:
    return True


class WorkQueue(Generic[K]):
    """De-duplicating, delaying, rate-limited queue of keys; see the module docstring for the guarantees."""

    def __init__(
        self,
        *,
        name: str,
        base_backoff: float = _DEFAULT_BASE_BACKOFF,
        max_backoff: float = _DEFAULT_MAX_BACKOFF,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if base_backoff <= 0 or max_backoff < base_backoff:
            raise ValueError("need 0 < base_backoff <= max_backoff")
        self.name = name
        self._backoff = BackoffPolicy(base=base_backoff, cap=max_backoff)
        self._clock = clock

        #: One deque per priority (urgent, normal, low); they may hold stale entries: _queued and _rank are the truth.
        self._queues: tuple[collections.deque[K], ...] = (collections.deque(), collections.deque(), collections.deque())
        self._queued: set[K] = set()  # in one of the deques, waiting for get()
        self._rank: dict[K, int] = {}  # dirty key -> the highest priority of its adds since the last get()
        self._dirty: set[K] = set()  # needs processing: queued, or to be re-queued when its worker calls done()
        self._processing: set[K] = set()
        self._added_at: dict[K, float] = {}  # first add while not yet handed out (queue-duration metric)
        self._started_at: dict[K, float] = {}  # handed out by get() (work-duration and unfinished-work metrics)
        self._failures: dict[K, int] = {}

        self._waiting: dict[K, float] = {}  # key -> due time of its single pending delayed add
        self._heap: list[tuple[float, int, K]] = []  # may hold superseded entries; _waiting is the truth
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due: float | None = None

        self._held: dict[K, None] = {}  # refused with 429, in the order they were (the longest held probes first)
        self._probe: K | None = None  # the held key sent back to see whether the server answers again
        self._probe_due = -math.inf  # when the next probe may go: the latest Retry-After

        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._shutting_down = False
        #: Which keys this queue takes (``admit``); every key unless told otherwise.
        self.admits: Callable[[K], bool] = _admit_all

        self._m_depth = metrics.WORKQUEUE_DEPTH.labels(controller=name, name=name)
        self._m_adds = metrics.WORKQUEUE_ADDS.labels(controller=name, name=name)
        self._m_queue_duration = metrics.WORKQUEUE_QUEUE_DURATION.labels(controller=name, name=name)
        self._m_work_duration = metrics.WORKQUEUE_WORK_DURATION.labels(controller=name, name=name)
        self._m_retries = metrics.WORKQUEUE_RETRIES.labels(controller=name, name=name)
        self._m_unfinished = metrics.WORKQUEUE_UNFINISHED_WORK.labels(controller=name, name=name)
        self._m_longest = metrics.WORKQUEUE_LONGEST_RUNNING_PROCESSOR.labels(controller=name, name=name)
        self._m_depth.set(0)

    # -- immediate adds -----------------------------------------------------------------------------------------------

    def add(self, key: K, *, low_priority: bool = False, urgent: bool = False) -> None:
        """Queue ``key`` unless it is already queued; if it is being processed, re-queue it when ``done``.

        ``low_priority``: hand it out only when no urgent or normal key waits; ``urgent``: before every other key. An
        add at a higher priority than the one a key is queued at moves it up.
        """
        if self._shutting_down or not self.admits(key):
            return
        self._held.pop(key, None)
        rank = _URGENT if urgent else _LOW if low_priority else _NORMAL
        if key in self._dirty:
            if rank < self._rank[key]:
                self._rank[key] = rank
                if key in self._queued:
                    self._queues[rank].append(key)  # its entry in the lower deque is now stale
                    self._wake_one()
            return
        self._m_adds.inc()
        self._dirty.add(key)
        self._rank[key] = rank
        self._added_at[key] = self._clock()
        if key in self._processing:
            return
        self._push(key)

    def _push(self, key: K) -> None:
        self._queues[self._rank[key]].append(key)
        self._queued.add(key)
        self._m_depth.set(len(self._queued))
        self._wake_one()

    def _pop(self) -> K | None:
        """The next queued key, highest priority first, skipping stale entries; ``None`` if none is queued."""
        for rank, queue in enumerate(self._queues):
            while queue:
                key = queue.popleft()
                if key in self._queued and self._rank.get(key) == rank:
                    return key
        return None

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    # -- delayed and rate-limited adds --------------------------------------------------------------------------------

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending delayed add of the same key wins."""
        if self._shutting_down or not self.admits(key):
            return
        if delay <= 0:
            self.add(key)
            return
        due = self._clock() + delay
        current = self._waiting.get(key)
        if current is not None and current <= due:
            return
        self._waiting[key] = due
        heapq.heappush(self._heap, (due, next(self._seq), key))
        self._schedule_timer()

    def add_rate_limited(self, key: K, *, at_least: float = 0.0) -> None:
        """Add ``key`` after its per-key backoff (5 ms, 10 ms, 20 ms, ... capped), or ``at_least`` if that is longer.

        ``at_least`` carries a server's ``Retry-After``: the queue, not a sleeping worker, honours it, up to the
        maximum backoff (as ``kube.retry`` caps the same header), so a proxy answering ``Retry-After: 86400`` cannot
        park a key for a day.
        """
        if self._shutting_down:
            return
        self._m_retries.inc()
        self.add_after(key, max(self.when(key), min(at_least, self._backoff.cap)))

    def hold(self, key: K, retry_after: float | None) -> bool:
        """Set ``key`` aside after a 429 (module docstring); returns True if it starts a throttled period."""
        if self._shutting_down or not self.admits(key):
            return False
        starts = not self._held and self._probe is None
        if key == self._probe:
            self._probe = None  # refused again: the next probe waits for the new Retry-After
        self._held[key] = None
        self._probe_due = max(self._probe_due, self._clock() + (retry_after or DEFAULT_RETRY_AFTER))
        self._schedule_timer()
        return starts

    def held(self) -> list[K]:
        """The keys held after a 429, the longest held first (not the probe out now)."""
        return list(self._held)

    def when(self, key: K) -> float:
        """Next backoff for ``key``, counting one more failure (client-go ``ItemExponentialFailureRateLimiter``)."""
        attempt = self._failures.get(key, 0)
        self._failures[key] = attempt + 1
        return self._backoff.delay(attempt)

    def forget(self, key: K) -> None:
        """Reset the backoff of ``key`` (call after a successful reconcile). Does not remove a pending add."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        """How many rate-limited adds ``key`` had since it was last forgotten."""
        return self._failures.get(key, 0)

    def flush_due(self) -> None:
        """Move every delayed key whose due time has passed into the queue. Called by the timer; public for tests."""
        now = self._clock()
        while self._heap and self._heap[0][0] <= now:
            due, _, key = heapq.heappop(self._heap)
            if self._waiting.get(key) != due:
                continue  # superseded by an earlier add_after
            del self._waiting[key]
            self.add(key)
        while self._held and self._probe is None and self._probe_due <= now and not self._shutting_down:
            probe = next(iter(self._held))
            del self._held[probe]
            if self.admits(probe):
                self._probe = probe
                self.add(probe)
        self._schedule_timer()

    def _schedule_timer(self) -> None:
        while self._heap and self._waiting.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)  # drop superseded heads so the timer tracks a live entry
        due = self._heap[0][0] if self._heap else math.inf
        if self._held and self._probe is None:
            due = min(due, self._probe_due)
        if due == math.inf or self._shutting_down:
            self._cancel_timer()
            return
        if self._timer is not None and self._timer_due is not None and self._timer_due <= due:
            return
        self._cancel_timer()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(max(0.0, due - self._clock()), self._on_timer)
        self._timer_due = due

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_due = None
        self.flush_due()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_due = None

    # -- consuming ----------------------------------------------------------------------------------------------------

    async def get(self) -> K | None:
        """Wait for a key and mark it processing; ``None`` once the queue is shut down. Pair every key with ``done``."""
        while True:
            if self._shutting_down:
                return None
            key = self._pop()
            if key is not None:
                self._queued.discard(key)
                self._rank.pop(key, None)
                self._waiting.pop(key, None)  # this run decides again; its heap entry is now skipped
                self._held.pop(key, None)  # and whether it is held again
                self._m_depth.set(len(self._queued))
                now = self._clock()
                self._processing.add(key)
                self._dirty.discard(key)
                added = self._added_at.pop(key, None)
                if added is not None:
                    self._m_queue_duration.observe(now - added)
                self._started_at[key] = now
                return key
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # Our wake-up may have been consumed by this cancelled waiter: pass it on so no key sits unclaimed.
                if waiter.done() and not waiter.cancelled() and self._queued:
                    self._wake_one()
                raise

    def done(self, key: K) -> None:
        """Finish processing ``key``; if it was added meanwhile, queue it again."""
        if key not in self._processing:
            return
        self._processing.discard(key)
        started = self._started_at.pop(key, None)
        if started is not None:
            self._m_work_duration.observe(self._clock() - started)
        if key in self._dirty and not self._shutting_down:
            self._push(key)
        if key == self._probe:  # its run ended without a new 429: the server answers again
            self._probe = None
            held, self._held = list(self._held), {}
            for other in held:
                self.add(other)
            if held:
                logger.info("work queue %s: the API server answers again, %d held key(s) queued", self.name, len(held))

    # -- handing keys over ---------------------------------------------------------------------------------------------

    def admit(self, admits: Callable[[K], bool]) -> None:
        """Take only the keys for which ``admits(key)`` from now on (with sharding: keys of the shards held here).

        Checked on every add, delayed add and rate-limited add, so a reconcile that ends with a requeue cannot bring
        back a key of a shard handed over meanwhile. Keys already in the queue stay until ``discard``.
        """
        self.admits = admits

    def discard(self, belongs: Callable[[K], bool]) -> int:
        """Forget every key for which ``belongs(key)``: queued, waiting on a delay, or due again after ``done``.

        For a replica handing a shard over: its keys must not be reconciled here any more, and their backoff goes
        with them (the next holder starts fresh). Keys being processed stay processing (see ``in_flight``) but are not
        queued again when their worker calls ``done``. Returns how many keys were forgotten.
        """
        for key in [key for key in self._held if belongs(key)]:
            del self._held[key]
        if self._probe is not None and belongs(self._probe):
            self._probe = None  # the next held key probes instead
        gone = {key for key in (*self._dirty, *self._waiting, *self._failures) if belongs(key)}
        if not gone:
            self._schedule_timer()
            return 0
        self._queued -= gone
        self._dirty -= gone
        for key in gone:
            self._rank.pop(key, None)
            self._added_at.pop(key, None)
            self._failures.pop(key, None)
            self._waiting.pop(key, None)  # its heap entry is now superseded and skipped
        self._queues = tuple(collections.deque(key for key in queue if key not in gone) for queue in self._queues)
        self._m_depth.set(len(self._queued))
        self._schedule_timer()
        return len(gone)

    def in_flight(self, belongs: Callable[[K], bool]) -> set[K]:
        """The keys being processed (handed out by ``get``, no ``done`` yet) for which ``belongs(key)``."""
        return {key for key in self._processing if belongs(key)}

    def queued(self) -> frozenset[K]:
        """The keys queued and ready now (for per-shard depth gauges; a copy)."""
        return frozenset(self._queued)

    # -- lifecycle and introspection ----------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop accepting adds, drop pending delayed adds, and make every ``get`` return ``None``."""
        self._shutting_down = True
        self._cancel_timer()
        self._waiting.clear()
        self._heap.clear()
        self._held.clear()
        self._probe = None
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def __len__(self) -> int:
        """Number of keys queued and ready (not counting keys in flight or waiting on a delay)."""
        return len(self._queued)

    def update_unfinished_metrics(self) -> None:
        """Refresh the unfinished-work and longest-running gauges (call on a tick or before a scrape)."""
        now = self._clock()
        ages = [now - started for started in self._started_at.values()]
        self._m_unfinished.set(sum(ages))
        self._m_longest.set(max(ages, default=0.0))
