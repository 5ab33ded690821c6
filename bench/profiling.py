"""Where this operator's time and memory go during a bulk create: py-spy samples and tracemalloc snapshots.

Two runs, each on a fresh cluster, with the same workload as the benchmark's bulk create:
1. CPU: the operator runs as users run it; ``py-spy record --pid`` samples it (100 Hz, non-blocking, so the
   process is not paused) from the first WebServer create until all N are Ready. The collapsed stacks are kept and
   reduced to the functions with the most samples on CPU, by own time and including callees, and by package.
2. Memory: the operator runs under tracemalloc (bench/tracemalloc_operator.py); a snapshot is taken idle (one
   WebServer) and again with N converged; the report lists the top allocation sites alive at N, the growth from
   idle to N per line and per package, and the first frame in webserver_operator that led to each allocation.

tracemalloc slows the process, so run 2 measures memory only. Outputs go to bench/results/profile/, named
``profile-n<N>-<date>-<commit>.json``/``.md`` and ``pyspy-bulk-n<N>-<date>-<commit>.txt.gz`` (``profile_stem``), so
a profile after a change sits next to the one before it instead of replacing it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import linecache
import os
import re
import signal
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

from bench.cluster import BenchCluster, nodes_for
from bench.procstat import rss_mb
from bench.progress import say
from bench.scenarios import Config, Context, bulk_create, open_context, start_operator
from bench.systems import OperatorSpec, operator_spec
from bench.workload import NAMESPACE, PROBE, path, webserver
from harness.paths import ROOT

Result = dict[str, Any]
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^():]+)(?::(?P<line>\d+))?\)$")


def _package(filename: str) -> str:
    """``webserver_operator/controller``, ``kubernetes_asyncio``, ``json (stdlib)`` ... for grouping frames."""
    name = filename.replace("\\", "/")
    if "site-packages/" in name:
        parts = name.split("site-packages/", 1)[1].split("/")
        return parts[0]
    if "webserver_operator/" in name:
        parts = name.split("webserver_operator/", 1)[1].split("/")
        return "webserver_operator" + ("/" + parts[0] if len(parts) > 1 else "")
    stem = Path(name).parts
    if "python3" in name or name.startswith("<"):
        lib = [p for p in stem if not p.startswith("python3") and p not in ("usr", "lib", "local", "/")]
        return (lib[0] if lib else name).removesuffix(".py") + " (stdlib)"
    return name


def _short_file(file: str) -> str:
    """A path relative to site-packages, the stdlib or the repository."""
    for marker in ("site-packages/", "webserver_operator/", "lib/python3.11/"):
        if marker in file:
            return (marker if marker == "webserver_operator/" else "") + file.split(marker, 1)[1]
    return file


def _short(frame: str) -> str:
    match = _FRAME.match(frame)
    if not match:
        return frame
    return f"{match['func']} ({_short_file(match['file'])})"


def analyse_collapsed(text: str, top: int = 25) -> Result:
    """Own and inclusive samples per function, and own samples per package, from py-spy's raw (collapsed) output."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += count
        leaf = frames[-1]
        own[_short(leaf)] += count
        match = _FRAME.match(leaf)
        packages[_package(match["file"]) if match else leaf] += count
        for frame in {_short(f) for f in frames}:
            inclusive[frame] += count

    def pct(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(100 * c / total, 1)) for name, c in counter.most_common(top)] if total else []

    return {"samples": total, "own_pct": pct(own), "inclusive_pct": pct(inclusive), "package_own_pct": pct(packages)}


def _first_own_frame(trace: tracemalloc.Traceback) -> str:
    for frame in reversed(trace):  # oldest call last in tracemalloc's order: newest first
        if "webserver_operator" in frame.filename:
            return f"{frame.filename.split('webserver_operator/', 1)[-1]}:{frame.lineno}"
    return "(outside webserver_operator)"


