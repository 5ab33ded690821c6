"""The raw limit: the same children created (and re-imaged) directly, with no operator, at a given concurrency.

Why: it is the floor for "all children exist" on this machine and this API server. The WebServers are created first
(untimed), then bench/peers/go's ``raw`` command sends the 2N creates (Deployment and Service, with the same labels
and owner references an operator would set) with ``c`` requests in flight, from a compiled client so the client
is not the bottleneck. The same tracker times it as it times the operators: from the first request to the last
child seen on the watch, and until every Deployment is available (the floor for Ready). Then every Deployment gets
the new image directly, the floor for the image fan-out.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from typing import Any

from bench import checks
from bench.progress import reporting, say
from bench.scenarios import CREATE_CONCURRENCY, Context
from bench.systems import raw_command
from bench.tracker import wait_all
from bench.workload import IMAGE_V2, NAMESPACE, create_webservers

Result = dict[str, Any]


async def _driver(ctx: Context, *args: str) -> Result:
    cmd = raw_command(ctx.cluster.kubeconfig, *args, f"--namespace={NAMESPACE}")
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = await proc.communicate()
    finally:
        if proc.returncode is None:  # cancelled: do not leave the driver running
            proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err.decode()[-2000:]} {out.decode()[-500:]}")
    result: Result = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def raw_run(ctx: Context, concurrency: int) -> Result:
    cfg, tracker = ctx.config, ctx.tracker
    names = cfg.names
    say(f"{ctx.label}: creating {cfg.n} WebServers (untimed, no operator)")
    seen = tracker.milestone(lambda s, n: s.get("ws", n) is not None, names)
    await create_webservers(ctx.api, names, replicas=cfg.replicas, concurrency=CREATE_CONCURRENCY)
    await wait_all([seen], seconds=cfg.timeout())

    say(f"{ctx.label}: {2 * cfg.n} child creates, {concurrency} in flight")
    children = tracker.milestone(checks.children_exist, names)
    available = tracker.milestone(checks.available, names)
    async with reporting(f"{ctx.label} raw create", {"children": children, "available": available}, cfg.n):
        driver = await _driver(ctx, "create", f"-c={concurrency}")
        ok = await wait_all([children, available], seconds=cfg.timeout())
    t0 = driver["start"]
    create: Result = {
        "concurrency": concurrency,
        "requests": driver["requests"],
        "requests_s": round(driver["end"] - t0, 3),
        "children_all_s": round(max(children.reached.values()) - t0, 3) if not children.pending else None,
        "available_all_s": round(max(available.reached.values()) - t0, 3) if not available.pending else None,
    }
    if not ok:
        create["error"] = f"not converged within {cfg.timeout():.0f} s"

    say(f"{ctx.label}: new image on {cfg.n} Deployments, {concurrency} in flight")
    updated = tracker.milestone(checks.image_is(IMAGE_V2), names)
    available2 = tracker.milestone(checks.available_with_image(IMAGE_V2), names)
    async with reporting(f"{ctx.label} raw image", {"updated": updated, "available": available2}, cfg.n):
        started = time.time()
        driver = await _driver(ctx, "image", f"-c={concurrency}", f"--image={IMAGE_V2}")
        ok = await wait_all([updated, available2], seconds=cfg.timeout())
    t0 = driver.get("start", started)
    image: Result = {
        "requests_s": round(driver["end"] - t0, 3),
        "deployments_updated_s": round(max(updated.reached.values()) - t0, 3) if not updated.pending else None,
        "available_all_s": round(max(available2.reached.values()) - t0, 3) if not available2.pending else None,
    }
    if not ok:
        image["error"] = f"not converged within {cfg.timeout():.0f} s"
    return {"bulk_create": create, "image": image}
