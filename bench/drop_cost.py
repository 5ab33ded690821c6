"""What a sharded replica spends on a watch event of another shard once its bytes have arrived.

Why: without the ``ShardedListAndWatch`` gate every replica receives every shard's events and drops the others'
(``runtime.sharding.filter``). The sharded benchmark (``bench.sharded``, ``--client-side-too``) measures the whole cost
of that: a replica of 4 spent about 235 microseconds more per dropped event than with the gate. This module splits that
number: it pushes the same events through the operator's own watch path in-process (``kube.stream.WatchStream`` cutting
and decoding lines, ``runtime.informers.informer.Informer`` applying them, with its shard filter), with no socket, TLS
or HTTP underneath, and reports process CPU per event for three cases: no filter, every event of a held shard (kept),
every event of another shard (dropped). What the operator's own code spends on a dropped event is therefore measured
here; the rest of the benchmark's figure is receiving it (kernel, TLS record, HTTP chunk, event-loop wake-up), which no
client-side filter can avoid.

Each event is delivered as its own chunk after an event-loop turn, as kube-apiserver flushes each watch event, on
the loop the operator runs on (uvloop where installed).

Called by ``python -m bench drop-cost``; hands back a small dict (and prints it). Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import statistics
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Unpack

from bench.progress import say
from webserver_operator.core.resources import DEPLOYMENTS
from webserver_operator.core.vocabulary import Decode, QueryValue, RequestOptions
from webserver_operator.kube import jsoncodec
from webserver_operator.kube.stream import WatchStream
from webserver_operator.manager.eventloop import choose_loop, run
from webserver_operator.runtime.informers.informer import Informer
from webserver_operator.runtime.sharding.filter import FallbackNotice, ShardFilter
from webserver_operator.runtime.sharding.ranges import ShardUnion, shard_index, shard_ranges

#: The namespace every sample event lives in.
NAMESPACE = "bench-ns-0042"
#: Shards of the benchmark's fleets (bench.sharded's default).
SHARDS = 8

#: A Deployment as kube-apiserver sends it in a bench fleet's watch: labels, owner reference, the operator's and
#: kube-controller-manager's managedFields, defaulted spec, status with two conditions (about 3 KB encoded).
_FIELDS_CONTAINER: dict[str, Any] = {
    'k:{"name":"web"}': {
        ".": {},
        "f:image": {},
        "f:name": {},
        "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}, "f:name": {}}},
    }
}
_CONDITION_FIELDS: dict[str, Any] = {
    ".": {},
    "f:lastTransitionTime": {},
    "f:lastUpdateTime": {},
    "f:message": {},
    "f:reason": {},
    "f:status": {},
    "f:type": {},
}
SAMPLE_DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "ws-00001",
        "namespace": NAMESPACE,
        "uid": "0f6c7e0e-8a1f-4a7b-9d1c-1234567890ab",
        "resourceVersion": "1",
        "generation": 2,
        "creationTimestamp": "2026-11-25T01:00:00Z",
        "labels": {
            "app.kubernetes.io/name": "webserver",
            "app.kubernetes.io/instance": "ws-00001",
            "app.kubernetes.io/managed-by": "webserver-operator",
        },
        "annotations": {"deployment.kubernetes.io/revision": "1"},
        "ownerReferences": [
            {
                "apiVersion": "web.example.com/v1",
                "kind": "WebServer",
                "name": "ws-00001",
                "uid": "5b1e7a52-0d0e-4c39-a0a4-6f3f9f1e2d11",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "managedFields": [
            {
                "manager": "webserver-operator",
                "operation": "Update",
                "apiVersion": "apps/v1",
                "time": "2026-11-25T01:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/instance": {}}, "f:ownerReferences": {}},
                    "f:spec": {
                        "f:replicas": {},
                        "f:selector": {},
                        "f:template": {"f:metadata": {"f:labels": {}}, "f:spec": {"f:containers": _FIELDS_CONTAINER}},
                    },
                },
            },
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "apps/v1",
                "time": "2026-11-25T01:00:01Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}}},
                    "f:status": {
                        "f:conditions": {
                            ".": {},
                            'k:{"type":"Available"}': _CONDITION_FIELDS,
                            'k:{"type":"Progressing"}': _CONDITION_FIELDS,
                        },
                        "f:observedGeneration": {},
                    },
                },
                "subresource": "status",
            },
        ],
    },
    "spec": {
        "replicas": 0,
        "selector": {"matchLabels": {"app.kubernetes.io/instance": "ws-00001"}},
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/instance": "ws-00001"}},
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": "nginx:1.27",
                        "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                        "resources": {},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "imagePullPolicy": "IfNotPresent",
                    }
                ],
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "securityContext": {},
                "schedulerName": "default-scheduler",
            },
        },
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600,
    },
    "status": {
        "observedGeneration": 2,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "lastUpdateTime": "2026-11-25T01:00:01Z",
                "lastTransitionTime": "2026-11-25T01:00:01Z",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.",
            },
            {
                "type": "Progressing",
                "status": "True",
                "lastUpdateTime": "2026-11-25T01:00:01Z",
                "lastTransitionTime": "2026-11-25T01:00:00Z",
                "reason": "NewReplicaSetAvailable",
                "message": 'ReplicaSet "ws-00001-5d8f7c9b4" has successfully progressed.',
            },
        ],
    },
}


def event_lines(count: int) -> list[bytes]:
    """``count`` ADDED events of distinct Deployments in ``NAMESPACE``, each a newline-terminated line."""
    lines = []
    for i in range(count):
        obj = copy.deepcopy(SAMPLE_DEPLOYMENT)
        obj["metadata"]["name"] = f"ws-{i:05d}"
        obj["metadata"]["resourceVersion"] = str(1000 + i)
        lines.append(jsoncodec.encode({"type": "ADDED", "object": obj}) + b"\n")
    return lines


class _ReplayApi:
    """A ``WatchApi`` whose one watch replays ``lines``, one per chunk, each after an event-loop turn."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict[str, Any]:
        raise AssertionError(f"the replay serves one watch, not {method} {path}")

    @contextlib.asynccontextmanager
    async def watch(
        self, path: str, *, query: Mapping[str, QueryValue], decode: Decode | None = None
    ) -> AsyncIterator[WatchStream]:
        chunks: Iterator[bytes] = iter(self._lines)

        async def read_chunk() -> bytes:
            await asyncio.sleep(0)
            return next(chunks, b"")

        yield WatchStream(
            read_chunk=read_chunk, method="GET", path=path, host="replay", decode=decode or jsoncodec.decode
        )


