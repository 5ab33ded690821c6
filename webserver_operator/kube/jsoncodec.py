"""JSON to and from the API server: orjson, with the standard library for the rare input orjson refuses.

Why: every watch event, list page and answer the operator reads is decoded here, and every request body encoded;
in a profiled bulk create the standard library's ``json`` took 4-6% of the operator's CPU, and orjson decodes the
same objects several times faster (``tests/unit/kube/test_jsoncodec.py`` holds the equivalence cases).

Where orjson and ``json`` differ, and why that is safe here:

- Integers beyond the 64-bit range: orjson decodes them as floats, ``json`` as exact ints. The API server itself
  decodes unstructured objects (custom resources included) with apimachinery's ``convertNumber``, which keeps an
  int64 and turns anything larger into a float64, so no answer of an API server holds a larger exact integer. A
  body the operator sends with one (it never builds one) is encoded by ``json`` instead of failing.
- Escapes of a lone UTF-16 surrogate (half of a pair), ``NaN`` and out-of-range floats: orjson refuses them, and
  ``json`` accepts them; such input is decoded by ``json`` (it is not JSON an API server writes, but refusing it
  would turn a decodable answer into an error).

Used by ``kube.client`` (answers and request bodies) and ``kube.stream`` (watch events); hands on plain dicts, lists
and scalars, exactly what ``json.loads`` would return for the same API-server output.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["decode", "encode"]


def decode(data: bytes | bytearray | memoryview | str) -> Any:
    """The value of the JSON document ``data``; ``ValueError`` (``json.JSONDecodeError``) when it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # Refused by orjson; the standard library accepts a little more (see the module docstring) or raises the
        # error message the callers already report.
        return json.loads(bytes(data) if isinstance(data, bytearray | memoryview) else data)


def encode(value: object) -> bytes:
    """``value`` as compact UTF-8 JSON (``TypeError`` for something JSON cannot hold, as ``json.dumps``)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        # orjson refuses integers beyond 64 bits and dict keys that are not strings; json encodes both.
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