def analyse_snapshots(idle: tracemalloc.Snapshot, full: tracemalloc.Snapshot, top: int = 20) -> Result:
    """Top allocation sites at N, growth from idle to N by line and package, and our code that led to it."""
    exclude = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<unknown>")]
    idle, full = idle.filter_traces(exclude), full.filter_traces(exclude)

    def site(stat: tracemalloc.StatisticDiff | tracemalloc.Statistic) -> str:
        frame = stat.traceback[0]
        code = linecache.getline(frame.filename, frame.lineno).strip()
        return f"{_short_file(frame.filename)}:{frame.lineno} {code[:70]}"

    at_n = full.statistics("lineno")
    growth = full.compare_to(idle, "lineno")
    by_package: Counter[str] = Counter()
    grow_package: Counter[str] = Counter()
    for stat in at_n:
        by_package[_package(stat.traceback[0].filename)] += stat.size
    for diff in growth:
        grow_package[_package(diff.traceback[0].filename)] += diff.size_diff
    ours: Counter[str] = Counter()
    for change in full.compare_to(idle, "traceback"):
        if change.size_diff > 0:
            ours[_first_own_frame(change.traceback)] += change.size_diff
    mb = 1e6
    return {
        "traced_idle_mb": round(sum(s.size for s in idle.statistics("filename")) / mb, 1),
        "traced_at_n_mb": round(sum(s.size for s in at_n) / mb, 1),
        "top_sites_at_n": [(site(s), round(s.size / mb, 2), s.count) for s in at_n[:top]],
        "top_growth": [(site(d), round(d.size_diff / mb, 2), d.count_diff) for d in growth[:top]],
        "packages_at_n_mb": [(k, round(v / mb, 2)) for k, v in by_package.most_common(top)],
        "packages_growth_mb": [(k, round(v / mb, 2)) for k, v in grow_package.most_common(top)],
        "growth_by_our_frame_mb": [(k, round(v / mb, 2)) for k, v in ours.most_common(top)],
    }


async def _with_cluster(n: int, label: str, body: Any) -> Result:
    cluster = BenchCluster(nodes=nodes_for(n, 1))
    say(f"{label}: fresh cluster with {cluster.nodes} kwok node(s)")
    cluster.up(NAMESPACE)
    try:
        log_dir = ROOT / "bench" / "results" / "profile"
        async with open_context(cluster, Config(n=n, replicas=1), label=label, log_dir=log_dir) as ctx:
            await ctx.api.request("POST", path("ws"), body=webserver(PROBE, replicas=1))
            result: Result = await body(ctx)
            return result
    finally:
        cluster.down()


def profile_stem(n: int, tag: str) -> str:
    """``n1000-2026-11-24-abc1234``: the part of every output name that says which size, day and code it profiled."""
    return f"n{n}-{tag}" if tag else f"n{n}"


def default_tag() -> str:
    """Today's date and the checkout's short commit (only the date outside a git checkout)."""
    day = time.strftime("%Y-%m-%d")
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return day
    return f"{day}-{commit}" if commit else day


