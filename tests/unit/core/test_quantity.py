"""Quantities: the Kubernetes grammar, parsed exactly."""

from decimal import Decimal

import pytest

from webserver_operator.core.quantity import parse_quantity, quantities_equal


@pytest.mark.parametrize(
    ("quantity", "amount"),
    [
        (1, Decimal(1)),
        (0, Decimal(0)),
        ("1", Decimal(1)),
        ("0.5", Decimal("0.5")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("+2", Decimal(2)),
        ("-2", Decimal(-2)),
        ("500m", Decimal("0.5")),
        ("100n", Decimal("0.0000001")),
        ("3u", Decimal("0.000003")),
        ("1k", Decimal(1000)),
        ("2M", Decimal(2_000_000)),
        ("1G", Decimal(10**9)),
        ("1T", Decimal(10**12)),
        ("1P", Decimal(10**15)),
        ("1E", Decimal(10**18)),
        ("1Ki", Decimal(1024)),
        ("128Mi", Decimal(128 * 2**20)),
        ("1Gi", Decimal(2**30)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("1Ti", Decimal(2**40)),
        ("1Pi", Decimal(2**50)),
        ("1Ei", Decimal(2**60)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("12e+2", Decimal(1200)),
        ("5e-3", Decimal("0.005")),
        ("0.1", Decimal("0.1")),
    ],
)
def test_parse_quantity(quantity: int | str, amount: Decimal) -> None:
    assert parse_quantity(quantity) == amount


@pytest.mark.parametrize(
    "garbage",
    ["", " ", "abc", "1 ", " 1", "1K", "1mi", "1KiB", "1.2.3", "e3", "1e", "1e1.5", "1e+", "--1", "1m1", "0x10", "1,5"],
)
def test_garbage_is_rejected_with_a_clear_message(garbage: str) -> None:
    with pytest.raises(ValueError, match=r"invalid quantity .*expected"):
        parse_quantity(garbage)


@pytest.mark.parametrize("value", [True, 1.5, None, ["1"]])
def test_wrong_types_are_rejected(value: object) -> None:
    with pytest.raises(ValueError, match="expected an integer or a string"):
        parse_quantity(value)  # type: ignore[arg-type]


def test_absurd_exponent_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_quantity("1e99999999999999999999")


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("0.5", "500m", True),
        ("1Gi", 1073741824, True),
        ("1Gi", "1024Mi", True),
        ("1", 1, True),
        ("1000m", "1", True),
        ("1k", "1e3", True),
        ("1G", "1Gi", False),
        ("100m", "0.01", False),
        ("1", "2", False),
        ("bogus", "bogus", True),
        ("bogus", "1", False),
    ],
)
def test_quantities_equal(a: int | str, b: int | str, equal: bool) -> None:
    assert quantities_equal(a, b) is equal
    assert quantities_equal(b, a) is equal


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("0.5n", "1n"),  # finer than a nano: rounded up, as the API server stores it
        ("1.0000000001", "1000000001n"),
        ("-0.5n", "-1n"),
        ("16Ei", 2**63 - 1),  # binary suffix above int64: capped
        ("0", "0"),
    ],
)
def test_compared_as_the_api_server_stores_them(written: str, stored: str | int) -> None:
    assert quantities_equal(written, stored)


def test_decimal_suffixes_are_not_capped() -> None:
    assert not quantities_equal("16E", 2**63 - 1)
