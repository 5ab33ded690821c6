"""The reconcile loop: N workers draining a ``WorkQueue`` into a ``Reconciler``, with controller-runtime semantics.

What each outcome does (controller-runtime ``reconcileHandler``, because operators and dashboards expect it):

* success, no ``requeue_after`` -> ``forget`` the key's backoff; it sleeps until the next event or resync.
* success with ``requeue_after`` -> ``forget`` and ``add_after``: a timed recheck, not a failure.
* ``Conflict`` (409: our cache was behind the object we wrote) -> rate-limited requeue, counted as
  ``result="requeue"`` and logged at debug: routine with optimistic concurrency, not an error.
* exception -> rate-limited requeue (5 ms doubling per key, capped; never sooner than the error's ``retry_after``,
  so a server's ``Retry-After`` is honoured here rather than by a client retry inside the worker), error metrics, one
  log line with the key.
* ``TooManyRequests`` (429, also as a ``__cause__``) -> *held*, not failed: no backoff step, counted as
  ``result="requeue"``; one key probes after each ``Retry-After`` and every held key is queued once a probe gets
  through (``WorkQueue.hold`` says why: the server's throttling is not the key's fault, and retrying every held key
  only feeds it).
* ``TerminalError`` (or an exception raised ``from`` one, the analogue of Go's ``errors.Is``) -> logged and counted as
  an error, backoff forgotten, *not* requeued: retrying cannot help until the object changes, and a change is an
  event that enqueues it anyway.
* ``WritesStopped`` (also as a ``__cause__``) from the write gate named by ``gate_writes`` -> *paused*, not failed:
  no backoff step, counted as ``result="requeue"``, one info line; the key is queued again as soon as the gate lets a
  write to the refused path leave (looked at every ``_PAUSED_POLL_SECONDS``), or dropped if the queue no longer
  admits it (a shard handed over). Why: the gate refuses because this replica's Lease renewal is overdue (the fence,
  ``runtime.leases.fence``), a condition of the whole replica that ends with the next successful renewal, not
  anything wrong with the key. Each refusal costs milliseconds, so counted as a failure a key climbs the 5 ms
  doubling backoff within a second: with the API answering in 3-6 s for a minute the fence closed for seconds at a
  time, keys reached 13-16 steps (20-164 s) and, unless an event woke them, waited up to 165 s after the API had
  recovered (issue 32, docs/reliability.md "slow-api"). controller-runtime has no such state to copy: its leader
  election has no write fence (a lost renewal ends the manager, reconciles in flight keep writing until the process
  exits), and its rate limiter (client-go ``DefaultControllerRateLimiter``: per item 5 ms doubling to 1000 s, and a
  10 qps / 100 burst bucket over all retries) would treat these refusals like any error. A controller not told its
  gate cannot see it reopen and backs off as for any other error. The paused keys are queued at normal priority, in
  their turn: they hold changes older than any made after the fence reopened, and controller-runtime too re-queues a
  failed key at the priority it was handed out at. Queued low (as a start's list), they starved: in the slow-api run
  on a loaded machine (4 workers at about 4 reconciles/s, churn and child events arriving as fast) 127 keys came
  back low and the backlog missed the 90 s limit, where at normal priority it took 48 s.

Every exception is caught per key, so one bad object never kills a worker or stalls the others; while a key backs off
the workers serve other keys. The queue guarantees one worker per key. Keys offered before ``run`` are dropped (a
standby replica keeps warm caches but an empty queue); ``run`` starts by enqueueing every primary object, as
controller-runtime replays its caches when a controller starts after winning the election. A periodic resync
(default 10 h, like controller-runtime's SyncPeriod) re-enqueues every primary object as a safety net against missed
events.

``Result``, ``TerminalError`` and the ``Reconciler`` Protocol are declared in ``runtime.controller.result``. Built by
``runtime.controller.builder.ControllerBuilder.complete``, which also connects the informers' events to its queue; run
and stopped by the manager (``run`` once leading, ``stop`` on shutdown or when leadership is lost).
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from webserver_operator import metrics
from webserver_operator.core.vocabulary import ObjectKey, ObjectReader, object_key
from webserver_operator.kube.errors import Conflict, KubeError, TooManyRequests, WritesStopped
from webserver_operator.kube.gate import WriteCheck
from webserver_operator.runtime.controller import logcontext
from webserver_operator.runtime.controller.result import Reconciler, cause_of, is_terminal
from webserver_operator.runtime.controller.workqueue import WorkQueue

__all__ = ["Controller"]

logger = logging.getLogger(__name__)

_DEFAULT_RESYNC_PERIOD = 10 * 3600.0
_METRICS_TICK_SECONDS = 1.0
#: How often ``release`` looks whether the handed-over keys' reconciles have ended.
_RELEASE_POLL_SECONDS = 0.02
#: How often the keys paused by the write gate are looked at again: a renewal reopens the fence within a retry period
#: (seconds), so a fifth of a second adds little and a poll of a few hundred clock readings costs nothing.
_PAUSED_POLL_SECONDS = 0.2


class Controller:
    """Runs ``workers`` concurrent reconciles over ``queue``; see the module docstring for the outcome rules."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        queue: WorkQueue[ObjectKey],
        *,
        workers: int = 1,
        resync_period: float = _DEFAULT_RESYNC_PERIOD,
        primary: ObjectReader | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.name = name
        self.reconciler = reconciler
        self.queue = queue
        self.workers = workers
        self.resync_period = resync_period
        self.primary = primary
        self._clock = clock
        self._worker_tasks: list[asyncio.Task[None]] = []
        self._running = False
        self._background: list[asyncio.Task[None]] = []
        self._stop_hooks: list[Callable[[float], Awaitable[None]]] = []
        self._gate: WriteCheck | None = None
        self._paused: dict[ObjectKey, str] = {}  # key -> the path of its refused write (``gate_writes``)
        self._m_active = metrics.ACTIVE_WORKERS.labels(controller=name)
        self._m_errors = metrics.RECONCILE_ERRORS.labels(controller=name)
        # Exported at 0 from the start, as controller-runtime does, so its panel and alert have a series to read.
        self._m_terminal = metrics.TERMINAL_RECONCILE_ERRORS.labels(controller=name)
        self._m_time = metrics.RECONCILE_TIME.labels(controller=name)
        # One child per result, looked up once: ``labels()`` on every reconcile builds a key and takes a lock.
        self._m_total = {
            result: metrics.RECONCILE_TOTAL.labels(controller=name, result=result)
            for result in ("success", "requeue_after", "requeue", "error")
        }

    # -- event -> key ---------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True from the start of ``run`` until it returns; keys are only taken while running."""
        return self._running

    def enqueue(self, key: ObjectKey, *, low_priority: bool = False, urgent: bool = False, after: float = 0.0) -> None:
        """Ask for ``key`` to be reconciled; ignored until the controller runs (``run`` enqueues everything).

        ``low_priority``: after every normal key; ``urgent``: before them (see ``WorkQueue``); ``after``: at normal
        priority once that many seconds have passed (``WorkQueue.add_after``). A key the queue does not admit is
        ignored too.
        """
        if not self._running:
            return
        if after > 0:
            self.queue.add_after(key, after)
        else:
            self.queue.add(key, low_priority=low_priority, urgent=urgent)

    async def release(self, belongs: Callable[[ObjectKey], bool], *, drain_timeout: float) -> bool:
        """Hand the keys for which ``belongs(key)`` over: drop them from the queue, wait for their reconciles to end.

        Call once the queue stopped admitting them (``WorkQueue.admit``), so nothing queues them again. Waits up to
        ``drain_timeout`` s for the reconciles in flight; returns False if some were still running then (their
        writes are the caller's to stop, e.g. by revoking the fence that gates them).
        """
        self.queue.discard(belongs)
        for key in [key for key in self._paused if belongs(key)]:
            del self._paused[key]
        deadline = asyncio.get_running_loop().time() + max(drain_timeout, 0.0)
        while self.queue.in_flight(belongs):
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(_RELEASE_POLL_SECONDS)
        return True

    def resync(self, belongs: Callable[[ObjectKey], bool] | None = None) -> int:
        """Enqueue every object of the primary cache at low priority; returns how many keys were offered.

        Low, as controller-runtime queues its initial list and resyncs: a start or a periodic look at everything must
        not delay a change that arrives meanwhile. ``belongs``: only the keys it accepts (a shard just synced).
        """
        if self.primary is None:
            return 0
        keys = [
            key
            for key in map(object_key, self.primary.list())
            if self.queue.admits(key) and (belongs is None or belongs(key))
        ]
        for key in keys:
            self.queue.add(key, low_priority=True)
        return len(keys)

    # -- lifecycle ------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run the workers until ``stop`` (or cancellation); the queue is shut down on the way out."""
        if self._worker_tasks:
            raise RuntimeError(f"controller {self.name} is already running")
        metrics.MAX_CONCURRENT_RECONCILES.labels(controller=self.name).set(self.workers)
        self._m_active.set(0)
        self._running = True
        self.resync()
        self._worker_tasks = [
            asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}") for i in range(self.workers)
        ]
        self._background = [asyncio.create_task(self._metrics_tick(), name=f"{self.name}-metrics")]
        if self.primary is not None and self.resync_period > 0:
            self._background.append(asyncio.create_task(self._resync_loop(), name=f"{self.name}-resync"))
        if self._gate is not None:
            self._background.append(asyncio.create_task(self._resume_loop(self._gate), name=f"{self.name}-resume"))
        logger.info("controller %s started with %d worker(s)", self.name, self.workers, extra={"controller": self.name})
        try:
            await asyncio.wait(self._worker_tasks)
        finally:
            self._running = False
            self._paused.clear()  # the next start enqueues every primary object anyway
            self.queue.shutdown()
            tasks = [*self._worker_tasks, *self._background]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            logger.info("controller %s stopped", self.name, extra={"controller": self.name})

    def gate_writes(self, check: WriteCheck) -> None:
        """Name the check that gates the reconciler's writes: the one its client was given (``KubeClient.gated``).

        Call before ``run``. A reconcile whose write ``check`` refused (``WritesStopped``) is then paused instead of
        failed (module docstring): the key is queued again once ``check`` lets a write to the same path leave.
        """
        self._gate = check

    def on_stop(self, hook: Callable[[float], Awaitable[None]]) -> None:
        """Run ``hook(seconds_left)`` at the end of ``stop``, with what is left of the drain timeout (0 when deposed).

        For work the reconciles handed off and that must end with them, such as Events still queued.
        """
        self._stop_hooks.append(hook)

    async def stop(self, drain_timeout: float) -> bool:
        """Stop taking keys, let in-flight reconciles finish for up to ``drain_timeout`` s, cancel the rest.

        Returns True when every in-flight reconcile finished in time. Keys still queued are dropped: the next start
        rebuilds them from the informer caches. The ``on_stop`` hooks run last, with the time left.
        """
        deadline = asyncio.get_running_loop().time() + max(drain_timeout, 0.0)
        try:
            return await self._drain(drain_timeout)
        finally:
            for hook in self._stop_hooks:
                await hook(max(0.0, deadline - asyncio.get_running_loop().time()))

    async def _drain(self, drain_timeout: float) -> bool:
        self.queue.shutdown()
        for task in self._background:
            task.cancel()
        running = [task for task in self._worker_tasks if not task.done()]
        if not running:
            return True
        _, pending = await asyncio.wait(running, timeout=max(drain_timeout, 0.0))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if pending:
            logger.warning(
                "controller %s: cancelled %d reconcile(s) still running after %.1fs",
                self.name,
                len(pending),
                drain_timeout,
                extra={"controller": self.name},
            )
        return not pending

    # -- workers --------------------------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            self._m_active.inc()
            try:
                await self._process(key)
            finally:
                self._m_active.dec()
                self.queue.done(key)

    async def _process(self, key: ObjectKey) -> None:
        with logcontext.reconciling(controller=self.name, namespace=key[0], name=key[1]):
            await self._process_in_context(key)

    async def _process_in_context(self, key: ObjectKey) -> None:
        self._paused.pop(key, None)  # running again (an event woke it): this run decides whether it waits again
        started = self._clock()
        try:
            result = await self.reconciler.reconcile(key)
            requeue_after = result.requeue_after
        except Exception as exc:  # one bad key must never kill a worker
            self._on_error(key, exc, self._clock() - started)
            return
        finally:
            self._m_time.observe(self._clock() - started)
        duration = self._clock() - started
        self.queue.forget(key)
        if requeue_after is not None and requeue_after > 0:
            self.queue.add_after(key, requeue_after)
            outcome = "requeue_after"
        else:
            outcome = "success"
        self._m_total[outcome].inc()
        if logger.isEnabledFor(logging.DEBUG):  # the fields are built only for a line that is written
            logger.debug(
                "reconciled %s/%s: %s in %.3fs",
                *key,
                outcome,
                duration,
                extra=self._extra(key, outcome, duration, requeue_after=requeue_after),
            )

    def _on_error(self, key: ObjectKey, exc: Exception, duration: float) -> None:
        stopped = cause_of(exc, WritesStopped) if self._gate is not None else None
        if stopped is not None:
            self._pause(key, stopped, duration)
            return
        throttled = cause_of(exc, TooManyRequests)
        if throttled is not None:
            self._hold(key, throttled, duration)
            return
        if isinstance(exc, Conflict):
            self.queue.add_rate_limited(key)
            self._m_total["requeue"].inc()
            logger.debug(
                "reconcile %s/%s met a newer object than its cache (409), retrying: %s",
                *key,
                exc,
                extra=self._extra(key, "requeue", duration),
            )
            return
        self._m_errors.inc()
        self._m_total["error"].inc()
        if is_terminal(exc):
            self._m_terminal.inc()
            self.queue.forget(key)
            logger.error(
                "reconcile %s/%s failed terminally (not retried until the object changes): %s",
                *key,
                exc,
                extra=self._extra(key, "terminal_error", duration, error=str(exc)),
            )
            return
        retry_after = getattr(exc, "retry_after", None)
        self.queue.add_rate_limited(key, at_least=float(retry_after) if isinstance(retry_after, int | float) else 0.0)
        retries = self.queue.num_requeues(key)
        logger.error(
            "reconcile %s/%s failed (retry %d with backoff): %s: %s",
            *key,
            retries,
            type(exc).__name__,
            exc,
            # An API that failed to answer is an expected, handled condition (its message says what happened); a
            # traceback is kept for everything else, which is a bug.
            exc_info=None if isinstance(exc, KubeError) else exc,
            extra=self._extra(key, "error", duration, error=str(exc), retries=retries),
        )

    def _pause(self, key: ObjectKey, stopped: WritesStopped, duration: float) -> None:
        """Keep ``key`` aside until the gate lets its refused write leave (``_resume_paused``); no backoff step."""
        self._paused[key] = stopped.path
        self._m_total["requeue"].inc()
        logger.info(
            "reconcile %s/%s paused, retried as soon as writes may leave again: %s",
            *key,
            stopped,
            extra=self._extra(key, "paused", duration, error=str(stopped)),
        )

    def _hold(self, key: ObjectKey, refused: TooManyRequests, duration: float) -> None:
        """Hold ``key`` after a 429 until a probe gets past the throttling (``WorkQueue.hold``)."""
        starts = self.queue.hold(key, refused.retry_after)
        self._m_total["requeue"].inc()
        log = logger.info if starts else logger.debug
        log(
            "reconcile %s/%s held: the API server is throttling this client, one key probes after each Retry-After "
            "and the held keys are queued once it gets through: %s",
            *key,
            refused,
            extra=self._extra(key, "throttled", duration, error=str(refused)),
        )

    def _resume_paused(self, gate: WriteCheck) -> int:
        """Queue the paused keys whose refused write ``gate`` lets leave now; drop those the queue no longer admits."""
        resumed = 0
        for key, path in list(self._paused.items()):
            if not self.queue.admits(key):
                del self._paused[key]
            elif gate(path) is None:
                del self._paused[key]
                self.queue.add(key)
                resumed += 1
        return resumed

    def _extra(self, key: ObjectKey, outcome: str, duration: float, **fields: object) -> dict[str, object]:
        # "name" is a reserved LogRecord attribute, hence object_name.
        return {
            "controller": self.name,
            "namespace": key[0],
            "object_name": key[1],
            "result": outcome,
            "duration_seconds": round(duration, 6),
            **fields,
        }

    # -- housekeeping ---------------------------------------------------------------------------------------------

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.resync_period)
            count = self.resync()
            logger.info("controller %s: periodic resync enqueued %d key(s)", self.name, count)

    async def _resume_loop(self, gate: WriteCheck) -> None:
        while True:
            await asyncio.sleep(_PAUSED_POLL_SECONDS)
            if self._paused and (count := self._resume_paused(gate)):
                logger.info(
                    "controller %s: writes may leave again, %d paused key(s) queued",
                    self.name,
                    count,
                    extra={"controller": self.name},
                )

    async def _metrics_tick(self) -> None:
        while True:
            self.queue.update_unfinished_metrics()
            await asyncio.sleep(_METRICS_TICK_SECONDS)
