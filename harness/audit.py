"""The API server's audit log, read as the record of what each client really sent.

Why the audit log: it is written by the API server, so it counts requests that a client's own metrics might miss or
misattribute. It names the client (user agent, and the user: each chaos replica runs as its own ServiceAccount), the
token (``JTI``), the HTTP status (429s from API Priority and Fairness included) and, for Leases, the holder, renew
time and duration written (``hack/audit-policy.yaml`` records the Lease bodies of the audited ServiceAccounts).
Requests that never reached the API server (connection refused while it restarts) are not in it: the figures count
what the server had to absorb.

Long-running requests (watches) appear twice (ResponseStarted, ResponseComplete); they are counted once, by audit ID,
at the time the request was received. The file is read incrementally and survives API server restarts (the
restarted process appends to the same file).

Used by the chaos verdicts (who wrote what, when) and the benchmark (requests per operator, by user agent).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
READ_VERBS = frozenset({"get", "list"})


@dataclass(frozen=True)
class Request:
    audit_id: str
    received: float  # epoch seconds, requestReceivedTimestamp
    completed: float  # epoch seconds, stageTimestamp of the last stage seen
    user: str
    user_agent: str
    verb: str
    resource: str  # "deployments", "webservers/status", "leases", ...
    namespace: str
    name: str
    code: int  # 0 when no response was recorded (a watch cut off by a restart)
    jti: str
    lease_holder: str | None  # holderIdentity written by a successful Lease create/update
    uri: str = ""
    lease_renew_time: float | None = None  # spec.renewTime written by that Lease write (the writer's clock)
    lease_duration: float | None = None  # spec.leaseDurationSeconds written by that Lease write

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def parse_event(event: dict[str, Any]) -> Request:
    """One audit event (a decoded line of the log) as a ``Request``."""
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource") or "")
    if ref.get("subresource"):
        resource += "/" + str(ref["subresource"])
    user = event.get("user") or {}
    jti = ""
    for cred in (user.get("extra") or {}).get("authentication.kubernetes.io/credential-id") or []:
        if str(cred).startswith("JTI="):
            jti = str(cred)[4:]
    code = int((event.get("responseStatus") or {}).get("code") or 0)
    holder = None
    renew_time = duration = None
    if resource == "leases" and event.get("verb") in {"create", "update"} and 200 <= code < 300:
        spec = (event.get("responseObject") or {}).get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if spec.get("renewTime"):
            renew_time = _ts(str(spec["renewTime"]))
        if isinstance(spec.get("leaseDurationSeconds"), int):
            duration = float(spec["leaseDurationSeconds"])
    return Request(
        audit_id=str(event.get("auditID")),
        received=_ts(str(event["requestReceivedTimestamp"])),
        completed=_ts(str(event.get("stageTimestamp") or event["requestReceivedTimestamp"])),
        user=str(user.get("username") or ""),
        user_agent=str(event.get("userAgent") or ""),
        verb=str(event.get("verb") or ""),
        resource=resource,
        namespace=str(ref.get("namespace") or ""),
        name=str(ref.get("name") or ""),
        code=code,
        jti=jti,
        lease_holder=holder,
        uri=str(event.get("requestURI") or ""),
        lease_renew_time=renew_time,
        lease_duration=duration,
    )


def parse_line(line: str | bytes) -> Request | None:
    """The request of one audit log line; None for a line that is not a response stage (or not JSON)."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("stage") == "RequestReceived" or "auditID" not in event:
        return None
    return parse_event(event)


class AuditLog:
    """Incremental reader of the audit log.

    ``read()`` returns the requests first logged since the previous read (each audit ID once, at its first stage);
    ``requests(start, end)`` all those kept so far. ``users_prefix`` keeps only the requests of users whose name
    starts with it (the chaos replicas' ServiceAccounts); ``keep=False`` keeps no requests, only their audit IDs,
    for a reader that counts as it goes over hundreds of thousands of lines (the benchmark).
    """

    def __init__(self, path: Path, *, users_prefix: str = "", keep: bool = True) -> None:
        self.path = path
        self._prefix = users_prefix
        self._keep = keep
        self._offset = 0
        self._partial = b""
        self._seen: set[str] = set()
        self._by_id: dict[str, Request] = {}

    def read(self) -> list[Request]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
            self._offset = fh.tell()
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        new: list[Request] = []
        for raw in lines:
            if self._prefix and self._prefix.encode() not in raw:
                continue
            req = parse_line(raw)
            if req is None or not req.user.startswith(self._prefix):
                continue
            if req.audit_id not in self._seen:
                self._seen.add(req.audit_id)
                new.append(req)
            if self._keep:
                known = self._by_id.get(req.audit_id)
                if known is None or req.completed >= known.completed:
                    self._by_id[req.audit_id] = req
        return new

    def skip_to_end(self) -> None:
        """Forget what is logged so far: the next ``read()`` starts from here."""
        self.read()

    def refresh(self) -> None:
        self.read()

    def requests(self, start: float = 0.0, end: float = float("inf")) -> list[Request]:
        """Requests received in [start, end], oldest first (every one read so far, and whatever is new)."""
        self.refresh()
        found = [r for r in self._by_id.values() if start <= r.received <= end]
        found.sort(key=lambda r: r.received)
        return found


def by_agent(requests: Iterable[Request], prefixes: tuple[str, ...]) -> list[Request]:
    return [r for r in requests if r.user_agent.startswith(prefixes)]


def count(requests: Iterable[Request]) -> dict[str, int]:
    """Requests by ``verb resource`` (e.g. ``create deployments``), sorted by count."""
    counter = Counter(f"{r.verb} {r.resource}" for r in requests)
    return dict(counter.most_common())


def summary(requests: list[Request]) -> dict[str, object]:
    return {
        "total": len(requests),
        "writes": sum(1 for r in requests if r.is_write),
        "reads": sum(1 for r in requests if r.verb in READ_VERBS),
        "watches": sum(1 for r in requests if r.verb == "watch"),
        "by_verb_resource": count(requests),
    }
