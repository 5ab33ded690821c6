"""Kubernetes resource quantities as exact decimals, so that equal amounts compare equal.

Why: the API server stores quantities in canonical form (``0.5`` -> ``500m``, ``1073741824`` -> ``1Gi``,
``1000m`` -> ``1``), so the value read back from a Deployment is often not the string the WebServer holds. Comparing
strings would see drift on every reconcile and write forever; comparing parsed amounts does not.

The grammar is the one of ``k8s.io/apimachinery/pkg/api/resource``::

    <quantity>     ::= <signedNumber><suffix>
    <suffix>       ::= <binarySI> | <decimalSI> | <decimalExponent>
    <binarySI>     ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>    ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= e <signedInteger> | E <signedInteger>
    <signedNumber> ::= [+|-] (<digits> | <digits>.<digits> | <digits>. | .<digits>)

``decimal.Decimal`` is exact for all of these (no float rounding: ``0.1`` cpu is exactly ``100m``).

Called by ``reconcile.owned`` to compare resources; hands on exact decimal amounts.
"""

import decimal
import re

__all__ = ["MILLI", "parse_quantity", "quantities_equal"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>[KMGTPE]i)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))"
)

# Enough digits for the largest and smallest amounts the grammar can express, so no result is ever rounded.
_CONTEXT = decimal.Context(prec=100, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_NANO = decimal.Decimal("1e-9")
"""The finest amount any quantity keeps (``resource.ParseQuantity``)."""
MILLI = decimal.Decimal("1e-3")
"""The finest amount a pod's resource list keeps (``SetDefaults_ResourceList``)."""
_MAX_INT64 = decimal.Decimal(2**63 - 1)


def parse_quantity(q: int | str) -> decimal.Decimal:
    """The exact amount a quantity stands for (``"250m"`` -> ``Decimal("0.250")``, ``"1Ki"`` -> ``1024``).

    Raises ValueError for anything that is not a Kubernetes quantity, naming the value and the expected form.
    """
    if isinstance(q, bool) or not isinstance(q, int | str):
        raise ValueError(f"invalid quantity {q!r}: expected an integer or a string such as '250m' or '128Mi'")
    if isinstance(q, int):
        return decimal.Decimal(q)
    match = _QUANTITY.fullmatch(q)
    if match is None:
        raise ValueError(
            f"invalid quantity {q!r}: expected a number with an optional suffix, e.g. '1', '0.5', '250m', '128Mi', "
            "'1G' or '1e3' (suffixes: Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e<exponent>)"
        )
    number = decimal.Decimal(match["number"])
    try:
        if match["binary"] is not None:
            return _CONTEXT.multiply(number, decimal.Decimal(_BINARY[match["binary"]]))
        exponent = int(match["exponent"]) if match["exponent"] is not None else _DECIMAL_EXPONENT[match["decimal"]]
        return _CONTEXT.scaleb(number, exponent)
    except decimal.DecimalException as exc:
        raise ValueError(f"invalid quantity {q!r}: exponent out of range") from exc


def _stored_amount(q: int | str, *, resolution: decimal.Decimal = _NANO) -> decimal.Decimal:
    """The amount the API server stores for ``q``: what an object read back holds after ``q`` was written.

    As ``resource.ParseQuantity`` in k8s.io/apimachinery: a non-zero amount finer than ``resolution`` is rounded up
    (away from zero) to it, so ``0.5n`` is stored as ``1n``; an amount with a binary suffix (``Ki`` ... ``Ei``) above
    2^63-1 is capped there. A ResourceList in a pod template is also defaulted to ``MILLI``
    (``SetDefaults_ResourceList`` rounds every value up to milli scale): ``0.5n`` cpu comes back as ``1m``.
    """
    amount = parse_quantity(q)
    magnitude = abs(amount)
    exponent = magnitude.as_tuple().exponent
    finest = resolution.as_tuple().exponent
    if magnitude and isinstance(exponent, int) and isinstance(finest, int) and exponent < finest:
        magnitude = magnitude.quantize(resolution, rounding=decimal.ROUND_UP, context=_CONTEXT)
    if isinstance(q, str) and q.endswith(tuple(_BINARY)) and magnitude > _MAX_INT64:
        magnitude = _MAX_INT64
    return -magnitude if amount < 0 else magnitude


def quantities_equal(a: int | str, b: int | str, *, resolution: decimal.Decimal = _NANO) -> bool:
    """Whether two quantities are stored as the same amount (``"0.5"`` == ``"500m"``, ``"0.5n"`` == ``"1n"``).

    Compared the way the API server normalises (``_stored_amount``), so a value it rewrites never looks like drift.
    Values that do not parse (which the CRD schema and the API server both reject) compare by plain equality, so a
    comparison never raises.
    """
    try:
        return _stored_amount(a, resolution=resolution) == _stored_amount(b, resolution=resolution)
    except ValueError:
        return a == b
