"""The leading phase of the manager: losing the Lease stops every write at once, during the shutdown drain too."""

from __future__ import annotations

import asyncio

from webserver_operator.manager.operator import lead
from webserver_operator.runtime.controller.loop import Controller
from webserver_operator.runtime.controller.result import Result
from webserver_operator.runtime.controller.workqueue import WorkQueue
from webserver_operator.runtime.leases.lease import LeaseLost

Key = tuple[str, str]


class SlowWriter:
    """A reconcile that is still in flight (e.g. a status write retried after a 409) when the drain starts."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.finished = False
        self.cancelled = False

    async def reconcile(self, key: Key) -> Result:
        self.started.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True  # the write a deposed leader must never make
        return Result()


async def test_lease_lost_during_the_drain_cancels_in_flight_reconciles_at_once() -> None:
    writer = SlowWriter()
    controller = Controller("lead-drain", writer, WorkQueue(name="lead-drain"))
    lost = asyncio.Event()

    async def hold() -> None:
        await lost.wait()
        raise LeaseLost("could not renew the lease for 10s (renew deadline)")

    hold_task = asyncio.create_task(hold())
    stop = asyncio.Event()
    leading = asyncio.create_task(lead(controller, hold=hold_task, stop_requested=stop, drain_timeout=30.0))
    while not controller.running:  # noqa: ASYNC110 - polling the predicate is the point
        await asyncio.sleep(0.001)
    controller.enqueue(("ns", "web"))
    await asyncio.wait_for(writer.started.wait(), 1)
    stop.set()  # SIGTERM: the drain starts and waits for the in-flight reconcile
    await asyncio.sleep(0.05)
    loop = asyncio.get_running_loop()
    lost_at = loop.time()
    lost.set()  # an API brownout: renewal fails for the renew deadline while draining
    code = await asyncio.wait_for(leading, 10)
    assert loop.time() - lost_at < 0.5, "in-flight reconciles must stop as soon as the Lease is lost"
    assert writer.cancelled
    assert not writer.finished
    assert code == 1


async def test_a_graceful_drain_lets_in_flight_reconciles_finish() -> None:
    writer = SlowWriter()
    controller = Controller("lead-drain-ok", writer, WorkQueue(name="lead-drain-ok"))
    stop = asyncio.Event()
    leading = asyncio.create_task(lead(controller, hold=None, stop_requested=stop, drain_timeout=30.0))
    while not controller.running:  # noqa: ASYNC110 - polling the predicate is the point
        await asyncio.sleep(0.001)
    controller.enqueue(("ns", "web"))
    await asyncio.wait_for(writer.started.wait(), 1)
    stop.set()
    assert await asyncio.wait_for(leading, 10) == 0
    assert writer.finished