def scope_for(case: str) -> ShardUnion | None:
    """The shards an informer keeps in ``case``: none (no filter), the events' shard, or another one."""
    if case == "no filter":
        return None
    own = shard_index(NAMESPACE, SHARDS)
    index = own if case == "kept" else (own + 1) % SHARDS
    return ShardUnion.of(shard_ranges(SHARDS)[index])


async def _one_watch(lines: list[bytes], scope: ShardUnion | None) -> tuple[float, int]:
    notice = FallbackNotice()
    notice.given = True  # the warning for a server without the gate is not news here
    informer = Informer(_ReplayApi(lines), DEPLOYMENTS, scope=ShardFilter.factory(scope, notice=notice), name="bench")
    started = time.process_time()
    received = await informer._watch_once(stall_timeout=600)  # the watch path alone, no list
    spent = time.process_time() - started
    if received != len(lines):
        raise RuntimeError(f"the replayed watch delivered {received} of {len(lines)} events")
    return spent, len(informer.store)


def measure(events: int, rounds: int) -> dict[str, dict[str, float]]:
    """Median process CPU per event (microseconds) and objects cached, for each case."""
    lines = event_lines(events)
    loop = choose_loop("auto")  # the operator's own loop: uvloop where installed
    results: dict[str, dict[str, float]] = {}
    for case in ("no filter", "kept", "dropped"):
        samples = []
        cached = 0
        for _ in range(rounds):
            spent, cached = run(_one_watch(lines, scope_for(case)), loop)
            samples.append(spent / events * 1e6)
        results[case] = {"us_per_event": round(statistics.median(samples), 1), "cached": cached}
    decode = []
    for _ in range(rounds):
        started = time.process_time()
        for line in lines:
            jsoncodec.decode(line)
        decode.append((time.process_time() - started) / events * 1e6)
    results["decode only"] = {"us_per_event": round(statistics.median(decode), 1), "cached": 0}
    return results


def cmd_drop_cost(args: argparse.Namespace) -> int:
    results = measure(args.events, args.rounds)
    size = len(event_lines(1)[0])
    say(f"{args.events} watch events of {size} bytes, median of {args.rounds} rounds, process CPU per event:")
    for case, row in results.items():
        say(f"  {case:<10} {row['us_per_event']:>7.1f} us   objects cached: {row['cached']:.0f}")
    return 0


def add_parser(sub: Any) -> None:
    """Register ``drop-cost`` on ``python -m bench``'s subcommands."""
    cmd = sub.add_parser("drop-cost", help="CPU per watch event a sharded replica keeps or drops, in-process")
    cmd.add_argument("--events", type=int, default=20000)
    cmd.add_argument("--rounds", type=int, default=5)
    cmd.set_defaults(func=cmd_drop_cost)
