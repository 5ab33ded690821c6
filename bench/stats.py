"""Percentiles and medians as the report uses them (linear interpolation, numpy's default), in one place."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values`` by linear interpolation; None for no values."""
    data = sorted(values)
    if not data:
        return None
    if len(data) == 1:
        return data[0]
    rank = (len(data) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


def median(values: Iterable[float | None]) -> float | None:
    data = [v for v in values if v is not None]
    return statistics.median(data) if data else None


def spread(values: Iterable[float], *, scale: float = 1.0, digits: int = 3) -> dict[str, float | None]:
    """p50, p99 and max of ``values`` times ``scale`` (e.g. 1000 for milliseconds), rounded."""
    data = [v * scale for v in values]

    def r(v: float | None) -> float | None:
        return None if v is None else round(v, digits)

    return {
        "count": len(data),
        "p50": r(percentile(data, 50)),
        "p99": r(percentile(data, 99)),
        "max": r(max(data) if data else None),
    }
