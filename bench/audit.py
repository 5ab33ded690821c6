"""Requests as the API server recorded them: its audit log, read incrementally and attributed by user agent.

Why the audit log: it is the API server's own account of every request (the benchmark's cluster logs every verb on
WebServers, Deployments, Services and Events, see bench/audit-policy.yaml), with the client's user agent, so each
operator's requests are counted the same way whatever its own metrics say. A request is counted once, at its first
recorded stage (ResponseStarted for a watch, ResponseComplete otherwise), at the time the server received it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
READ_VERBS = frozenset({"get", "list"})


@dataclass(frozen=True)
class Request:
    time: float
    verb: str
    resource: str
    user_agent: str
    code: int

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def parse_line(line: str) -> tuple[str, Request] | None:
    """(auditID, request) of one audit log line; None for lines that are not a request's first response stage."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if event.get("stage") not in ("ResponseStarted", "ResponseComplete"):
        return None
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    return event["auditID"], Request(
        time=_epoch(event["requestReceivedTimestamp"]),
        verb=event.get("verb", ""),
        resource=resource,
        user_agent=event.get("userAgent", ""),
        code=int((event.get("responseStatus") or {}).get("code") or 0),
    )


class AuditLog:
    """Incremental reader: ``read()`` returns the requests logged since the previous call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._seen: set[str] = set()
        self._partial = ""

    def skip_to_end(self) -> None:
        self.read()

    def read(self) -> list[Request]:
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            fh.seek(self._offset)
            chunk = fh.read()
            self._offset = fh.tell()
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()
        out: list[Request] = []
        for line in lines:
            parsed = parse_line(line)
            if parsed is None:
                continue
            audit_id, request = parsed
            if audit_id in self._seen:
                continue
            self._seen.add(audit_id)
            out.append(request)
        return out


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
