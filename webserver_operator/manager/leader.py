"""Leader election with a ``coordination.k8s.io/v1`` Lease, with client-go / controller-runtime semantics.

Why our own loop instead of ``kubernetes_asyncio.leaderelection``: that one cannot release the Lease on shutdown (a
standby then waits a full lease duration), compares the remote ``renewTime`` with local wall time (clock skew between
nodes decides who leads), and can keep the leading task alive after an exception. A deposed leader that keeps
writing is the one failure leader election exists to prevent, so every rule below is about that.

Rules, and why each exists:

- **Expiry is measured on our own monotonic clock, never from timestamps in the Lease.** A candidate remembers the
  Lease record (its spec) and the local monotonic time at which it first saw that exact record; the holder is
  considered gone once the record has not changed for ``leaseDurationSeconds`` (the holder's own declaration, else
  our ``lease_duration``) on that clock. ``renewTime``/``acquireTime`` are written for people and never read: nodes'
  wall clocks differ, and NTP may step them. Only elapsed time is compared, so skew does not matter.
- **The observation time is taken after the GET answer arrives.** The record was written before the server answered,
  so a takeover happens at the earliest ``lease duration`` after the holder's last successful write.
- **Immediate acquire** when the Lease does not exist (create it), when ``holderIdentity`` is empty (released on a
  graceful shutdown) or when it already names us (the same identity restarted). Identities must therefore be unique
  per process: two live processes with the same identity would both lead.
- **Every write is optimistic**: a PUT carrying the observed ``resourceVersion`` (or a create). A 409 means another
  candidate wrote first this round; we look again next period. This is what makes "exactly one leader" hold when
  candidates act at the same instant.
- ``leaseTransitions`` increments when the holder changes, ``acquireTime`` is kept while we renew: as client-go, so
  ``kubectl get lease`` reads the same whichever implementation wrote it. Spec fields we do not know
  (``preferredHolder``, ``strategy``) are carried over, never dropped.
- **The leader stops writing before anyone can take over, by time, not by a flag.** Every successful write of the
  Lease extends its ``fence`` (``kube.fence.LeaseFence``) to the moment that write was *sent* plus ``renew_deadline``
  (the server stored it later, and standbys saw it later still); the API client refuses every write once that moment
  has passed, checked just before the request goes on the wire. With ``renew_deadline < lease_duration`` writes have
  stopped before a standby can consider the Lease expired, whatever the standby's clock reads, and even when this
  process's event loop was frozen and nothing here got to run. ``is_leader`` reads the same fence.
- **Each renew gets the whole renew deadline** (client-go's renew loop): ``hold()`` waits ``retry_period`` after a
  successful renew, then tries for up to ``renew_deadline`` (every ``retry_period``, each call bounded by what is
  left), and ends when that round fails. A slow API server (a renewal taking 6 s of a 10 s deadline) therefore costs
  pauses in writing, not the leadership; the fence keeps it safe meanwhile. A round whose deadline passes while the
  event loop is frozen fails too (as in client-go); a freeze between rounds only closes the fence until the next
  renewal.
- **Every election API call has a timeout** (``asyncio.timeout``): a renewal call what is left of its round, an
  acquire call ``request_timeout`` (default ``renew_deadline``, so a standby can acquire through the same slow API
  server), a release ``release_timeout`` in all. A hung API server or a dead TCP connection therefore cannot keep a
  deposed leader acting. The client's own retries happen inside it.
- **Losing is detected eagerly**: a Lease found naming anyone else (or nobody, or deleted) ends ``hold()`` at once,
  instead of retrying until the deadline as client-go does: someone else may already be acting.
- **Renewing is one PUT** on the object our last write returned (client-go's fast path); only a 409 costs a GET.
- **Release on graceful shutdown** writes ``holderIdentity: ""``, ``leaseDurationSeconds: 1`` and fresh times, as
  client-go's ``ReleaseOnCancel``, so a standby takes over within about one retry period instead of a lease
  duration. It is bounded by a timeout and never raises: a failed release only costs a slower takeover.
- ``leader_election_master_status{name=<lease>}`` is 1 from a successful acquire until ``hold()`` ends or
  ``release()`` runs, 0 otherwise (also on a standby, so dashboards see every replica).
- Retries while waiting are jittered (up to 20 %) so candidates started together do not poll in lockstep.
- A failing Lease call is logged at warning when it starts failing and again every minute while it keeps failing
  (``core.repeats``), at debug in between; a recovery is logged at info.

Created by ``manager.manager`` when ``--leader-elect`` is on; its ``fence`` gates the reconcile path's writes, and
its ``hold()`` ending is what stops the controller.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from webserver_operator import metrics
from webserver_operator.core.repeats import RepeatedFailure
from webserver_operator.core.resources import LEASES
from webserver_operator.core.vocabulary import ApiRequests
from webserver_operator.kube.errors import Conflict, KubeError, NotFound
from webserver_operator.kube.fence import LeaseFence

__all__ = [
    "LeaderElector",
    "LeadershipLost",
    "claimed_lease",
    "format_micro_time",
    "holder_of",
    "lease_duration_seconds",
    "new_lease",
    "released_lease",
    "should_acquire",
]

log = logging.getLogger(__name__)

#: Waits between acquire attempts are ``retry_period * (1 + _JITTER * rand())``.
_JITTER = 0.2


class LeadershipLost(Exception):  # noqa: N818 - reads better at the call site than LeadershipLostError
    """``hold()`` ended: the Lease could not be renewed within the renew deadline, or someone else holds it."""


# --- pure decision logic and record builders ---------------------------------------------------------------------


def format_micro_time(moment: datetime) -> str:
    """RFC 3339 with microseconds in UTC, as ``metav1.MicroTime``: ``2026-11-22T10:00:00.000000Z``."""
    if moment.tzinfo is None:
        raise ValueError("format_micro_time needs an aware datetime")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_duration_seconds(lease_duration: float) -> int:
    """``spec.leaseDurationSeconds`` is an integer: round up, so the declared validity is never shorter."""
    return max(1, math.ceil(lease_duration))


def holder_of(spec: Mapping[str, Any] | None) -> str:
    """``spec.holderIdentity``; ``""`` when absent, null or not a string (a released or never-held Lease)."""
    holder = (spec or {}).get("holderIdentity")
    return holder if isinstance(holder, str) else ""


def _declared_duration(spec: Mapping[str, Any], default: float) -> float:
    value = spec.get("leaseDurationSeconds")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


def should_acquire(
    observed: Mapping[str, Any] | None,
    *,
    identity: str,
    now: float,
    observed_at: float,
    lease_duration: float,
) -> bool:
    """Whether a candidate may write the Lease now.

    ``observed`` is the Lease's ``spec`` (``None``: the Lease does not exist); ``observed_at`` is the monotonic time
    at which this exact record was first seen and ``now`` the same clock now. The expiry uses the record's
    ``leaseDurationSeconds`` (the holder's declaration), falling back to ``lease_duration``. Timestamps inside the
    record are deliberately ignored (see the module docstring).
    """
    if observed is None:
        return True
    holder = holder_of(observed)
    if holder in ("", identity):
        return True
    return now - observed_at >= _declared_duration(observed, lease_duration)


def new_lease(*, namespace: str, name: str, identity: str, lease_duration: float, now: datetime) -> dict[str, Any]:
    """A Lease to create, held by ``identity`` from ``now``."""
    stamp = format_micro_time(now)
    return {
        "apiVersion": LEASES.api_version,
        "kind": LEASES.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": lease_duration_seconds(lease_duration),
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": 0,
        },
    }


def _transitions(spec: Mapping[str, Any]) -> int:
    value = spec.get("leaseTransitions")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def claimed_lease(
    observed: Mapping[str, Any], *, identity: str, lease_duration: float, now: datetime
) -> dict[str, Any]:
    """``observed`` (a whole Lease, with its resourceVersion) rewritten to be held by ``identity`` as of ``now``.

    Renewing our own Lease keeps ``acquireTime`` and ``leaseTransitions``; taking it from anyone else (including
    nobody, after a release) starts a new ``acquireTime`` and counts a transition. Other spec fields are kept.
    """
    lease = copy.deepcopy(dict(observed))
    old: Mapping[str, Any] = lease.get("spec") or {}
    stamp = format_micro_time(now)
    spec = dict(old)
    spec["holderIdentity"] = identity
    spec["leaseDurationSeconds"] = lease_duration_seconds(lease_duration)
    spec["renewTime"] = stamp
    if holder_of(old) == identity:
        spec["acquireTime"] = old.get("acquireTime") or stamp
        spec["leaseTransitions"] = _transitions(old)
    else:
        spec["acquireTime"] = stamp
        spec["leaseTransitions"] = _transitions(old) + 1
    lease["spec"] = spec
    return lease


def released_lease(observed: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """``observed`` rewritten as client-go's ``ReleaseOnCancel`` does: no holder, 1 s duration, fresh times."""
    lease = copy.deepcopy(dict(observed))
    stamp = format_micro_time(now)
    spec = dict(lease.get("spec") or {})
    spec.update(
        holderIdentity="",
        leaseDurationSeconds=1,
        acquireTime=stamp,
        renewTime=stamp,
        leaseTransitions=_transitions(spec),
    )
    lease["spec"] = spec
    return lease


# --- the elector -------------------------------------------------------------------------------------------------


class _Renewal(enum.Enum):
    RENEWED = "renewed"
    TAKEN = "taken"
    FAILED = "failed"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


class LeaderElector:
    """Campaign for, hold and release one Lease. See the module docstring for the rules.

    Use::

        await elector.acquire()          # returns once we lead
        hold = asyncio.create_task(elector.hold())   # raises LeadershipLost when leadership ends
        ...                              # act only while hold is running
        await elector.release()          # on graceful shutdown, after cancelling hold and stopping all writes

    ``fence`` is what writers consult (``KubeClient.gated(elector.fence.why_not)``). ``clock`` (monotonic seconds,
    shared with the fence), ``wall_clock`` (times written into the Lease), ``sleep`` and ``rand`` are test hooks.
    """

    def __init__(
        self,
        api: ApiRequests,
        *,
        lease_name: str,
        lease_namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        request_timeout: float | None = None,
        release_timeout: float | None = None,
        wall_clock: Callable[[], datetime] = _utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if not identity:
            raise ValueError("leader election identity must not be empty (it is how the Lease names its holder)")
        for name, value in (
            ("lease_duration", lease_duration),
            ("renew_deadline", renew_deadline),
            ("retry_period", retry_period),
        ):
            _positive(name, value)
        if not lease_duration > renew_deadline:
            raise ValueError(
                f"lease_duration ({lease_duration:g}s) must be greater than renew_deadline ({renew_deadline:g}s): "
                "a leader that cannot renew must stop before a standby may take over"
            )
        if not renew_deadline > retry_period * (1 + _JITTER):
            raise ValueError(
                f"renew_deadline ({renew_deadline:g}s) must be greater than {1 + _JITTER:g} x retry_period "
                f"({retry_period:g}s): the leader needs more than one renew attempt per deadline"
            )
        for name, optional in (("request_timeout", request_timeout), ("release_timeout", release_timeout)):
            if optional is not None:
                _positive(name, optional)
        self._api = api
        self._name = lease_name
        self._namespace = lease_namespace
        self._path = LEASES.path(namespace=lease_namespace, name=lease_name)
        self._collection = LEASES.path(namespace=lease_namespace)
        self._identity = identity
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._request_timeout = request_timeout if request_timeout is not None else renew_deadline
        # The release comes after the drain, inside the pod's termination grace period: keep it short.
        self._release_timeout = (
            release_timeout if release_timeout is not None else max(retry_period, renew_deadline / 2)
        )
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._rand = rand
        # Candidate state: the last record seen and when (our monotonic clock) it was first seen.
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        # Leader state: the object our last write returned, and when that write was sent.
        self._lease: dict[str, Any] | None = None
        self._last_renew: float | None = None
        self._leading = False
        # True once we may have written a record naming us that we have not seen replaced: release() checks it.
        self._claimed = False
        self._logged_holder: str | None = None
        self._failures = RepeatedFailure(clock=clock)
        self.fence = LeaseFence(f"{lease_namespace}/{lease_name}", clock=clock)
        self._gauge = metrics.LEADER_ELECTION_MASTER_STATUS.labels(name=lease_name)
        self._gauge.set(0)

    @property
    def is_leader(self) -> bool:
        """Whether this replica may act as the leader now: by the ``fence``, not by a flag.

        True from a successful ``acquire()`` until ``hold()`` ends or ``release()`` is called, and only while the
        last successful renew was sent less than ``renew_deadline`` ago.
        """
        return self._leading and self.fence.why_not() is None

    @property
    def identity(self) -> str:
        return self._identity

    # --- acquire ---------------------------------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Return once this process holds the Lease; try every ``retry_period`` (jittered) until then."""
        log.info("attempting to acquire leader lease %s/%s as %s", self._namespace, self._name, self._identity)
        while not await self._try_acquire():
            await self._sleep(self._retry_period * (1 + _JITTER * self._rand()))

    async def _try_acquire(self) -> bool:
        try:
            return await self._acquire_once()
        except (KubeError, TimeoutError) as error:
            self._log_failure("acquire", error)
            return False

    async def _acquire_once(self) -> bool:
        try:
            observed: dict[str, Any] | None = await self._call("GET", self._path, budget=self._request_timeout)
        except NotFound:
            observed = None
        now = self._clock()
        spec: dict[str, Any] | None = None
        if observed is not None:
            raw_spec = observed.get("spec")
            spec = dict(raw_spec) if isinstance(raw_spec, dict) else {}
        if spec != self._observed:
            self._observed = spec
            self._observed_at = now
        previous = holder_of(spec)
        if not should_acquire(
            spec,
            identity=self._identity,
            now=now,
            observed_at=self._observed_at,
            lease_duration=self._lease_duration,
        ):
            if previous != self._logged_holder:
                log.info("waiting for leader lease %s/%s held by %s", self._namespace, self._name, previous)
                self._logged_holder = previous
            return False
        sent = self._clock()
        self._claimed = True
        try:
            if observed is None:
                body = new_lease(
                    namespace=self._namespace,
                    name=self._name,
                    identity=self._identity,
                    lease_duration=self._lease_duration,
                    now=self._wall_clock(),
                )
                written = await self._call("POST", self._collection, body=body, budget=self._request_timeout)
            else:
                body = claimed_lease(
                    observed, identity=self._identity, lease_duration=self._lease_duration, now=self._wall_clock()
                )
                written = await self._call("PUT", self._path, body=body, budget=self._request_timeout)
        except Conflict:
            log.debug(
                "another candidate wrote lease %s/%s first; looking again next period", self._namespace, self._name
            )
            return False
        self._wrote(written, sent=sent)
        self._leading = True
        self._gauge.set(1)
        if previous and previous != self._identity:
            log.info(
                "became leader: lease %s/%s taken over from %s, which stopped renewing it",
                self._namespace,
                self._name,
                previous,
            )
        else:
            log.info("became leader: lease %s/%s held by %s", self._namespace, self._name, self._identity)
        return True

    # --- hold ------------------------------------------------------------------------------------------------------

    async def hold(self) -> None:
        """Renew the Lease every ``retry_period`` until leadership ends, then raise ``LeadershipLost``.

        Each renew round has the whole ``renew_deadline``; ``hold()`` ends when a round fails, and at once when the
        Lease names someone else or was deleted. Writes stop earlier, by the ``fence``, ``renew_deadline`` after the
        last successful renew was sent. Never returns normally; cancelling it stops renewing (the Lease stays ours
        until it expires or ``release()`` runs).
        """
        if not self._leading or self._last_renew is None:
            raise RuntimeError("LeaderElector.hold() needs a successful acquire() first")
        why = f"this replica stopped renewing lease {self._namespace}/{self._name}"
        try:
            while True:
                await self._sleep(self._retry_period)
                await self._renew_round()
        except LeadershipLost as lost:
            log.error("leadership lost: %s", lost)
            why = f"this replica lost lease {self._namespace}/{self._name}: {lost}"
            raise
        finally:
            self._leading = False
            self.fence.revoke(why)
            self._gauge.set(0)

    async def _renew_round(self) -> None:
        """Renew within one renew deadline from now, retrying every ``retry_period``; raise ``LeadershipLost``."""
        deadline = self._clock() + self._renew_deadline
        while True:
            outcome, detail = await self._renew_once(deadline)
            if outcome is _Renewal.RENEWED:
                return
            if outcome is _Renewal.TAKEN:
                self._claimed = False
                raise LeadershipLost(detail)
            await self._sleep(max(0.0, min(self._retry_period, deadline - self._clock())))
            if self._clock() >= deadline:
                raise LeadershipLost(
                    f"could not renew lease {self._namespace}/{self._name} within the renew deadline "
                    f"({self._renew_deadline:g}s)"
                )

    async def _renew_once(self, deadline: float) -> tuple[_Renewal, str]:
        def budget() -> float:
            return deadline - self._clock()  # the whole rest of the round, as client-go

        where = f"lease {self._namespace}/{self._name}"
        try:
            if self._lease is not None:
                sent = self._clock()
                body = claimed_lease(
                    self._lease, identity=self._identity, lease_duration=self._lease_duration, now=self._wall_clock()
                )
                try:
                    written = await self._call("PUT", self._path, body=body, budget=budget())
                except Conflict:
                    self._lease = None  # changed since our last write: look at who wrote it
                else:
                    self._wrote(written, sent=sent)
                    return _Renewal.RENEWED, ""
            observed = await self._call("GET", self._path, budget=budget())
            holder = holder_of(observed.get("spec"))
            if holder != self._identity:
                if holder:
                    return _Renewal.TAKEN, f"{where} is now held by {holder}"
                return _Renewal.TAKEN, f"{where} was released by someone else"
            sent = self._clock()
            body = claimed_lease(
                observed, identity=self._identity, lease_duration=self._lease_duration, now=self._wall_clock()
            )
            written = await self._call("PUT", self._path, body=body, budget=budget())
        except NotFound:
            return _Renewal.TAKEN, f"{where} was deleted"
        except Conflict:
            log.debug("%s changed while renewing; looking again next period", where)
            return _Renewal.FAILED, ""
        except (KubeError, TimeoutError) as error:
            self._log_failure("renew", error)
            return _Renewal.FAILED, ""
        self._wrote(written, sent=sent)
        return _Renewal.RENEWED, ""

    # --- release ---------------------------------------------------------------------------------------------------

    async def release(self) -> None:
        """Hand the Lease over on graceful shutdown, if we hold it. Bounded by one timeout in all; never raises.

        Usually one PUT on the Lease our last renewal returned; a GET only when that PUT meets a 409. The whole
        release shares one ``release_timeout`` budget (default ``max(retry_period, renew_deadline / 2)``), so the
        drain plus the release fit the pod's termination grace period (``--drain-timeout`` 20 s + at most 5 s, inside
        Kubernetes' default 30 s): a SIGKILL that landed first would leave the standby waiting a whole lease duration.

        Call it after ``hold()`` was cancelled and the controller stopped writing: from the moment this returns, a
        standby may lead.
        """
        self._leading = False
        self.fence.revoke(f"this replica released lease {self._namespace}/{self._name} (shutting down)")
        self._gauge.set(0)
        if not self._claimed:
            return
        where = f"lease {self._namespace}/{self._name}"
        deadline = self._clock() + self._release_timeout  # one budget for the whole release, not one per call
        try:
            if not await self._release_cached(deadline):
                observed = await self._call("GET", self._path, budget=deadline - self._clock())
                holder = holder_of(observed.get("spec"))
                if holder != self._identity:
                    log.info("not releasing %s: it is held by %s", where, holder or "nobody")
                else:
                    body = released_lease(observed, now=self._wall_clock())
                    await self._call("PUT", self._path, body=body, budget=deadline - self._clock())
                    log.info("released %s", where)
            else:
                log.info("released %s", where)
            self._claimed = False
            self._lease = None
        except NotFound:
            self._claimed = False
            self._lease = None
        except Exception as error:  # never raise from shutdown; a failed release only delays the takeover
            log.warning(
                "could not release %s (%s); a standby takes over once it expires (%ds)",
                where,
                str(error) or type(error).__name__,
                lease_duration_seconds(self._lease_duration),
            )

    async def _release_cached(self, deadline: float) -> bool:
        """Release with one PUT on the Lease our last write returned (as renewals do); False when it changed since."""
        if self._lease is None:
            return False
        try:
            body = released_lease(self._lease, now=self._wall_clock())
            await self._call("PUT", self._path, body=body, budget=deadline - self._clock())
        except Conflict:
            return False  # written by someone since: read it and look
        return True

    # --- helpers ---------------------------------------------------------------------------------------------------

    async def _call(self, method: str, path: str, *, body: object | None = None, budget: float) -> dict[str, Any]:
        if budget <= 0:
            raise TimeoutError(f"{method} {path}: no time left before the renew deadline")
        async with asyncio.timeout(budget):
            return await self._api.request(method, path, body=body)

    def _wrote(self, written: dict[str, Any], *, sent: float) -> None:
        self._lease = written
        self._last_renew = sent
        self.fence.renewed(sent=sent, renew_deadline=self._renew_deadline)
        if self._failures.succeeded():
            log.info("leader election: lease %s/%s calls work again", self._namespace, self._name)
        spec = written.get("spec")
        self._observed = dict(spec) if isinstance(spec, dict) else {}
        self._observed_at = self._clock()

    def _log_failure(self, action: str, error: BaseException) -> None:
        text = str(error) or "timed out"
        report = self._failures.failed(f"{action}: {text}")
        log.log(
            report.level,
            "leader election: %s of lease %s/%s failed: %s%s",
            action,
            self._namespace,
            self._name,
            text,
            report.suffix,
        )
