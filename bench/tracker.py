"""What the cluster looks like from the outside, and when each object reached each milestone.

Why one tracker with watches: every timing in the benchmark is taken the same way for every system (our operator,
its peers, the raw driver): the moment an event reaches this process on its own watch of WebServers, Deployments and
Services. So an operator's latency includes the API server's write and watch delivery, exactly as a user would see
it, and the comparison between systems stays fair.

A *milestone* is a predicate over the latest state of one named object group (a WebServer and its children) plus the
set of names still waiting for it; the tracker evaluates it on every event for those names and records the receive
time of the event that first made it true. Scenarios register milestones, then act, then wait. A *sequence* is a
milestone whose predicate advances through several stages (drifted, then repaired), so no event is missed between two
waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.kubeapi import ApiError, KubeApi

Body = dict[str, Any]

KINDS: dict[str, str] = {
    "ws": "/apis/web.webserver-operator.dev/v1/namespaces/{ns}/webservers",
    "dep": "/apis/apps/v1/namespaces/{ns}/deployments",
    "svc": "/api/v1/namespaces/{ns}/services",
}
#: The same kinds in every namespace (``Tracker(api, None)``, the sharded benchmark's many namespaces; names must then
#: be unique across namespaces, since the state is keyed by name).
ALL_NAMESPACES: dict[str, str] = {
    "ws": "/apis/web.webserver-operator.dev/v1/webservers",
    "dep": "/apis/apps/v1/deployments",
    "svc": "/api/v1/services",
}


class State:
    """Latest objects by kind and name (deleted objects are removed)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Body]] = {kind: {} for kind in KINDS}

    def get(self, kind: str, name: str) -> Body | None:
        return self.objects[kind].get(name)


Check = Callable[[State, str], bool]


@dataclass(eq=False)
class Milestone:
    """Names still waiting for ``check``; ``reached`` maps each name to the receive time that satisfied it."""

    check: Check
    pending: set[str]
    reached: dict[str, float] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def count(self) -> int:
        return len(self.reached)


class Sequence:
    """A stateful check passing through ``stages`` in order; ``times[i]`` is when stage i was first true."""

    def __init__(self, *stages: Check) -> None:
        self.stages = stages
        self.times: list[float] = []
        self.now = 0.0

    def __call__(self, state: State, name: str) -> bool:
        while len(self.times) < len(self.stages) and self.stages[len(self.times)](state, name):
            self.times.append(self.now)
        return len(self.times) == len(self.stages)


class Tracker:
    """List + watch WebServers, Deployments and Services of one namespace (None: all); evaluate milestones on events."""

    def __init__(self, api: KubeApi, namespace: str | None) -> None:
        self.api = api
        self.namespace = namespace
        self.state = State()
        self.events = 0
        self._milestones: list[Milestone] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._synced: dict[str, asyncio.Event] = {kind: asyncio.Event() for kind in KINDS}

    async def start(self) -> None:
        """Start the watches; return once every kind is listed, raise the first watch's error instead."""
        for kind in KINDS:
            self._tasks.append(asyncio.create_task(self._run(kind), name=f"watch-{kind}"))
        synced = asyncio.ensure_future(asyncio.gather(*(e.wait() for e in self._synced.values())))
        waiters: list[asyncio.Future[Any]] = [synced, *self._tasks]
        done, _ = await asyncio.wait(waiters, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if synced not in done:
            synced.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await synced
            failed = [t for t in self._tasks if t.done()]
            if failed:
                await failed[0]  # raises the watch's own error
            raise TimeoutError("the benchmark's watches did not list WebServers, Deployments and Services in 60 s")

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self, kind: str) -> None:
        path = ALL_NAMESPACES[kind] if self.namespace is None else KINDS[kind].format(ns=self.namespace)
        while True:
            try:
                listing = await self.api.request("GET", path, seconds=120)
            except ApiError as err:
                if err.status != 429:  # a just-registered CRD answers 429 while its storage initialises
                    raise
                await asyncio.sleep(0.5)
                continue
            now = time.time()
            seen = set()
            for item in listing.get("items") or []:
                name = item["metadata"]["name"]
                seen.add(name)
                self._apply(kind, "ADDED", item, now)
            for name in list(self.state.objects[kind]):
                if name not in seen:
                    self._apply(kind, "DELETED", self.state.objects[kind][name], now)
            self._synced[kind].set()
            version = listing["metadata"]["resourceVersion"]
            try:
                while True:
                    async for received, event in self.api.watch(path, resource_version=version):
                        obj = event.get("object") or {}
                        version = (obj.get("metadata") or {}).get("resourceVersion", version)
                        if event.get("type") == "ERROR":
                            if obj.get("code") == 410:
                                raise ApiError(410, "expired", method="WATCH", path=path)
                            continue
                        if event.get("type") == "BOOKMARK":
                            continue
                        self._apply(kind, str(event.get("type")), obj, received)
            except ApiError as err:
                if err.status != 410:
                    raise

    def _apply(self, kind: str, event_type: str, obj: Body, received: float) -> None:
        name = obj["metadata"]["name"]
        if event_type == "DELETED":
            self.state.objects[kind].pop(name, None)
        else:
            self.state.objects[kind][name] = obj
        self.events += 1
        self._evaluate(name, received)

    def _evaluate(self, name: str, received: float) -> None:
        for milestone in list(self._milestones):
            if name not in milestone.pending:
                continue
            if isinstance(milestone.check, Sequence):
                milestone.check.now = received
            if milestone.check(self.state, name):
                milestone.pending.discard(name)
                milestone.reached[name] = received
                if not milestone.pending:
                    milestone.done.set()
                    self._milestones.remove(milestone)

    def milestone(self, check: Check, names: Iterable[str]) -> Milestone:
        """Start tracking ``check`` for ``names``; names already satisfying it are recorded at once."""
        milestone = Milestone(check=check, pending=set(names))
        self._milestones.append(milestone)
        now = time.time()
        for name in list(milestone.pending):
            self._evaluate(name, now)
        if not milestone.pending:
            milestone.done.set()
        return milestone

    def drop(self, milestone: Milestone) -> None:
        if milestone in self._milestones:
            self._milestones.remove(milestone)


async def wait_all(milestones: Iterable[Milestone], *, seconds: float) -> bool:
    """Wait until every milestone is done; False on timeout (the milestones keep what they reached)."""
    pending = [m.done.wait() for m in milestones]
    try:
        await asyncio.wait_for(asyncio.gather(*pending), timeout=seconds)
    except TimeoutError:
        return False
    return True
