"""One in-process fake of the Kubernetes API, for unit tests of everything that sends requests or watches.

Why one: the reconciler, the informers and the leader elector all talk to the same API through
``core.vocabulary.ApiRequests`` / ``WatchApi``. A single fake that answers the way the API server does (201 with a
uid and resourceVersion, 409 AlreadyExists, 409 Conflict on a stale resourceVersion, 404, merge patches, the status
subresource, label-selected lists) lets each test assert the resulting objects, what ``kubectl get`` would show,
instead of the sequence of calls. Faults are injected explicitly: ``fail(...)`` queues an error for the next request
matching a method and path, ``hang`` blocks every request, and ``watches`` holds scripted watch streams.

It is not an API server: no admission, no defaulting beyond what the tests need (uid, resourceVersion, generation,
an allocated nodePort), no garbage collection. Tests that need those run against the real control plane.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import itertools
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Unpack

from webserver_operator.core.vocabulary import MERGE_PATCH, Decode, QueryValue, RequestOptions
from webserver_operator.kube.errors import ApiError, KubeError, api_error_from_response
from webserver_operator.kube.paths import parse_path

#: A watch script item that blocks forever (a stalled stream).
STALL = object()


def status_error(code: int, reason: str, *, method: str, path: str, message: str | None = None) -> ApiError:
    """The typed error the real client raises for an HTTP ``code`` answered with a ``metav1.Status``."""
    body = {"kind": "Status", "status": "Failure", "reason": reason, "message": message or reason, "code": code}
    return api_error_from_response(code, json.dumps(body).encode(), method=method, path=path)


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: what the API server does with ``application/merge-patch+json``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str | None


@dataclass
class _Fault:
    method: str
    path_suffix: str
    error: KubeError
    times: int


class FakeApi:
    """Objects by REST path; see the module docstring for what it answers and how faults are injected."""

    def __init__(
        self, objects: list[tuple[str, dict[str, Any]]] | None = None, *, lists: list[Any] | None = None
    ) -> None:
        #: collection path (``/apis/apps/v1/namespaces/d/deployments``) -> name -> object
        self.collections: dict[str, dict[str, dict[str, Any]]] = collections.defaultdict(dict)
        self.calls: list[Call] = []
        self.hang = False
        #: Errors raised by the next requests, whatever they are; ``fail_always`` by every request while set.
        self.failures: collections.deque[KubeError] = collections.deque()
        self.fail_always: KubeError | None = None
        #: Scripted answers to collection GETs (dicts or exceptions), for informer tests; None = answer from the store.
        self.lists: collections.deque[Any] | None = collections.deque(lists) if lists is not None else None
        self.gates: dict[str, asyncio.Event] = {}
        self.watches: collections.deque[Any] = collections.deque()
        self.watch_queries: list[dict[str, str]] = []
        self.idle = asyncio.Event()
        self._faults: list[_Fault] = []
        self._rv = itertools.count(100)
        self._uid = itertools.count(1)
        self._node_ports = itertools.count(30000)
        for collection, obj in objects or []:
            self.put(collection, obj)

    # -- test set-up and inspection ------------------------------------------------------------------------------

    def put(self, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` in ``collection`` as if it had been created, filling uid and resourceVersion."""
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._uid)}")
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._rv))
        self.collections[collection][meta["name"]] = stored
        return copy.deepcopy(stored)

    def get(self, path: str) -> dict[str, Any] | None:
        """The stored object at ``path`` (a copy), or None."""
        collection, _, name = path.rpartition("/")
        obj = self.collections.get(collection, {}).get(name)
        return copy.deepcopy(obj) if obj is not None else None

    def fail(self, method: str, path_suffix: str, error: KubeError, *, times: int = 1) -> None:
        """Answer the next ``times`` requests with ``method`` and a path ending in ``path_suffix`` with ``error``."""
        self._faults.append(_Fault(method, path_suffix, error, times))

    def writes(self) -> list[Call]:
        return [call for call in self.calls if call.method in ("POST", "PUT", "PATCH", "DELETE")]

    # -- the API --------------------------------------------------------------------------------------------------

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict[str, Any]:
        answer = await self._answer(method, path, **options)
        decode = options.get("decode")
        # As the real client: the answer's JSON through the caller's decoder (``kube.skim``) when it names one.
        return answer if decode is None else dict(decode(json.dumps(answer).encode()))

    async def _answer(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict[str, Any]:
        method = method.upper()
        query, body, content_type = options.get("query"), options.get("body"), options.get("content_type")
        self.calls.append(Call(method, path, {k: str(v) for k, v in (query or {}).items()}, body, content_type))
        if self.hang:
            await asyncio.Event().wait()
        if self.failures:
            raise self.failures.popleft()
        if self.fail_always is not None:
            raise self.fail_always
        gate = next((event for suffix, event in self.gates.items() if path.endswith(suffix)), None)
        if gate is not None:
            await gate.wait()
        for fault in self._faults:
            if fault.method == method and path.endswith(fault.path_suffix) and fault.times > 0:
                fault.times -= 1
                raise fault.error
        info = parse_path(path)
        if info is None:
            raise status_error(404, "NotFound", method=method, path=path)
        if info.name is None:
            if method == "GET" and self.lists is not None:
                return await self._scripted_list()
            if method == "GET":
                return self._list(path, query or {})
            if method == "POST":
                assert isinstance(body, dict)
                return self._create(path, body)
            raise AssertionError(f"unexpected {method} on collection {path}")
        collection = path
        for _ in range(2 if info.subresource else 1):
            collection = collection.rpartition("/")[0]
        current = self.collections.get(collection, {}).get(info.name)
        if current is None:
            raise status_error(404, "NotFound", method=method, path=path, message=f'"{info.name}" not found')
        if method == "GET":
            return copy.deepcopy(current)
        if method == "DELETE":
            expected = (
                ((body or {}).get("preconditions") or {}).get("resourceVersion") if isinstance(body, dict) else None
            )
            if expected is not None and expected != current["metadata"].get("resourceVersion"):
                raise status_error(409, "Conflict", method=method, path=path, message="precondition failed")
            del self.collections[collection][info.name]
            return {"kind": "Status", "status": "Success"}
        assert isinstance(body, dict)
        if method == "PATCH":
            assert content_type == MERGE_PATCH, f"only merge patches are supported, got {content_type}"
            return self._update(collection, current, apply_merge_patch(current, body), body, path)
        if method == "PUT":
            if info.subresource == "status":
                updated = copy.deepcopy(current)
                updated["status"] = copy.deepcopy(body.get("status"))
                updated["metadata"]["resourceVersion"] = body["metadata"].get("resourceVersion")
                return self._update(collection, current, updated, body, path, status_only=True)
            return self._update(collection, current, copy.deepcopy(body), body, path)
        raise AssertionError(f"unexpected {method} {path}")

    @property
    def list_queries(self) -> list[dict[str, str]]:
        return [call.query for call in self.calls if call.method == "GET"]

    async def _scripted_list(self) -> dict[str, Any]:
        assert self.lists is not None
        if not self.lists:
            self.idle.set()
            await asyncio.Event().wait()
        answer = self.lists.popleft()
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, dict)
        return answer

    def _list(self, path: str, query: Mapping[str, QueryValue]) -> dict[str, Any]:
        selector = dict(part.split("=", 1) for part in str(query.get("labelSelector") or "").split(",") if part)
        items = [
            copy.deepcopy(obj)
            for obj in self.collections.get(path, {}).values()
            if all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
        ]
        return {"metadata": {"resourceVersion": str(next(self._rv))}, "items": items}

    def _create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self._uid):05d}"
        if meta["name"] in self.collections[path]:
            raise status_error(409, "AlreadyExists", method="POST", path=path, message=f'"{meta["name"]}" exists')
        if obj.get("kind") == "Service":
            self._allocate_node_ports(obj, path)
        meta.pop("resourceVersion", None)
        return self.put(path, obj)

    def _allocate_node_ports(self, obj: dict[str, Any], path: str) -> None:
        if (obj.get("spec") or {}).get("type") != "NodePort":
            return
        taken = {
            port.get("nodePort")
            for collection, objs in self.collections.items()
            if collection.endswith("/services")
            for other in objs.values()
            if other["metadata"]["name"] != obj["metadata"]["name"] or collection != path
            for port in (other.get("spec") or {}).get("ports") or []
        }
        for port in obj["spec"].get("ports") or []:
            if port.get("nodePort") in taken:
                raise status_error(
                    422,
                    "Invalid",
                    method="POST",
                    path=path,
                    message=f"spec.ports[0].nodePort: Invalid value: {port['nodePort']}: "
                    "provided port is already allocated",
                )
            if not port.get("nodePort"):
                port["nodePort"] = next(self._node_ports)

    def _update(
        self,
        collection: str,
        current: dict[str, Any],
        updated: dict[str, Any],
        body: dict[str, Any],
        path: str,
        *,
        status_only: bool = False,
    ) -> dict[str, Any]:
        sent_rv = (body.get("metadata") or {}).get("resourceVersion")
        if sent_rv is not None and sent_rv != current["metadata"]["resourceVersion"]:
            raise status_error(409, "Conflict", method="PUT", path=path, message="the object has been modified")
        if updated.get("kind") == "Service":
            self._allocate_node_ports(updated, collection)
        if not status_only and updated.get("spec") != current.get("spec"):
            updated["metadata"]["generation"] = int(current["metadata"].get("generation") or 1) + 1
        updated["metadata"]["uid"] = current["metadata"]["uid"]
        updated["metadata"]["resourceVersion"] = str(next(self._rv))
        self.collections[collection][current["metadata"]["name"]] = updated
        return copy.deepcopy(updated)

    @contextlib.asynccontextmanager
    async def watch(
        self, path: str, *, query: Mapping[str, QueryValue], decode: Decode | None = None
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """Play the next script from ``watches``: an exception (raised on open) or events / exceptions / pauses.

        Events pass through ``decode`` as JSON when the caller names a decoder (``kube.skim``), as on the wire.
        """
        self.watch_queries.append({k: str(v) for k, v in query.items()})
        if not self.watches:
            self.idle.set()
            await asyncio.Event().wait()
        script = self.watches.popleft()
        if isinstance(script, BaseException):
            raise script
        yield self._stream(script, decode)

    async def _stream(self, script: list[Any], decode: Decode | None) -> AsyncIterator[dict[str, Any]]:
        for item in script:
            if isinstance(item, float):
                await asyncio.sleep(item)
                continue
            if item is STALL:
                await asyncio.Event().wait()
            if isinstance(item, BaseException):
                raise item
            yield item if decode is None else dict(decode(json.dumps(item).encode()))
