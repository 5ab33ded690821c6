"""tests/support/watch.py: every event kubectl prints is read, however its pretty-printed JSON is cut into lines."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.cluster import Cluster
from tests.support.watch import Watch

pytestmark = pytest.mark.timeout(30)

# What `kubectl get --watch --output-watch-events -o json` prints: one indented document per event, back to back, the
# second one arriving while the first is still being read. Then kubectl waits for more until it is terminated.
FAKE_KUBECTL = f"""\
#!{sys.executable}
import json, sys, time
events = [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "b")]
for kind, name in events:
    text = json.dumps({{"type": kind, "object": {{"metadata": {{"name": name}}}}}}, indent=4)
    half = len(text) // 2
    sys.stdout.write(text[:half]); sys.stdout.flush(); time.sleep(0.05)
    sys.stdout.write(text[half:] + "\\n"); sys.stdout.flush()
time.sleep(60)
"""


def test_each_printed_event_arrives_whole_and_in_order(tmp_path: Path) -> None:
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(textwrap.dedent(FAKE_KUBECTL))
    kubectl.chmod(0o755)
    cluster = Cluster(backend="local", kubeconfig=tmp_path / "kubeconfig", bin_dir=tmp_path)
    with Watch(cluster, "pods", namespace="ns") as watch:
        for _ in range(200):
            if len(watch.events()) == 3:
                break
            time.sleep(0.05)
        events = watch.events()
    seen = [(e.type, e.object["metadata"]["name"]) for e in events]
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "b")]
    assert events[0].arrived <= events[1].arrived <= events[2].arrived
