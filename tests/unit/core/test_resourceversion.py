"""resourceVersion order as KEP-5504 defines it (client-go's ``CompareResourceVersion``), and where there is none."""

from __future__ import annotations

import pytest

from webserver_operator.core.resourceversion import compare


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [
        ("9", "10", -1),  # by length first: not the string order
        ("10", "9", 1),
        ("2597", "2597", 0),
        ("2597", "2598", -1),
        ("123456789012345678901234567890", "123456789012345678901234567889", 1),  # no size limit
    ],
)
def test_versions_of_one_resource_are_ordered_as_integers(a: str, b: str, order: int) -> None:
    assert compare(a, b) == order


@pytest.mark.parametrize("odd", ["", "0", "007", "12a", "-5", "1.5", "١٢"])
def test_a_version_that_is_not_a_positive_decimal_without_leading_zeros_cannot_be_ordered(odd: str) -> None:
    assert compare(odd, "5") is None
    assert compare("5", odd) is None
