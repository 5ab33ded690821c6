"""Conditions: metav1 semantics for lastTransitionTime, one entry per type."""

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from webserver_operator.reconcile.conditions import find_condition, format_time, parse_time, set_condition

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def ready(status: str, reason: str = "Available", message: str = "ok", generation: int = 1) -> dict[str, Any]:
    return {
        "type": "Ready",
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": "2024-05-01T12:00:00Z",
        "reason": reason,
        "message": message,
    }


def test_new_condition_gets_now() -> None:
    assert set_condition(
        [], type="Ready", status="True", reason="Available", message="ok", observed_generation=1, now=T0
    ) == [ready("True")]


def test_same_status_keeps_the_transition_time_and_updates_the_rest() -> None:
    result = set_condition(
        [ready("False", reason="Scaling", message="1/3")],
        type="Ready",
        status="False",
        reason="RollingOut",
        message="2/3",
        observed_generation=2,
        now=T1,
    )
    assert result == [ready("False", reason="RollingOut", message="2/3", generation=2)]


def test_status_change_moves_the_transition_time() -> None:
    (cond,) = set_condition(
        [ready("False")], type="Ready", status="True", reason="Available", message="ok", observed_generation=1, now=T1
    )
    assert cond["lastTransitionTime"] == "2024-05-01T12:05:00Z"


def test_other_types_and_order_are_kept_and_input_not_modified() -> None:
    other = {"type": "Degraded", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "No"}
    conditions = [other, ready("True")]
    snapshot = copy.deepcopy(conditions)
    result = set_condition(
        conditions, type="Ready", status="False", reason="Scaling", message="m", observed_generation=3, now=T1
    )
    assert conditions == snapshot
    assert result[0] == other
    assert result[1]["status"] == "False"
    assert len(result) == 2


def test_missing_transition_time_is_filled() -> None:
    broken = ready("True")
    del broken["lastTransitionTime"]
    (cond,) = set_condition(
        [broken], type="Ready", status="True", reason="Available", message="ok", observed_generation=1, now=T0
    )
    assert cond["lastTransitionTime"] == "2024-05-01T12:00:00Z"


@pytest.mark.parametrize(
    ("status", "reason", "match"),
    [("Yes", "Available", "status"), ("True", "Not ready", "reason"), ("True", "", "reason"), ("True", "9x", "reason")],
)
def test_invalid_status_or_reason(status: str, reason: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        set_condition([], type="Ready", status=status, reason=reason, message="", observed_generation=1, now=T0)


def test_find_condition() -> None:
    assert find_condition([ready("True")], "Ready") == ready("True")
    assert find_condition([ready("True")], "Other") is None
    assert find_condition(None, "Ready") is None


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (T0, "2024-05-01T12:00:00Z"),
        (datetime(2024, 5, 1, 14, 0, 0, tzinfo=timezone(timedelta(hours=2))), "2024-05-01T12:00:00Z"),
    ],
)
def test_format_time(moment: datetime, text: str) -> None:
    assert format_time(moment) == text


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        format_time(datetime(2024, 5, 1))
    with pytest.raises(ValueError, match="naive"):
        set_condition(
            [], type="Ready", status="True", reason="A", message="", observed_generation=1, now=datetime(2024, 5, 1)
        )


@pytest.mark.parametrize(
    "text", ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00.999+00:00", "2024-05-01T14:00:00+02:00", T0]
)
def test_parse_time(text: str | datetime) -> None:
    assert parse_time(text) == datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
