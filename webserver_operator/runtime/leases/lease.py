"""``Lease``: claim, hold and release one ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Why one class for every Lease: the leader's Lease (``--leader-elect``) and, with sharding, one Lease per shard are the
same mechanism under another name. Each has its own ``fence`` (``runtime.leases.fence.LeaseFence``) that gates the
writes it
covers, and its own ``leader_election_master_status{name=<lease>}`` series. The records it writes and the decision
whether it may claim come from ``runtime.leases.record`` (pure); the timings from ``core.settings.LeaseSettings``, whose
validator is the one place the timing rules are checked. Created by ``manager.operator``; its ``hold()`` ending is what
stops the work the Lease covers.

Why our own loop instead of ``kubernetes_asyncio.leaderelection`` (36.1): that one cannot release the Lease on
shutdown (a standby then waits a full lease duration), and keeps the leading task alive when its renew loop raises
(the task is cancelled only after a clean return). It does measure expiry from when it saw a record change, as
client-go does, not from the remote ``renewTime``, so clock skew between nodes does not decide who leads; but it
measures on the wall clock (``time.time()``), which NTP may step, and nothing stops the deposed holder's writes: its
renew loop gives up only after ``renew_deadline`` of failures, and the leading task's writes are not gated. A deposed
holder that keeps writing is the one failure a Lease exists to prevent, so every rule below is about that.

Rules, and why each exists:

- **Expiry is measured on our own monotonic clock, never from timestamps in the Lease** (``leaserecord.may_claim``).
  A candidate remembers the record (its spec) and the local monotonic time at which it first saw that exact record,
  taken after the GET answer arrived: the record was written before the server answered, so a takeover happens at
  the earliest ``lease duration`` after the holder's last successful write.
- **Immediate claim** when the Lease does not exist (create it), names nobody (released on a graceful shutdown) or
  already names us (the same identity restarted). Identities must therefore be unique per process.
- **Every write is optimistic**: a PUT carrying the observed ``resourceVersion`` (or a create). A 409 means another
  candidate wrote first this round; we look again next period. This is what makes "exactly one holder" hold when
  candidates act at the same instant.
- **The holder stops writing before anyone can take over, by time, not by a flag.** Every successful write of the
  Lease extends its ``fence`` to the moment that write was *sent* plus ``renew_deadline``; the API client refuses
  every covered write once that moment has passed, checked just before the request goes on the wire. With
  ``renew_deadline < lease_duration`` writes have stopped before a standby can consider the Lease expired, whatever
  the standby's clock reads, and even when this process's event loop was frozen. ``is_held`` reads the same fence.
- **Each renew gets the whole renew deadline** (client-go's renew loop): ``hold()`` waits ``retry_period`` after a
  successful renew, then tries for up to ``renew_deadline`` (every ``retry_period``, each call bounded by what is
  left), and ends when that round fails. A slow API server costs pauses in writing, not the Lease; the fence keeps it
  safe meanwhile. A round whose deadline passes while the event loop is frozen fails too.
- **Each call is tried once** (``LEASE_CALLS``, the retry policy the manager gives the Lease client): the round
  itself tries again every ``retry_period``. A client retry honours the server's ``Retry-After``, which API Priority
  and Fairness doubles up to 32 s while it rejects many requests, so one refused renewal slept past its round: in
  ``make chaos``'s apf-starvation a renewal refused with ``Retry-After: 16`` and a 7 s renew deadline lost the Lease.
  client-go's leader election has the same wait inside its REST client, bounded only by the renew deadline.
- **Every API call has a timeout** (``asyncio.timeout``): a renewal call what is left of its round, a claim
  ``request_timeout`` (default ``renew_deadline``, so a standby can claim through the same slow API server), a release
  ``LeaseSettings.release_timeout`` in all. A hung API server cannot keep a deposed holder acting.
- **Losing is detected eagerly**: a Lease found naming anyone else (or nobody, or deleted) ends ``hold()`` at once,
  instead of retrying until the deadline as client-go does: someone else may already be acting.
- **Renewing and releasing are one PUT** on the object our last write returned (client-go's fast path); only a 409
  costs a GET, after which we write only if the Lease still names us (``_update``, shared by both).
- **Release on graceful shutdown** writes ``holderIdentity: ""`` and ``leaseDurationSeconds: 1``, as client-go's
  ``ReleaseOnCancel``, so a standby takes over within about one retry period instead of a lease duration. It is
  bounded by a timeout and never raises: a failed release only costs a slower takeover.
- ``leader_election_master_status{name=<lease>}`` is 1 from a successful claim until ``hold()`` ends or ``release()``
  runs, 0 otherwise (also on a standby, so dashboards see every replica).
- Waits between claim attempts are jittered (``LeaseSettings.retry_backoff``) so candidates started together do not
  poll in lockstep.
- A failing Lease call is logged at warning when it starts failing and again every minute while it keeps failing
  (``runtime.leases.repeats``), at debug in between; a recovery is logged at info.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webserver_operator import metrics
from webserver_operator.core.resources import LEASES
from webserver_operator.core.settings import LeaseSettings
from webserver_operator.core.vocabulary import ApiRequests
from webserver_operator.kube.errors import Conflict, KubeError, NotFound
from webserver_operator.kube.retry import RetryPolicy
from webserver_operator.runtime.leases.fence import LeaseFence
from webserver_operator.runtime.leases.record import (
    Sighting,
    claimed_lease,
    holder_of,
    lease_duration_seconds,
    may_claim,
    new_lease,
    released_lease,
    sighted,
)
from webserver_operator.runtime.leases.repeats import RepeatedFailure

__all__ = ["LEASE_CALLS", "Lease", "LeaseLost"]

#: How the client of the Lease calls tries each one: once; ``hold()`` and ``acquire()`` try again every
#: ``retry_period`` themselves (the module docstring says why).
LEASE_CALLS = RetryPolicy(max_retries=0)

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """``hold()`` ended: the Lease could not be renewed within the renew deadline, or someone else holds it."""


class _Renewal(enum.Enum):
    RENEWED = "renewed"
    TAKEN = "taken"
    FAILED = "failed"


@dataclass(frozen=True)
class _Written:
    """A record naming us that the server stored, and when (our monotonic clock) we sent it."""

    lease: dict[str, Any]
    sent: float


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _spec_of(lease: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if lease is None:
        return None
    spec = lease.get("spec")
    return dict(spec) if isinstance(spec, dict) else {}


class Lease:
    """Claim, hold and release the Lease ``namespace/name`` as ``identity``. See the module docstring for the rules.

    Use::

        await lease.acquire()                      # returns once we hold it
        hold = asyncio.create_task(lease.hold())   # raises LeaseLost when holding ends
        ...                                        # act only while hold is running
        await lease.release()                      # on graceful shutdown, after cancelling hold and stopping writes

    ``labels`` go on the Lease when this replica creates it (a set of Leases listed together, such as the members').
    ``fence`` is what writers consult (``KubeClient.gated(lambda path: lease.fence.why_not())``). ``clock``
    (monotonic seconds, shared with the fence), ``wall_clock`` (times written into the Lease), ``sleep``, ``rand``,
    ``request_timeout`` and ``release_timeout`` are test hooks.
    """

    def __init__(
        self,
        api: ApiRequests,
        *,
        name: str,
        namespace: str,
        identity: str,
        settings: LeaseSettings,
        labels: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = _utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        request_timeout: float | None = None,
        release_timeout: float | None = None,
    ) -> None:
        if not identity:
            raise ValueError("a Lease holder's identity must not be empty (it is how the Lease names its holder)")
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self._where = f"lease {namespace}/{name}"
        self._api = api
        self._path = LEASES.path(namespace=namespace, name=name)
        self._collection = LEASES.path(namespace=namespace)
        self._settings = settings
        self._labels = dict(labels or {})
        self._request_timeout = request_timeout if request_timeout is not None else settings.renew_deadline
        self._release_timeout = release_timeout if release_timeout is not None else settings.release_timeout
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._rand = rand
        # Candidate state: the last record seen and when (our monotonic clock) it was first seen.
        self._sighting: Sighting | None = None
        # Holder state: the object our last write returned (renewals and the release PUT on it).
        self._lease: dict[str, Any] | None = None
        self._holding = False
        # True once we may have written a record naming us that we have not seen replaced: release() checks it.
        self._claimed = False
        self._logged_holder: str | None = None
        self._failures = RepeatedFailure(clock=clock)
        self.fence = LeaseFence(f"{namespace}/{name}", clock=clock)
        self._gauge = metrics.LEADER_ELECTION_MASTER_STATUS.labels(name=name)
        self._gauge.set(0)

    @property
    def is_held(self) -> bool:
        """Whether this replica may act under the Lease now: by the ``fence``, not by a flag.

        True from a successful ``acquire()`` until ``hold()`` ends or ``release()`` is called, and only while the
        last successful renew was sent less than ``renew_deadline`` ago.
        """
        return self._holding and self.fence.why_not() is None

    # --- acquire ---------------------------------------------------------------------------------------------------

    async def acquire(self, *, may_try: Callable[[], Awaitable[bool]] | None = None) -> None:
        """Return once this process holds the Lease; try every ``retry_period`` (jittered) until then.

        ``may_try``, when given, is asked before each attempt; False skips that period's attempt (the unsharded
        leader waits so while shard Leases of a sharded configuration are live: ``runtime.sharding.shardset``).
        """
        log.info("attempting to acquire %s as %s", self._where, self.identity)
        while not ((may_try is None or await may_try()) and await self.try_acquire()):
            await self._sleep(self._settings.retry_backoff.delay(0, rand=self._rand))

    async def try_acquire(self, listed: Mapping[str, Any] | None = None) -> bool:
        """One attempt: True when this process holds the Lease now (a shard loop decides itself when to try).

        ``listed``: the Lease as a list just returned it (``None``: the list had none), used instead of a GET, so a
        loop that lists many Leases claims each with one write; a stale record costs a 409, as a GET's would.
        """
        try:
            return await self._acquire_once(listed, from_list=listed is not None)
        except (KubeError, TimeoutError) as error:
            self._log_failure("acquire", error)
            return False

    async def _acquire_once(self, listed: Mapping[str, Any] | None = None, *, from_list: bool = False) -> bool:
        observed: dict[str, Any] | None = None
        if listed is not None:  # a list's items carry no apiVersion and kind; a PUT body does
            observed = {"apiVersion": LEASES.api_version, "kind": LEASES.kind, **listed}
        if not from_list:
            try:
                observed = await self._call("GET", self._path, budget=self._request_timeout)
            except NotFound:
                observed = None
        spec = _spec_of(observed)
        previous = holder_of(spec)
        if not self.observe(spec):
            if previous != self._logged_holder:
                log.info("waiting for %s held by %s", self._where, previous)
                self._logged_holder = previous
            return False
        sent = self._clock()
        self._claimed = True
        try:
            if observed is None:
                body = new_lease(
                    namespace=self.namespace,
                    name=self.name,
                    identity=self.identity,
                    lease_duration=self._settings.lease_duration,
                    now=self._wall_clock(),
                    labels=self._labels,
                )
                written = await self._call("POST", self._collection, body=body, budget=self._request_timeout)
            else:
                written = await self._call("PUT", self._path, body=self._claim(observed), budget=self._request_timeout)
        except Conflict:
            log.debug("another candidate wrote %s first; looking again next period", self._where)
            return False
        self._wrote(_Written(written, sent))
        self._holding = True
        self._gauge.set(1)
        if previous and previous != self.identity:
            log.info("acquired %s: taken over from %s, which stopped renewing it", self._where, previous)
        else:
            log.info("acquired %s as %s", self._where, self.identity)
        return True

    def observe(self, spec: Mapping[str, Any] | None) -> bool:
        """Note the Lease's record as read now (``None``: there is no Lease); whether this process may claim it.

        Called by ``acquire`` after each GET, and by a loop that lists many Leases at once
        (``runtime.sharding.shardset``), so
        the expiry of a record is measured from the first time this process saw it, however it was read.
        """
        now = self._clock()
        self._sighting = sighted(self._sighting, spec, now=now)
        return may_claim(
            self._sighting.spec,
            identity=self.identity,
            now=now,
            observed_at=self._sighting.since,
            lease_duration=self._settings.lease_duration,
        )

    # --- hold ------------------------------------------------------------------------------------------------------

    async def hold(self) -> None:
        """Renew the Lease every ``retry_period`` until holding ends, then raise ``LeaseLost``.

        Each renew round has the whole ``renew_deadline``; ``hold()`` ends when a round fails, and at once when the
        Lease names someone else or was deleted. Writes stop earlier, by the ``fence``, ``renew_deadline`` after the
        last successful renew was sent. Never returns normally; cancelling it stops renewing (the Lease stays ours
        until it expires or ``release()`` runs).
        """
        if not self._holding or self._lease is None:
            raise RuntimeError("Lease.hold() needs a successful acquire() first")
        why = f"this replica stopped renewing {self._where}"
        try:
            while True:
                await self._sleep(self._settings.retry_period)
                await self._renew_round()
        except LeaseLost as lost:
            log.error("lost %s: %s", self._where, lost)
            why = f"this replica lost {self._where}: {lost}"
            raise
        finally:
            self._holding = False
            self.fence.revoke(why)
            self._gauge.set(0)

    async def _renew_round(self) -> None:
        """Renew within one renew deadline from now, retrying every ``retry_period``; raise ``LeaseLost``."""
        deadline = self._clock() + self._settings.renew_deadline
        while True:
            outcome, detail = await self._renew_once(deadline)
            if outcome is _Renewal.RENEWED:
                return
            if outcome is _Renewal.TAKEN:
                self._forget()
                raise LeaseLost(detail)
            await self._sleep(max(0.0, min(self._settings.retry_period, deadline - self._clock())))
            if self._clock() >= deadline:
                raise LeaseLost(
                    f"could not renew {self._where} within the renew deadline ({self._settings.renew_deadline:g}s)"
                )

    async def _renew_once(self, deadline: float) -> tuple[_Renewal, str]:
        try:
            result = await self._update(self._claim, budget=lambda: deadline - self._clock())
        except NotFound:
            return _Renewal.TAKEN, f"{self._where} was deleted"
        except Conflict:
            log.debug("%s changed while renewing; looking again next period", self._where)
            return _Renewal.FAILED, ""
        except (KubeError, TimeoutError) as error:
            self._log_failure("renew", error)
            return _Renewal.FAILED, ""
        if isinstance(result, str):
            if result:
                return _Renewal.TAKEN, f"{self._where} is now held by {result}"
            return _Renewal.TAKEN, f"{self._where} was released by someone else"
        self._wrote(result)
        return _Renewal.RENEWED, ""

    # --- release ---------------------------------------------------------------------------------------------------

    async def release(self) -> None:
        """Hand the Lease over on graceful shutdown, if we hold it. Bounded by one timeout in all; never raises.

        Usually one PUT on the Lease our last renewal returned; a GET only when that PUT meets a 409. The whole
        release shares one ``release_timeout`` budget (default ``max(retry_period, renew_deadline / 2)``), so the
        drain plus the release fit the pod's termination grace period (``--drain-timeout`` 20 s + at most 5 s, inside
        Kubernetes' default 30 s): a SIGKILL that landed first would leave the standby waiting a whole lease duration.

        Call it after ``hold()`` was cancelled and the covered work stopped writing: from the moment this returns, a
        standby may take over.
        """
        self._holding = False
        self.fence.revoke(f"this replica released {self._where} (shutting down)")
        self._gauge.set(0)
        if not self._claimed:
            return
        deadline = self._clock() + self._release_timeout  # one budget for the whole release, not one per call
        try:
            result = await self._update(
                lambda lease: released_lease(lease, now=self._wall_clock()), budget=lambda: deadline - self._clock()
            )
        except NotFound:
            self._forget()
        except Exception as error:  # never raise from shutdown; a failed release only delays the takeover
            log.warning(
                "could not release %s (%s); a standby takes over once it expires (%ds)",
                self._where,
                str(error) or type(error).__name__,
                lease_duration_seconds(self._settings.lease_duration),
            )
        else:
            if isinstance(result, str):
                log.info("not releasing %s: it is held by %s", self._where, result or "nobody")
            else:
                log.info("released %s", self._where)
            self._forget()

    # --- the one write path of a held Lease ------------------------------------------------------------------------

    async def _update(
        self, rewrite: Callable[[Mapping[str, Any]], dict[str, Any]], *, budget: Callable[[], float]
    ) -> _Written | str:
        """PUT ``rewrite(record)`` while the Lease names us; the written record, or the holder it names instead.

        The PUT goes on the object our last write returned; after a 409 (someone wrote since) or with nothing cached,
        on a fresh GET, and only if that still names us. ``budget()`` is the time left for each call. Raises
        ``NotFound`` (deleted), ``Conflict`` (a second 409), ``KubeError`` and ``TimeoutError``.
        """
        if self._lease is not None:
            sent = self._clock()
            try:
                return _Written(await self._call("PUT", self._path, body=rewrite(self._lease), budget=budget()), sent)
            except Conflict:
                self._lease = None  # changed since our last write: look at who wrote it
        observed = await self._call("GET", self._path, budget=budget())
        holder = holder_of(_spec_of(observed))
        if holder != self.identity:
            return holder
        sent = self._clock()
        return _Written(await self._call("PUT", self._path, body=rewrite(observed), budget=budget()), sent)

    # --- helpers ---------------------------------------------------------------------------------------------------

    def _claim(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        """The record naming us, with this Lease's labels (a shard Lease claimed from another count is relabelled)."""
        claimed = claimed_lease(
            lease, identity=self.identity, lease_duration=self._settings.lease_duration, now=self._wall_clock()
        )
        if self._labels:
            metadata = claimed.setdefault("metadata", {})
            metadata["labels"] = {**(metadata.get("labels") or {}), **self._labels}
        return claimed

    async def _call(self, method: str, path: str, *, body: object | None = None, budget: float) -> dict[str, Any]:
        if budget <= 0:
            raise TimeoutError(f"{method} {path}: no time left before the renew deadline")
        async with asyncio.timeout(budget):
            return await self._api.request(method, path, body=body)

    def _wrote(self, written: _Written) -> None:
        self._lease = written.lease
        self.fence.renewed(sent=written.sent, renew_deadline=self._settings.renew_deadline)
        if self._failures.succeeded():
            log.info("%s: Lease calls work again", self._where)
        self._sighting = Sighting(_spec_of(written.lease), self._clock())

    def _forget(self) -> None:
        """The Lease is not ours any more (released, taken, deleted): nothing left to release."""
        self._claimed = False
        self._lease = None

    def _log_failure(self, action: str, error: BaseException) -> None:
        text = str(error) or "timed out"
        report = self._failures.failed(f"{action}: {text}")
        log.log(report.level, "%s of %s failed: %s%s", action, self._where, text, report.suffix)