async def cpu_profile(n: int, out_dir: Path, stem: str) -> Result:
    collapsed = out_dir / f"pyspy-bulk-{stem}.txt"

    async def body(ctx: Context) -> Result:
        spec = operator_spec("ours", ctx.cluster.kubeconfig)
        proc, start = await start_operator(ctx, spec, log_name=f"profile-cpu-n{n}.log")
        try:
            spy = await asyncio.create_subprocess_exec(
                str(Path(sys.executable).parent / "py-spy"),
                *("record", "--pid", str(proc.pid), "--rate", "100", "--nonblocking"),
                *("--format", "raw", "--output", str(collapsed)),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            await asyncio.sleep(1)
            bulk = await bulk_create(ctx, proc, spec)
            spy.send_signal(signal.SIGINT)
            _, err = await asyncio.wait_for(spy.communicate(), 60)
            if not collapsed.exists():
                raise RuntimeError(f"py-spy wrote no profile: {err.decode()[-2000:]}")
        finally:
            proc.stop()
        text = collapsed.read_text()
        with gzip.open(str(collapsed) + ".gz", "wt") as fh:
            fh.write(text)
        collapsed.unlink()
        return {"start": start, "bulk_create": bulk, "profile": analyse_collapsed(text)}

    return await _with_cluster(n, f"profile CPU N={n}", body)


async def memory_profile(n: int, out_dir: Path) -> Result:
    snap_dir = out_dir / "tracemalloc"
    snap_dir.mkdir(parents=True, exist_ok=True)
    for old in snap_dir.glob("snapshot-*.pickle"):
        old.unlink()

    async def snapshot(pid: int, k: int) -> tracemalloc.Snapshot:
        os.kill(pid, signal.SIGUSR1)
        target = snap_dir / f"snapshot-{k}.pickle"
        deadline = time.time() + 120
        while not target.exists():
            if time.time() > deadline:
                raise RuntimeError(f"no tracemalloc snapshot {target} within 120 s")
            await asyncio.sleep(0.5)
        return tracemalloc.Snapshot.load(str(target))

    async def body(ctx: Context) -> Result:
        base = operator_spec("ours", ctx.cluster.kubeconfig)
        spec = OperatorSpec(
            "ours-tracemalloc",
            (sys.executable, "-X", "tracemalloc=10", "-m", "bench.tracemalloc_operator", *base.argv[3:]),
            base.user_agents,
        )
        os.environ["BENCH_TRACEMALLOC_DIR"] = str(snap_dir)
        proc, start = await start_operator(ctx, spec, log_name=f"profile-memory-n{n}.log")
        try:
            idle = await snapshot(proc.pid, 1)
            rss_idle = rss_mb(proc.pid)
            bulk = await bulk_create(ctx, proc, spec)
            await asyncio.sleep(5)
            full = await snapshot(proc.pid, 2)
            rss_full = rss_mb(proc.pid)
        finally:
            proc.stop()
        return {
            "start": start,
            "bulk_create": {k: bulk.get(k) for k in ("children_all_s", "ready_all_s", "cpu_s", "error")},
            "rss_idle_mb_traced": round(rss_idle, 1),
            "rss_at_n_mb_traced": round(rss_full, 1),
            "memory": analyse_snapshots(idle, full),
        }

    return await _with_cluster(n, f"profile memory N={n}", body)


def _markdown(n: int, cpu: Result, mem: Result) -> str:
    prof, memory = cpu["profile"], mem["memory"]
    lines = [f"# Profile of webserver-operator, bulk create of {n} WebServers", ""]
    bulk = cpu["bulk_create"]
    lines += [
        f"CPU run: all children in {bulk.get('children_all_s')} s, all Ready in {bulk.get('ready_all_s')} s, "
        f"{bulk.get('cpu_s')} CPU s ({bulk.get('cpu_per_ws_ms')} ms per WebServer), {prof['samples']} py-spy samples "
        "on CPU (100 Hz, non-blocking).",
        "",
        f"Operator CPU by the kernel's accounting (/proc/<pid>/stat) over the same bulk create: user "
        f"{bulk.get('cpu_user_s')} s, system {bulk.get('cpu_system_s')} s. py-spy counts a thread waiting in "
        "`epoll_wait` as on CPU; the system time bounds what that wait really cost.",
        "",
        "## Own time by function (% of samples on CPU)",
        "",
        *[f"- {pct}% {name}" for name, pct in prof["own_pct"]],
        "",
        "## Including callees",
        "",
        *[f"- {pct}% {name}" for name, pct in prof["inclusive_pct"]],
        "",
        "## Own time by package",
        "",
        *[f"- {pct}% {name}" for name, pct in prof["package_own_pct"]],
        "",
        f"## Memory (tracemalloc, 10 frames): traced {memory['traced_idle_mb']} MB idle -> "
        f"{memory['traced_at_n_mb']} MB at {n}; RSS under tracemalloc {mem['rss_idle_mb_traced']} -> "
        f"{mem['rss_at_n_mb_traced']} MB",
        "",
        "### Growth from idle to N, by package (MB)",
        "",
        *[f"- {mb} {name}" for name, mb in memory["packages_growth_mb"]],
        "",
        "### Growth from idle to N, by the first frame in webserver_operator (MB)",
        "",
        *[f"- {mb} {name}" for name, mb in memory["growth_by_our_frame_mb"]],
        "",
        "### Top growth by line (MB, blocks)",
        "",
        *[f"- {mb} MB, {count} blocks: `{name}`" for name, mb, count in memory["top_growth"]],
        "",
        "### Top allocation sites alive at N (MB, blocks)",
        "",
        *[f"- {mb} MB, {count} blocks: `{name}`" for name, mb, count in memory["top_sites_at_n"]],
        "",
        "### Alive at N by package (MB)",
        "",
        *[f"- {mb} {name}" for name, mb in memory["packages_at_n_mb"]],
    ]
    return "\n".join(lines) + "\n"


def profile(*, n: int, out_dir: Path, tag: str | None = None) -> int:
    """Both runs, then ``profile-<stem>.json`` and ``.md`` in ``out_dir`` (stem: ``profile_stem``, tag by default
    ``default_tag()``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = profile_stem(n, default_tag() if tag is None else tag)
    cpu = asyncio.run(cpu_profile(n, out_dir, stem))
    mem = asyncio.run(memory_profile(n, out_dir))
    (out_dir / f"profile-{stem}.json").write_text(json.dumps({"cpu": cpu, "memory": mem}, indent=1) + "\n")
    (out_dir / f"profile-{stem}.md").write_text(_markdown(n, cpu, mem))
    say(f"wrote {out_dir / f'profile-{stem}.md'}")
    return 0
