"""Every change to some objects, each with the time it arrived: ``kubectl get --watch`` read in a thread.

Why a watch and not a loop of ``kubectl get``: a loop sees only the states that last longer than its period plus the
time each ``get`` takes, and on a busy machine that is seconds. A pod started without a preStop pause is terminating
for a fraction of a second, so a polling test can miss it altogether (the paced-upgrade test did: it saw one of two
pods stop). A watch is sent every change, so nothing is missed; both the pods and the Service the test compares them
with are watched the same way, so their arrival times carry the same delay.

Used by tests/e2e/test_helm_upgrade.py. ``Watch(cluster, "pods", "-l", ..., namespace=...)`` starts at once (the
first events are the objects that exist); ``events()`` is what arrived so far; ``stop()`` ends the kubectl process.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

from tests.support.cluster import Cluster


@dataclass(frozen=True)
class Event:
    """One watch event: when it arrived (unix seconds), ``ADDED``/``MODIFIED``/``DELETED``, and the object."""

    arrived: float
    type: str
    object: dict[str, Any]


class Watch:
    """A ``kubectl get <args> --watch --output-watch-events -o json`` process and the events it printed."""

    def __init__(self, cluster: Cluster, *args: str, namespace: str) -> None:
        command = [
            *cluster.kubectl_args(),
            "get",
            *args,
            "-n",
            namespace,
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
        ]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        """Split kubectl's stream of JSON documents (one per event, pretty-printed) as they arrive."""
        assert self._process.stdout is not None
        decoder = json.JSONDecoder()
        buffered = ""
        for line in self._process.stdout:
            buffered = (buffered + line).lstrip()
            while buffered:
                try:
                    document, end = decoder.raw_decode(buffered)
                except json.JSONDecodeError:
                    break  # the document is not complete yet
                buffered = buffered[end:].lstrip()
                event = Event(time.time(), str(document.get("type")), document.get("object") or {})
                with self._lock:
                    self._events.append(event)

    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def stop(self) -> None:
        """End kubectl and wait for the reader; raise if kubectl failed before it was told to stop."""
        failed = self._process.poll()
        self._process.terminate()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=30)
        assert self._process.stdout is not None and self._process.stderr is not None
        err = self._process.stderr.read()
        self._process.stdout.close()
        self._process.stderr.close()
        if failed not in (None, 0):
            raise AssertionError(f"kubectl --watch ended by itself ({failed}): {err.strip()[-500:]}")

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
