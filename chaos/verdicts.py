"""Figures and pass/fail per fault window, from the audit log and the replicas' probes and stderr, never their logs.

The rules, fixed before any run (they are what the report states next to each figure):

- **recovered**: the canary change made right after the heal is applied and observed, and every WebServer's
  generation at heal time is observed, each within ``cap`` seconds;
- **no retry storm**: a budget on the volume, not on the busiest second, because catching up after a fault is a
  burst by design (a new leader re-reconciles every WebServer at once). Requests other than LIST and WATCH
  (reconcile reads and writes, Lease calls, Events) stay within 1.5x what the no-fault baseline sent in as long, plus
  4 requests per WebServer for each catch-up the window contains (one, plus one per process start and per leader
  change). LISTs stay within two per informer per process that ran in the window (a relist after a broken watch or a
  410 is normal; a relist loop is not); the later pages of one paginated list count with its first. A client that
  retries without backoff, or ignores Retry-After, overruns both within seconds;
- **no write from a deposed leader**: no write accepted (2xx) from a replica more than ``renew_deadline`` (plus 1 s,
  plus any latency injected towards the API server) after its own last successful Lease renewal, and none from a
  replica that never held the Lease. Attempts that the API server rejected are counted apart;
- **liveness**: no /healthz answer other than 200 while the process was alive;
- **no unhandled exception**: no traceback on a replica's stderr.

Used by ``scenario``; rendered by ``report``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from chaos.replica import Incident
from harness.audit import Request

BASELINE_FACTOR = 1.5
CATCH_UP_REQUESTS_PER_WEBSERVER = 4
DEADLINE_SLACK = 1.0
DEPOSED_RULE = "no write from a deposed leader"


@dataclass
class Window:
    """One fault (or the baseline): when it started, was healed and when the figures stop counting."""

    name: str
    title: str
    start: float
    healed: float = 0.0
    end: float = 0.0
    canary: float | None = None
    backlog: float | None = None
    cap: float = 60.0
    notes: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)
    slack: float = 0.0  # extra seconds for the deposed-writer rule (latency injected towards the API server)
    marks: dict[str, float] = field(default_factory=dict)  # moments (epoch seconds) a fault's own verdict needs
    steps: list[tuple[float, str]] = field(default_factory=list)  # (epoch seconds, what) as the fault announced them
    aborted: bool = False  # the harness failed in this window (``failure``): its figures are not judged
    on_step: Callable[[str], None] | None = None  # told of every step as it begins (the run's progress lines)

    def step(self, what: str) -> None:
        """Announce the step the fault enters now, so a harness failure can say where it happened."""
        self.steps.append((time.time(), what))
        if self.on_step is not None:
            self.on_step(what)


@dataclass
class Figures:
    requests: int = 0
    rps_mean: float = 0.0
    rps_peak: int = 0
    rps_peak_other: int = 0  # busiest second without LIST/WATCH
    other: int = 0  # requests without LIST/WATCH
    other_budget: float = 0.0
    lists: int = 0
    list_allowance: int = 0
    status_429: int = 0
    status_5xx: int = 0
    writes_accepted: int = 0
    deposed_writes: list[str] = field(default_factory=list)
    deposed_attempts: list[str] = field(default_factory=list)
    liveness: list[Incident] = field(default_factory=list)
    tracebacks: list[Incident] = field(default_factory=list)
    exits: list[Incident] = field(default_factory=list)
    leader_changes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Rule:
    name: str
    passed: bool
    detail: str


def busiest_second(requests: list[Request]) -> int:
    buckets = Counter(int(r.received) for r in requests)
    return max(buckets.values(), default=0)


#: The resources the operator's informers list and watch (reconcile/setup.py).
INFORMER_RESOURCES = frozenset({"webservers", "deployments", "services", "poddisruptionbudgets"})


def _is_informer(r: Request) -> bool:
    """A LIST or WATCH of an informer.

    Other LISTs are reads that count with the other requests against the baseline's rate: a sharded replica lists
    the member and shard Leases in every round, as steady as a renewal, and a reconcile whose rollout has made no
    progress for 20 s lists its namespace's Unhealthy pod Events (reconcile/probes.py, at most once per 10 s).
    """
    return r.verb in {"list", "watch"} and r.resource in INFORMER_RESOURCES


def _starts_a_list(r: Request) -> bool:
    """An informer's LIST that starts a list: the later pages of a paginated list carry the ``continue`` token.

    WebServers are listed 10 a page (a tenant may pad each to 1.5 MiB), so one relist of 200 WebServers is 20 LIST
    requests; counted per request, a single relist would look like a relist loop.
    """
    return r.verb == "list" and _is_informer(r) and "continue=" not in r.uri


def lease_timeline(requests: list[Request], lease: str) -> list[Request]:
    """Successful writes of the Lease ``lease``, in commit order."""
    found = [r for r in requests if r.resource == "leases" and r.name == lease and r.lease_holder is not None]
    found.sort(key=lambda r: r.completed)
    return found


def leader_changes(timeline: list[Request], start: float, end: float) -> list[str]:
    changes, previous = [], None
    for r in timeline:
        holder = r.lease_holder or ""
        if holder and holder != previous and start <= r.completed <= end:
            changes.append(f"{holder} from {r.completed - start:+.1f}s")
        if holder:
            previous = holder
    return changes


def deposed_writes(
    requests: list[Request],
    timeline: list[Request],
    *,
    renew_deadline: float,
    slack_at: list[tuple[float, float, float]],
) -> tuple[list[Request], list[Request]]:
    """(accepted, rejected) writes sent by a replica after its renew deadline, or without ever holding the Lease."""
    renewals: dict[str, list[float]] = {}
    for r in timeline:
        if r.lease_holder:
            renewals.setdefault(r.user, []).append(r.completed)
    accepted: list[Request] = []
    rejected: list[Request] = []
    for w in requests:
        if not w.is_write or w.resource == "leases":
            continue
        times = [t for t in renewals.get(w.user, []) if t <= w.received]
        slack = DEADLINE_SLACK + max((s for a, b, s in slack_at if a <= w.received <= b), default=0.0)
        if times and w.received <= times[-1] + renew_deadline + slack:
            continue
        (accepted if w.ok else rejected).append(w)
    return accepted, rejected


def describe(w: Request, origin: float) -> str:
    who = w.user.rsplit(":", 1)[-1]
    return f"{who} {w.verb} {w.resource} {w.namespace}/{w.name} -> {w.code} at {w.received - origin:+.1f}s"


def figures(
    window: Window,
    requests: list[Request],
    *,
    timeline: list[Request],
    deposed: tuple[list[Request], list[Request]],
    incidents: list[Incident],
    informers_per_process: int,
    slots: int,
    webservers: int = 0,
    baseline_rate: float = 0.0,
    handovers: list[str] | None = None,
    shards: int = 1,
) -> Figures:
    """The window's figures.

    Sharded runs pass their shard ``handovers`` (the leader Lease's changes otherwise); a shard's handover is a
    catch-up of that shard's WebServers only, so it weighs ``1 / shards`` of a leader change.
    """
    inside = [r for r in requests if window.start <= r.received <= window.end]
    duration = max(window.end - window.start, 1.0)
    starts = sum(1 for i in incidents if i.kind == "started" and window.start <= i.time <= window.end)
    acc, rej = deposed
    changes = leader_changes(timeline, window.start, window.end) if handovers is None else handovers
    catch_ups = 1 + starts + len(changes) / shards
    return Figures(
        requests=len(inside),
        rps_mean=len(inside) / duration,
        rps_peak=busiest_second(inside),
        rps_peak_other=busiest_second([r for r in inside if not _is_informer(r)]),
        other=sum(1 for r in inside if not _is_informer(r)),
        other_budget=BASELINE_FACTOR * baseline_rate * duration
        + CATCH_UP_REQUESTS_PER_WEBSERVER * webservers * catch_ups,
        lists=sum(1 for r in inside if _starts_a_list(r)),
        list_allowance=2 * informers_per_process * (starts + slots),
        status_429=sum(1 for r in inside if r.code == 429),
        status_5xx=sum(1 for r in inside if r.code >= 500),
        writes_accepted=sum(1 for r in inside if r.is_write and r.ok and r.resource != "leases"),
        deposed_writes=[describe(w, window.start) for w in acc if window.start <= w.received <= window.end],
        deposed_attempts=[describe(w, window.start) for w in rej if window.start <= w.received <= window.end],
        liveness=[i for i in incidents if i.kind == "liveness" and window.start <= i.time <= window.end],
        tracebacks=[i for i in incidents if i.kind == "traceback" and window.start <= i.time <= window.end],
        exits=[i for i in incidents if i.kind == "exited" and window.start <= i.time <= window.end],
        leader_changes=changes,
    )


def rules(window: Window, fig: Figures, *, leader: bool = True) -> list[Rule]:
    """The common rules of a window.

    ``leader=False`` (a sharded run, no leader) leaves out the deposed leader's: the per-shard rules of
    ``shardverdicts`` take its place.
    """
    # Within the limit, not just measured: a poll that began before the limit can end after it (a list of the
    # WebServers took 2.3 s on a loaded machine, and slow-api's backlog was reported as 92.3 s of a 90 s limit).
    recovered = all(took is not None and took <= window.cap for took in (window.canary, window.backlog))
    found = [
        Rule(
            "recovered",
            recovered,
            f"canary {_secs(window.canary)}, backlog {_secs(window.backlog)} (limit {window.cap:.0f}s each)",
        ),
        Rule(
            "no retry storm",
            fig.other <= fig.other_budget and fig.lists <= fig.list_allowance,
            f"{fig.other} requests without LIST/WATCH (budget {fig.other_budget:.0f}); {fig.lists} LISTs "
            f"(limit {fig.list_allowance})",
        ),
        Rule(
            DEPOSED_RULE,
            not fig.deposed_writes,
            f"{len(fig.deposed_writes)} accepted, {len(fig.deposed_attempts)} rejected attempts",
        ),
        Rule("liveness never failed", not fig.liveness, f"{len(fig.liveness)} failed /healthz answers"),
        Rule("no unhandled exception", not fig.tracebacks, f"{len(fig.tracebacks)} tracebacks on stderr"),
    ]
    return [r for r in found if leader or r.name != DEPOSED_RULE]


def _secs(value: float | None) -> str:
    return "not within the limit" if value is None else f"{value:.1f}s"
