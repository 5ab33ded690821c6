"""Why a WebServer is not Ready when only a person can fix it: one raisable type, and the API answers that become one.

Why one type: a foreign object in the way, a child the API server rejects (422) or refuses (403), a selector that
cannot change: each is found deep in the child sync, must stop that child, and ends up in the same three places: the
``Ready`` condition (``reason``, ``message``), a Warning Event (``event_reason``, usually the same word) and a slow
requeue. ``Problem`` carries exactly that and is raised where it is found; ``reconcile.reconciler`` catches it,
``reconcile.status`` turns it into the condition and ``reconcile.events`` into the Event.

``from_api_error`` is the one place where an HTTP error on a child becomes words a person can act on; errors it does
not map (409 from a stale cache, 404 after a concurrent delete, 5xx, transport errors) propagate, and the work
queue retries them with backoff.

Raised inside ``reconcile.reconciler``; read by ``reconcile.status`` and ``reconcile.events``.
"""

from __future__ import annotations

from webserver_operator.core.backoff import BackoffPolicy
from webserver_operator.kube.errors import ApiError, Forbidden, Invalid, ServerError

__all__ = ["GARBAGE_COLLECTION", "GC_PATIENCE", "Problem", "from_api_error"]

#: A problem only a person can fix is re-checked slowly (15 s doubling to 5 min): the cause may clear without any
#: event we watch (the foreign object is deleted, a permission is granted).
_NEEDS_A_PERSON = BackoffPolicy(base=15.0, cap=300.0)
#: A nodePort held by a Service we do not watch (label-filtered cache): freed without any event we see, so looked
#: at again within seconds.
_PORT_TAKEN = BackoffPolicy(base=5.0, cap=30.0)
#: Children of a deleted WebServer of the same name: the garbage collector removes them within seconds.
GARBAGE_COLLECTION = BackoffPolicy(base=1.0, cap=2.0)
#: Quick rechecks of such children before waiting becomes a problem for a person (about a minute at the cap).
GC_PATIENCE = 40


class Problem(Exception):
    """A reason the WebServer cannot progress without a person: becomes Ready=False, a Warning Event and a requeue.

    ``reason`` is CamelCase (``ServiceConflict``); ``message`` says what is wrong and what to do; ``event_reason``
    defaults to ``reason``. ``stalled`` is False for a wait that clears by itself (no Warning Event, kstatus
    Reconciling instead of Stalled); ``recheck`` is how soon to look again.
    """

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        event_reason: str | None = None,
        stalled: bool = True,
        recheck: BackoffPolicy = _NEEDS_A_PERSON,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.event_reason = event_reason or reason
        self.stalled = stalled
        self.recheck = recheck

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Problem):
            return NotImplemented
        return (self.reason, self.message, self.event_reason) == (other.reason, other.message, other.event_reason)

    def __hash__(self) -> int:
        return hash((self.reason, self.message, self.event_reason))

    def __repr__(self) -> str:
        return f"Problem({self.reason!r}, {self.message!r})"


def from_api_error(err: ApiError, *, kind: str, name: str, verb: str) -> Problem | None:
    """The problem a rejected create or update of a child means, or None when retrying may help.

    422 Invalid: the API server rejected what the WebServer asks for (fix the spec). 403 Forbidden: missing RBAC, a
    terminating namespace, an admission or quota denial; the API's own message names the missing permission. 500
    "range is full" on a Service create: the cluster has no free nodePort (2768 in the default range) or cluster IP.
    The API server reports that as an internal error, but it is not a failing server and retrying soon cannot help:
    a person frees ports or widens the range; a deleted managed Service wakes the waiting WebServers at once.
    """
    if isinstance(err, ServerError) and kind == "Service" and "range is full" in err.message:
        what, flag = (
            ("nodePort", "--service-node-port-range")
            if "nodePort" in err.message
            else ("Service IP address", "--service-cluster-ip-range")
        )
        return Problem(
            "ServiceRangeFull",
            f"cannot create Service {name}: the API server answered {err.message!r}: the cluster has no free {what} "
            f"left. Delete Services that are no longer needed, or ask the cluster's administrator to widen "
            f"kube-apiserver's {flag}",
        )
    if isinstance(err, Invalid):
        if verb == "create":
            message = f"the API server rejected {kind} {name}: {err.message}; fix the WebServer's spec"
        else:
            message = f"the API server rejected the {kind} update: {err.message}"
        port_taken = kind == "Service" and "already allocated" in err.message
        return Problem(f"{kind}Invalid", message, recheck=_PORT_TAKEN if port_taken else _NEEDS_A_PERSON)
    if isinstance(err, Forbidden):
        return Problem(f"{kind}Forbidden", f"cannot {verb} {kind} {name}: {err}")
    return None
