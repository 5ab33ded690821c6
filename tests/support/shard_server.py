"""A fake API server for one resource whose watches all hear every change, with or without ShardedListAndWatch.

Why not ``tests.support.fake_api.FakeApi``: its watches play scripts, one per watch request, so two watches of the
same collection never see the same event. What the sharded cache must prove is about exactly that: how many lists and
watches a replica opens, and how many times each change reaches it when the server does not filter by shard (every
open watch receives every event, as from a kube-apiserver without the gate) and when it does (each watch receives the
events of the namespaces its ``shardSelector`` names, and each list echoes the selector in ``metadata.shardInfo``).

Cluster-wide only (the path without a namespace), no history: a watch receives what changes after it opened, so a
test waits for the watches to settle (``settled``) before changing anything. Records every list and watch query.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Unpack

from webserver_operator.core.resources import Resource
from webserver_operator.core.vocabulary import Decode, KubeObject, ObjectKey, QueryValue, RequestOptions
from webserver_operator.runtime.sharding.ranges import SHARD_SELECTOR_PARAM, namespace_hash

_BOUNDS = re.compile(r"'(0x[0-9a-f]+)', '(0x[0-9a-f]+)'")


def _keeps(query: Mapping[str, QueryValue] | None, *, gate: bool) -> Callable[[str], bool]:
    """Which namespaces an answer to ``query`` holds: all of them without the gate or without a selector."""
    selector = str((query or {}).get(SHARD_SELECTOR_PARAM) or "")
    if not gate or not selector:
        return lambda _namespace: True
    spans = [(int(start, 16), int(end, 16)) for start, end in _BOUNDS.findall(selector)]
    return lambda namespace: any(start <= namespace_hash(namespace) < end for start, end in spans)


class ShardServer:
    """``resource``'s objects, listed and watched cluster-wide; see the module docstring."""

    def __init__(self, resource: Resource, *, gate: bool) -> None:
        self.resource = resource
        self.gate = gate
        self.path = resource.path()
        self.objects: dict[ObjectKey, KubeObject] = {}
        self.list_queries: list[dict[str, str]] = []
        self.watch_queries: list[dict[str, str]] = []
        self._rv = itertools.count(1)
        self._resource_version = "0"
        self._watchers: list[tuple[Callable[[str], bool], asyncio.Queue[dict[str, Any]]]] = []
        self._unhandled = 0  # events sent to open watches and not yet handled by their readers
        self._all_handled = asyncio.Event()
        self._all_handled.set()

    # -- what a test does ---------------------------------------------------------------------------------------------

    def put(self, namespace: str, name: str) -> None:
        """Create or change an object: ADDED or MODIFIED to every watch that keeps its namespace."""
        key = (namespace, name)
        event_type = "MODIFIED" if key in self.objects else "ADDED"
        obj = {"metadata": {"namespace": namespace, "name": name, "resourceVersion": self._next_rv()}, "spec": {}}
        self.objects[key] = obj
        self._send(event_type, obj)

    def delete(self, namespace: str, name: str) -> None:
        obj = self.objects.pop((namespace, name))
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._send("DELETED", obj)

    @property
    def open_watches(self) -> int:
        return len(self._watchers)

    async def settled(self) -> int:
        """The number of open watches, once it has stayed the same for a moment (none is being opened or closed)."""
        while True:
            count = self.open_watches
            await asyncio.sleep(0.05)
            if self.open_watches == count:
                return count

    async def delivered(self) -> None:
        """Return once the reader of every open watch has handled every event sent to it (and asked for the next)."""
        await self._all_handled.wait()

    # -- the API ------------------------------------------------------------------------------------------------------

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict[str, Any]:
        assert (method, path) == ("GET", self.path), f"unexpected {method} {path}"
        query = options.get("query")
        self.list_queries.append({k: str(v) for k, v in (query or {}).items()})
        keeps = _keeps(query, gate=self.gate)
        items = [copy.deepcopy(obj) for (namespace, _), obj in self.objects.items() if keeps(namespace)]
        meta: dict[str, Any] = {"resourceVersion": self._resource_version}
        selector = (query or {}).get(SHARD_SELECTOR_PARAM)
        if self.gate and selector:
            meta["shardInfo"] = {"selector": selector}
        await asyncio.sleep(0)
        return {"metadata": meta, "items": items}

    @contextlib.asynccontextmanager
    async def watch(
        self, path: str, *, query: Mapping[str, QueryValue], decode: Decode | None = None
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        assert path == self.path, f"unexpected watch of {path}"
        self.watch_queries.append({k: str(v) for k, v in query.items()})
        watcher = (_keeps(query, gate=self.gate), asyncio.Queue[dict[str, Any]]())
        self._watchers.append(watcher)
        try:
            yield self._events(watcher[1])
        finally:
            self._watchers.remove(watcher)
            self._handled(watcher[1].qsize())  # closed: what it still held is handled by nobody

    # -- internals ----------------------------------------------------------------------------------------------------

    async def _events(self, queue: asyncio.Queue[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        while True:
            yield await queue.get()
            self._handled(1)  # the reader is back for the next one: it has handled this one

    def _handled(self, count: int) -> None:
        self._unhandled -= count
        if self._unhandled == 0:
            self._all_handled.set()

    def _next_rv(self) -> str:
        self._resource_version = str(next(self._rv))
        return self._resource_version

    def _send(self, event_type: str, obj: KubeObject) -> None:
        namespace = str(obj["metadata"]["namespace"])
        for keeps, queue in self._watchers:
            if keeps(namespace):
                queue.put_nowait({"type": event_type, "object": copy.deepcopy(obj)})
                self._unhandled += 1
                self._all_handled.clear()
