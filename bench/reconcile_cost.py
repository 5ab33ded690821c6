"""CPU of one reconcile of a converged WebServer, in-process: the work a reconcile does that writes nothing.

Why: in a bulk create of 1000 WebServers the operator reconciles each about four times, and only the first and the
one that writes Ready write anything; the others are woken by a Deployment's status moving on or by the operator's
own status write. What those cost is the reconciler's own Python work (validating the WebServer, building both
desired children, checking and comparing them, deciding the status), below what the full benchmark can resolve on
a shared 2-core machine. This module measures it alone: ``reconcile.reconciler.WebServerReconciler`` over an
in-memory API (``_MemoryApi``: creates, status writes and patches stored as the API server would, with uids,
resourceVersions and generations; no HTTP) and caches that read it, on the loop the operator runs on.

Two cases, each after the WebServer has converged (its children created, its status written):
- ``same versions``: the reconcile reads exactly what the last one read (the echo of a write, a resync);
- ``deployment moved``: the Deployment has a new resourceVersion each time (kube-controller-manager writing its
  status, which the reconciler reads), so the children are checked and the status decided again.

Run: ``.venv/bin/python -m bench.reconcile_cost [--reconciles 5000] [--rounds 3]``; prints the median microseconds
of process CPU per reconcile for each case. Run the same file in two checkouts to compare two versions. Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
import uuid
from typing import Any, Unpack

from bench.progress import say
from webserver_operator.api.models import API_VERSION, KIND, WEBSERVERS
from webserver_operator.core.resources import DEPLOYMENTS, SERVICES
from webserver_operator.core.vocabulary import KubeObject, KubeObjects, ObjectKey, RequestOptions
from webserver_operator.manager.eventloop import choose_loop, run
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.reconciler import Caches, WebServerReconciler

NAMESPACE, NAME = "bench", "ws-00001"
KEY: ObjectKey = (NAMESPACE, NAME)


class _MemoryApi:
    """Collections of objects by REST path: POST creates, PUT replaces, PATCH merges the top-level fields given."""

    def __init__(self) -> None:
        self.collections: dict[str, dict[str, KubeObject]] = {}
        self._versions = itertools.count(100)

    def store(self, collection: str, obj: KubeObject) -> KubeObject:
        meta = obj["metadata"] = dict(obj.get("metadata") or {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        self.collections.setdefault(collection, {})[str(meta.get("name") or meta.get("generateName"))] = obj
        return obj

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict[str, Any]:
        body: Any = options.get("body")
        if method == "POST":
            return dict(self.store(path, {**body}))
        collection, _, rest = path.rpartition("/")
        name, subresource = rest, None
        if collection.endswith("/status") or rest == "status":
            collection, _, name = collection.rpartition("/")
            subresource = "status"
        current = self.collections.get(collection, {}).get(name)
        if current is None:
            return {}
        if method == "GET":
            return dict(current)
        if method == "PUT" and subresource == "status":
            return dict(self.store(collection, {**current, "status": body["status"]}))
        if method == "PATCH":
            patch = {k: v for k, v in body.items() if k != "metadata"}
            return dict(self.store(collection, {**current, **patch}))
        raise ValueError(f"{method} {path} is not something the reconciler sends to a converged WebServer")


class _Reader:
    """An informer cache over one collection of ``_MemoryApi``."""

    def __init__(self, api: _MemoryApi, collection: str) -> None:
        self._api, self._collection = api, collection

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        return self._api.collections.get(self._collection, {}).get(key[1])

    def list(self, namespace: str | None = None) -> KubeObjects:
        return list(self._api.collections.get(self._collection, {}).values())


async def _converged() -> tuple[_MemoryApi, WebServerReconciler]:
    api = _MemoryApi()
    api.store(
        WEBSERVERS.path(namespace=NAMESPACE),
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"image": "nginx:1.27", "replicas": 1},
        },
    )
    recorder = EventRecorder(api, instance="bench")
    reconciler = WebServerReconciler(
        api=api,
        caches=Caches(
            webservers=_Reader(api, WEBSERVERS.path(namespace=NAMESPACE)),
            deployments=_Reader(api, DEPLOYMENTS.path(namespace=NAMESPACE)),
            services=_Reader(api, SERVICES.path(namespace=NAMESPACE)),
        ),
        recorder=recorder,
    )
    for _ in range(3):
        await reconciler.reconcile(KEY)
        await recorder.flush()
    return api, reconciler


async def _measure(reconciles: int, *, move_deployment: bool) -> float:
    """Microseconds of process CPU per reconcile of the converged WebServer."""
    api, reconciler = await _converged()
    deployments = DEPLOYMENTS.path(namespace=NAMESPACE)
    started = time.process_time()
    for _ in range(reconciles):
        if move_deployment:
            api.store(deployments, api.collections[deployments][NAME])  # a new resourceVersion, as a status write
        await reconciler.reconcile(KEY)
    return (time.process_time() - started) / reconciles * 1e6


def measure(*, reconciles: int, rounds: int, event_loop: str = "auto") -> dict[str, float]:
    """Median microseconds per reconcile over ``rounds`` for each case, the cases alternating within a round."""
    choice = choose_loop("asyncio" if event_loop == "asyncio" else "auto")
    samples: dict[str, list[float]] = {"same versions": [], "deployment moved": []}
    for _ in range(rounds):
        for case, values in samples.items():
            values.append(run(_measure(reconciles, move_deployment=case != "same versions"), choice))
    result = {case: round(statistics.median(values), 1) for case, values in samples.items()}
    say(f"reconcile of a converged WebServer ({choice.name}), us of CPU per reconcile: {result}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reconcile_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--reconciles", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--event-loop", choices=("auto", "asyncio"), default="auto")
    args = parser.parse_args(argv)
    measure(reconciles=args.reconciles, rounds=args.rounds, event_loop=args.event_loop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
