"""metav1.Condition bookkeeping: one entry per type, and a transition time that only moves when the status does.

Why it matters: ``lastTransitionTime`` answers "since when is this WebServer not Ready?". If it were refreshed on every
reconcile it would be useless, and every reconcile would also rewrite the status (writes in steady state). So, as in
``k8s.io/apimachinery/pkg/api/meta.SetStatusCondition``: a new type gets ``now``; a changed status gets ``now``; a
changed reason, message or observedGeneration is updated in place and keeps the old time. Timestamps are RFC 3339 in
UTC with second precision (``2024-05-01T12:00:00Z``), the form the API server itself writes for metav1.Time.

Called by ``reconcile.status`` and the reconciler's invalid-spec path; hands on the new conditions list.
"""

import re
from datetime import UTC, datetime
from typing import Any

from webserver_operator.api.models import CONDITION_REASON_PATTERN

__all__ = ["ConditionDict", "find_condition", "format_time", "parse_time", "set_condition"]

ConditionDict = dict[str, Any]

_STATUSES = ("True", "False", "Unknown")
_REASON = re.compile(CONDITION_REASON_PATTERN)


def format_time(moment: datetime) -> str:
    """``moment`` as an RFC 3339 UTC timestamp with second precision; naive datetimes are refused (ambiguous)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: pass a timezone-aware one, e.g. datetime.now(UTC)")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | datetime) -> datetime:
    """A timestamp as an aware UTC datetime truncated to the second (naive values are taken as UTC)."""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(microsecond=0)


def find_condition(conditions: list[ConditionDict] | None, condition_type: str) -> ConditionDict | None:
    """The condition of ``condition_type`` in ``conditions``, or None."""
    return next((c for c in conditions or [] if c.get("type") == condition_type), None)


def set_condition(
    conditions: list[ConditionDict] | None,
    *,
    type: str,  # the metav1.Condition field name, as callers spell it
    status: str,
    reason: str,
    message: str,
    observed_generation: int,
    now: datetime,
) -> list[ConditionDict]:
    """A new list with the condition of ``type`` set (the input is not modified).

    ``lastTransitionTime`` becomes ``now`` only when the condition is new or its status changes. Raises ValueError for
    a status other than True/False/Unknown or a reason the CRD schema would reject (CamelCase, no spaces).
    """
    if status not in _STATUSES:
        raise ValueError(f"condition status {status!r} must be one of {', '.join(_STATUSES)}")
    if not _REASON.fullmatch(reason):
        raise ValueError(f"condition reason {reason!r} must be CamelCase ({CONDITION_REASON_PATTERN})")
    # A condition holds only strings and numbers: copying each dict copies it whole, at a fraction of deepcopy's cost
    # (this runs three times per status computed, for every WebServer event).
    result = [dict(condition) for condition in conditions or []]
    existing = find_condition(result, type)
    if existing is None or existing.get("status") != status or not existing.get("lastTransitionTime"):
        transition = format_time(now)
    else:
        transition = str(existing["lastTransitionTime"])
    updated: ConditionDict = {
        "type": type,
        "status": status,
        "observedGeneration": observed_generation,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    }
    if existing is None:
        result.append(updated)
    else:
        result[result.index(existing)] = updated
    return result
