"""Benchmark: time from deleting a WebServer's child to the operator having recreated it.

Run with the local cluster up (`make cluster-up`) and the CRD installed; the harness starts its own operator:

    .venv/bin/python -m bench.child_recreation --trials 25

For each trial it deletes the Deployment (or Service) and watches, from this process, for (a) the DELETED event
and (b) the ADDED event of the replacement. Reported per kind: the median and p90 of delete->recreated, and, as the
baseline measured in the same run, the median of delete->DELETED-event-seen (the floor set by the API server and
watch delivery, which no controller can beat). Absolute times on shared machines are noisy: compare the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.operator import OperatorProcess
from harness.paths import HACK
from webserver_operator.api.models import WEBSERVERS
from webserver_operator.core.resources import DEPLOYMENTS, SERVICES, Resource
from webserver_operator.core.settings import ClientSettings
from webserver_operator.kube.client import KubeClient
from webserver_operator.kube.config import load_configuration


def _kubeconfig() -> Path:
    out = subprocess.run([str(HACK / "cluster.sh"), "kubeconfig"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


async def _trial(kube: KubeClient, resource: Resource, *, namespace: str, name: str) -> tuple[float, float]:
    current = await kube.request("GET", resource.path(namespace=namespace, name=name))
    old_uid = current["metadata"]["uid"]
    query: dict[str, str | int | bool] = {
        "fieldSelector": f"metadata.name={name}",
        "resourceVersion": current["metadata"]["resourceVersion"],
        "timeoutSeconds": 60,
        "allowWatchBookmarks": False,
    }
    deleted_at = recreated_at = 0.0
    async with kube.watch(resource.path(namespace=namespace), query=query) as events:
        start = time.perf_counter()
        await kube.request("DELETE", resource.path(namespace=namespace, name=name))
        async for event in events:
            meta = event["object"].get("metadata", {})
            if event["type"] == "DELETED" and meta.get("uid") == old_uid and not deleted_at:
                deleted_at = time.perf_counter() - start
            if event["type"] == "ADDED" and meta.get("uid") != old_uid:
                recreated_at = time.perf_counter() - start
                break
    return deleted_at, recreated_at


async def _run(trials: int, namespace: str) -> dict[str, Any]:
    cfg = await load_configuration(kubeconfig=str(_kubeconfig()), context=None)
    kube = await KubeClient.create(cfg, settings=ClientSettings())
    results: dict[str, Any] = {}
    try:
        await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        body = {
            "apiVersion": WEBSERVERS.api_version,
            "kind": "WebServer",
            "metadata": {"name": "bench"},
            "spec": {"image": "nginx:1.27", "replicas": 1},
        }
        await kube.request("POST", WEBSERVERS.path(namespace=namespace), body=body)
        for _ in range(200):
            try:
                await kube.request("GET", DEPLOYMENTS.path(namespace=namespace, name="bench"))
                await kube.request("GET", SERVICES.path(namespace=namespace, name="bench"))
                break
            except Exception:
                await asyncio.sleep(0.1)
        for resource in (DEPLOYMENTS, SERVICES):
            seen, recreated = [], []
            for _ in range(trials):
                d, r = await _trial(kube, resource, namespace=namespace, name="bench")
                seen.append(d)
                recreated.append(r)
                await asyncio.sleep(0.2)
            med = statistics.median(recreated)
            base = statistics.median(seen)
            results[resource.kind] = {
                "trials": trials,
                "recreated_median_s": round(med, 4),
                "recreated_p90_s": round(statistics.quantiles(recreated, n=10)[-1], 4),
                "baseline_delete_event_median_s": round(base, 4),
                "ratio_to_baseline": round(med / base, 2) if base else None,
            }
    finally:
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}")
        await kube.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=25)
    parser.add_argument("--namespace", default=f"bench-{int(time.time())}")
    args = parser.parse_args()
    operator = OperatorProcess(kubeconfig=_kubeconfig(), args=[f"--namespaces={args.namespace}", "--log-level=INFO"])
    try:
        operator.wait_started()
        results = asyncio.run(_run(args.trials, args.namespace))
    finally:
        operator.stop()
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
