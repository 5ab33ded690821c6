"""The Markdown report (docs/reliability.md): a summary table, then one table per fault, then the run's verdicts.

Why generated: every figure must come from a run, with the command that produced it, and a hand-copied number goes
stale. Text written by people below the ``<!-- analysis -->`` marker of an existing report is kept when the report is
regenerated, so the explanation of what fails and why survives new runs.

Called by ``chaos.__main__`` (and by the short test for its failure message).
"""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path

from chaos.harness import RunConfig
from chaos.scenario import Measured, Result
from chaos.verdicts import BASELINE_FACTOR, CATCH_UP_REQUESTS_PER_WEBSERVER, Window

MARKER = "<!-- analysis -->"
ABORTED = "**ABORTED** (harness)"


def _ok(passed: bool) -> str:
    return "PASS" if passed else "**FAIL**"


def _secs(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _verdict(m: Measured) -> str:
    return ABORTED if m.window.aborted else _ok(all(r.passed for r in m.rules))


def _overall(result: Result) -> str:
    return ABORTED if result.aborted is not None else _ok(result.passed)


def _after_heal(value: float | None, w: Window) -> str:
    if w.aborted:
        return "not measured (aborted)"
    return f"not within the {w.cap:.0f}s limit" if value is None else f"{value:.1f}s after the heal"


def _summary_row(m: Measured) -> str:
    w, f = m.window, m.figures
    verdict = _verdict(m)
    duration = f"{w.healed - w.start:.0f}" if w.healed else f"{w.end - w.start:.0f} (aborted)"
    return (
        f"| [{w.name}](#{w.name}) | {duration} | {_secs(w.canary)} | {_secs(w.backlog)} | "
        f"{f.rps_mean:.1f} / {f.rps_peak} / {f.rps_peak_other} | {f.other} ({f.other_budget:.0f}) | {f.lists} | "
        f"{f.status_429} | {f.status_5xx} | "
        f"{len(f.deposed_writes)} | {len(f.liveness)} | {len(f.tracebacks)} | {len(f.leader_changes)} | {verdict} |"
    )


def _harness_failure(result: Result) -> list[str]:
    failure = result.aborted
    if failure is None:
        return []
    ran = [m.window.name for m in result.faults]
    judged = [m.window.name for m in result.faults if not m.window.aborted]
    not_run = result.config.faults[len(ran) :]
    return [
        "## Harness failure",
        "",
        f"The run stopped: {failure.describe()}.",
        "",
        "This is a failure of the chaos harness, not a verdict on the operator. "
        + (f"Measured and judged as usual (below): {', '.join(judged)}. " if judged else "No fault ran to its end. ")
        + ("The aborted fault is marked ABORTED and not judged. " if len(judged) < len(ran) else "")
        + (f"Not run: {', '.join(not_run)}. " if not_run else "")
        + "Fix the harness (the traceback file names the line) and run the same command again.",
        "",
    ]


def _fault_section(m: Measured, baseline: Measured | None, *, sharded: bool = False) -> list[str]:
    w, f = m.window, m.figures
    deposed = "writes accepted for a shard without a current grant" if sharded else "writes accepted from a deposed"
    deposed += "" if sharded else " leader"
    changes = "shard handovers" if sharded else "leader changes"
    rows = [
        ("fault duration (injection to heal)", f"{w.healed - w.start:.1f}s" if w.healed else "not healed (aborted)"),
        ("recovery: canary change applied and observed", _after_heal(w.canary, w)),
        ("recovery: every generation at heal time observed (backlog)", _after_heal(w.backlog, w)),
        ("operator requests in the window (injection to recovery)", str(f.requests)),
        (
            "requests/s: mean / busiest second / busiest second without LIST+WATCH",
            f"{f.rps_mean:.1f} / {f.rps_peak} / {f.rps_peak_other}",
        ),
        ("requests without LIST+WATCH (budget)", f"{f.other} ({f.other_budget:.0f})"),
        ("LIST requests (limit)", f"{f.lists} ({f.list_allowance})"),
        ("429 answers / 5xx answers", f"{f.status_429} / {f.status_5xx}"),
        ("writes accepted from the operators (excluding Leases)", str(f.writes_accepted)),
        (f"{deposed} / rejected attempts", f"{len(f.deposed_writes)} / {len(f.deposed_attempts)}"),
        ("failed /healthz answers", str(len(f.liveness))),
        ("tracebacks on stderr", str(len(f.tracebacks))),
        (changes, ", ".join(f.leader_changes) or "none"),
        ("replica exits", "; ".join(f"{i.slot}: {i.detail} at {i.time - w.start:+.1f}s" for i in f.exits) or "none"),
    ]
    rows += list(w.extra.items())
    lines = [f"### {w.name}", "", f"{w.title}.", ""]
    if w.aborted:
        step = w.steps[-1][1] if w.steps else "(none announced)"
        lines += [f"**Aborted by a harness failure** in the step '{step}' (see Harness failure above): not judged.", ""]
    lines += [f"- {note}" for note in w.notes]
    lines += ["", "| figure | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    if m.rules:
        lines += ["", "| verdict | result | detail |", "| --- | --- | --- |"]
        lines += [f"| {r.name} | {_ok(r.passed)} | {r.detail} |" for r in m.rules]
    for title, items in (
        ("Writes without a current grant" if sharded else "Writes from a deposed leader", f.deposed_writes),
        ("Failed liveness answers", [f"{i.slot} at {i.time - w.start:+.1f}s: {i.detail}" for i in f.liveness]),
        ("Tracebacks", [f"{i.slot} at {i.time - w.start:+.1f}s: {i.detail}" for i in f.tracebacks]),
    ):
        if items:
            lines += ["", f"{title} (first 10):", ""] + [f"- `{item}`" for item in items[:10]]
    lines.append("")
    return lines


def _unsharded_text(cfg: RunConfig) -> list[str]:
    return [
        "## What the run does",
        "",
        f"- {cfg.webservers} WebServers in {cfg.namespaces} namespaces on the local control plane (hack/cluster.sh: "
        "etcd, kube-apiserver, kube-controller-manager, kube-scheduler as local processes, kwok nodes), under "
        f"continuous churn at {cfg.rate:g} operations/s: spec scale, `kubectl scale` (scale subresource), image and "
        "port changes, annotations, deletes and re-creates, and drift of the children (Deployment replicas and "
        "image, Service selector, deleted children).",
        "- Two operator replicas with leader election (lease "
        f"{cfg.lease_duration:g}s, renew deadline {cfg.renew_deadline:g}s, retry {cfg.retry_period:g}s, watch "
        f"timeout {cfg.watch_timeout}s, stall timeout {cfg.watch_stall_timeout:g}s), "
        + ("in the in-cluster configuration (token file, KUBERNETES_SERVICE_HOST/PORT), " if cfg.in_cluster else "")
        + ("watching all namespaces" if cfg.watch_all else "watching the run's namespaces")
        + ", each as its own ServiceAccount behind its own toxiproxy. A replica that exits is restarted after 1s. "
        "A proxy fault heals by recreating the proxy: the faulted connections are dropped and the replica reconnects.",
        "- Three foreign objects (a Deployment and a Service that only share a WebServer's name, and a Deployment "
        "with the operator's labels controlled by a ConfigMap) with their namesake WebServers.",
        "- Verdicts come from the API server's audit log (every request of the replicas' ServiceAccounts, see "
        "hack/audit-policy.yaml) and from the objects, never from the operator's logs or metrics; stderr is only "
        "scanned for tracebacks, and /healthz is polled every second.",
        "",
        "## Rules",
        "",
        "- **recovered**: the canary change made right after the heal is applied and observed, and every "
        "WebServer's generation at heal time is observed in its status, each within the window's limit.",
        f"- **no retry storm**: requests other than LIST/WATCH stay within {BASELINE_FACTOR:g}x what the no-fault "
        f"baseline sent in as long plus {CATCH_UP_REQUESTS_PER_WEBSERVER} per WebServer for each catch-up in the "
        "window (one, plus one per process start and per leader change: a new leader re-reconciles everything at "
        "once), and LISTs stay within two per informer per process that ran in the window (a paginated list counts "
        "once). The busiest second is "
        "reported, not judged: catching up is a burst by design.",
        "- **no write from a deposed leader**: no write accepted from a replica later than its last successful Lease "
        "renewal + renew deadline + 1s (+ injected latency), nor from a replica that never held the Lease.",
        "- **liveness never failed**: every /healthz answer of a live process was 200.",
        "- **no unhandled exception**: no traceback on any replica's stderr.",
        "- **leader-freeze, 0 s slack**: no write (accepted or rejected) from the frozen replica received after its "
        "Lease expired, i.e. after the renewTime + leaseDurationSeconds of its last Lease write the API server had "
        "completed before the write arrived (chaos/fencing.py).",
        "- **slow-api, 0 tolerated**: no replica exits or restarts in the window, and it recovers (above).",
        "- A harness failure (a fault that cannot be injected or healed, a step past its limit) ends the run: the "
        "faults before it are judged, the aborted one is marked ABORTED, `python -m chaos` exits 2.",
        "",
    ]


def _sharded_text(cfg: RunConfig) -> list[str]:
    replicas = len(cfg.slots)
    return [
        "## What the run does",
        "",
        f"- {cfg.webservers} WebServers in {cfg.namespaces} namespaces with random names, spread evenly over the "
        f"{cfg.shards} shards (chaos/shards.py computes each namespace's shard itself, as the API server defines it), "
        f"under continuous churn at {cfg.rate:g} operations/s (the same mix as the full run).",
        f"- {replicas} operator replicas with `--leader-elect --shards {cfg.shards}` and no leader: each holds a "
        "member Lease and its fair share of the shard Leases (lease "
        f"{cfg.lease_duration:g}s, renew deadline {cfg.renew_deadline:g}s, retry {cfg.retry_period:g}s), in the "
        "in-cluster configuration, each as its own ServiceAccount behind its own toxiproxy; a fourth slot is ready "
        "for the scale fault. A replica that exits is restarted after 1s (the killed one only after lease duration "
        "+ 10 s). The faults run one at a time, each from a settled fleet (every shard held, shares within one).",
        "- Verdicts come from the API server's audit log (every request of the replicas' ServiceAccounts, the Lease "
        "writes with their bodies: hack/audit-policy.yaml) and from the objects, never from the operator's logs or "
        "metrics (chaos/shardverdicts.py).",
        "",
        "## Rules",
        "",
        "- **recovered**, **no retry storm**, **liveness never failed**, **no unhandled exception**: as in the full "
        "run; a shard handover counts as a catch-up of 1/shards of the WebServers, each shard gained allows a "
        "list of its replica's informers, and the Lease LISTs of every replica's rounds count with the other "
        "requests, not as relists.",
        "- **0 writes for a shard without a current grant of its Lease (0 s slack)**: every write to a shard's "
        "objects (namespaced, Leases aside: Deployments, Services, WebServer status, Events), accepted or rejected, "
        "arrived while the latest grant of that shard's Lease its replica had stored before it was current: before "
        "renewTime + leaseDurationSeconds and before that replica's release. A replica is one process: a restarted "
        "slot inherits nothing (chaos/fencing.py, chaos/shardverdicts.py).",
        "- **no shard written by two replicas in one window**: no write to a shard while the grant that covered "
        "another replica's earlier write to it had not yet expired or been released.",
        "- **the dead replica's shards taken over within lease duration + 5 s** (shard-kill, shard-freeze): each "
        "shard the killed or frozen replica held at the fault is granted to another slot within "
        f"{cfg.lease_duration + 5:g}s of the fault's start.",
        "- **every shard held by one live replica, shares within one**: after each fault's recovery (within the "
        "window's limit) and at the end, read from the shard Leases: a holder that is a running replica, a grant "
        "not expired, and the live replicas' counts at most one apart.",
        "- **every WebServer converges**, **0 duplicate children**, **0 adopted foreign objects**, **0 writes once "
        "converged**: as in the full run (run verdicts).",
        "- A harness failure ends the run as in the full run (exit 2).",
        "",
    ]


def render(result: Result, *, command: str) -> str:
    cfg = result.config
    when = datetime.fromtimestamp(result.started, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    took = result.finished - result.started
    base = result.baseline
    lines = [
        "# Reliability under real faults",
        "",
        f"Produced by `{command}` on {when} ({took / 60:.1f} minutes; {os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}). Regenerate with the same command; "
        + ("only this block of the file is replaced" if cfg.sharded else "the analysis at the end is kept")
        + f". Overall: {_overall(result)}.",
        "",
        *_harness_failure(result),
        *(_sharded_text(cfg) if cfg.sharded else _unsharded_text(cfg)),
        "## Setup",
        "",
        "| figure | value |",
        "| --- | --- |",
    ]
    lines += [f"| {k} | {v} |" for k, v in result.setup.items()]
    if base is not None:
        b = base.figures
        lines += [
            f"| baseline ({base.window.end - base.window.start:.0f}s churn, no fault): requests/s mean / busiest / "
            f"busiest without LIST+WATCH | {b.rps_mean:.1f} / {b.rps_peak} / {b.rps_peak_other} |",
        ]
    lines += [
        f"| churn operations done | {', '.join(f'{k} {v}' for k, v in sorted(result.churn.items()))} |",
        f"| churn operations failed (by HTTP status) | "
        f"{', '.join(f'{k} {v}' for k, v in sorted(result.churn_failures.items())) or 'none'} |",
        f"| control-plane components restarted by the harness | {'; '.join(result.control_plane_restarts) or 'none'} |",
        "",
        "## Summary",
        "",
        "Seconds; requests/s as mean / busiest second / busiest second without LIST+WATCH.",
        "",
        "| fault | duration | canary | backlog | requests/s | other requests (budget) | LISTs | 429 | 5xx | "
        + (
            "unfenced writes | liveness failures | tracebacks | shard handovers | verdict |"
            if cfg.sharded
            else "deposed writes | liveness failures | tracebacks | leader changes | verdict |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [_summary_row(m) for m in result.faults]
    lines += ["", "## Faults", ""]
    for m in result.faults:
        lines += _fault_section(m, base, sharded=cfg.sharded)
    lines += ["## Run verdicts", ""]
    if result.aborted is not None and result.aborted.phase.startswith(("setup", "fault", "final")):
        how = "was cut short" if result.aborted.phase.startswith("final") else "did not run"
        lines += [f"The final phase (convergence, duplicates, foreign objects, quiet window) {how}.", ""]
    lines += ["| verdict | result | detail |", "| --- | --- | --- |"]
    lines += [f"| {r.name} | {_ok(r.passed)} | {r.detail} |" for r in result.final]
    lines += ["", "| figure | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in result.final_figures.items()]
    lines.append("")
    return "\n".join(lines)


def write(path: Path, text: str) -> None:
    """Write the report, keeping the hand-written analysis after the marker of the existing file."""
    kept = ""
    if path.exists():
        old = path.read_text()
        if MARKER in old:
            kept = old[old.index(MARKER) :]
    path.write_text(text + "\n" + (kept or f"{MARKER}\n\n## Analysis\n\n(not written yet)\n"))


BLOCK_BEGIN = '<!-- sharded run: generated by make chaos CHAOS_ARGS="--preset sharded" -->'
BLOCK_END = "<!-- /sharded run -->"


def write_block(path: Path, text: str) -> None:
    """Put a sharded run's report into its own block at the end of ``path``, replacing the previous one.

    The block lies after the ``<!-- analysis -->`` marker, so regenerating the full run's report (``write``) keeps
    it, and this keeps everything outside it. Its headings go one level down, under "# Sharded run (issue 18)".
    """
    demoted = "\n".join(f"#{line}" if line.startswith("#") else line for line in text.splitlines())
    demoted = demoted.replace("# Reliability under real faults", "# Sharded run (issue 18)", 1)
    block = f"{BLOCK_BEGIN}\n\n{demoted.strip()}\n\n{BLOCK_END}\n"
    old = path.read_text() if path.exists() else f"{MARKER}\n\n## Analysis\n\n(not written yet)\n"
    if MARKER not in old:
        old = f"{old.rstrip()}\n\n{MARKER}\n"
    if BLOCK_BEGIN in old and BLOCK_END in old:
        head, rest = old.split(BLOCK_BEGIN, 1)
        tail = rest.split(BLOCK_END, 1)[1].lstrip("\n")
        path.write_text(head + block + (f"\n{tail}" if tail else ""))
    else:
        path.write_text(f"{old.rstrip()}\n\n{block}")


def summary(result: Result) -> str:
    """A few lines for a terminal or a test failure: every failed verdict."""
    lines = [f"chaos run {result.config.name}: {_overall(result)} in {result.finished - result.started:.0f}s"]
    lines += [f"  {line}" for line in result.failures()]
    return "\n".join(lines)
