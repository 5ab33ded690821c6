"""Structured logging: one line per event, JSON (for log pipelines) or text (for people), same fields either way.

Why the standard ``logging`` module with a formatter rather than a logging library: every module logs through
``logging.getLogger(__name__)`` with ``extra={...}`` fields (namespace, name, result, duration...), and only this
module decides how a record looks. Fields that could carry credentials are never passed to a logger in the first
place (the kube layer logs methods, paths and API messages, never headers or bodies); as a second line of defence the
formatter masks anything shaped like a bearer token.

Why orjson and no process or thread fields: a bulk create writes a line per created child, and the standard
library's ``json`` and ``LogRecord``'s ``os.getpid``/thread lookups were 5% of the operator's CPU in a profiled bulk
create of 1000 WebServers (bench/README.md). No line carries a process or thread, so ``configure_logging`` tells
``logging`` not to collect them, and lines are encoded by orjson (the standard library's ``json`` for the values
orjson refuses, as in ``kube.jsoncodec``).

Called by ``cli`` once at start; every module's ``logging`` calls go through it.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from webserver_operator.runtime.controller import logcontext

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging"]

_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}
_TOKEN_RE = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")


def _redact(text: str) -> str:
    return _TOKEN_RE.sub(r"\1<redacted>", text)


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    """The record's own fields, under those of the reconcile it was written in (``runtime.controller.logcontext``)."""
    own = {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS and not k.startswith("_")}
    return {**logcontext.current(), **own}


def _dumps(entry: dict[str, Any]) -> str:
    """One compact JSON line; any value JSON cannot hold is written as its ``str``."""
    try:
        return orjson.dumps(entry, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # integers beyond 64 bits
        return json.dumps(entry, default=str, separators=(",", ":"), ensure_ascii=False)


class JsonFormatter(logging.Formatter):
    """``{"ts": ..., "level": ..., "logger": ..., "msg": ..., <extra fields>}`` on one line.

    Keyed like controller-runtime's JSON logs: ``namespace``, ``name`` (the object; ``object_name`` in code, because
    ``name`` is taken on a LogRecord) and, inside a reconcile, ``controller`` and ``reconcileID``.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": _redact(record.getMessage()),
        }
        extras = _extras(record)
        if "object_name" in extras:
            extras["name"] = extras.pop("object_name")
        entry.update(extras)
        if record.exc_info:
            entry["error"] = _redact(self.formatException(record.exc_info))
        return _dumps(entry)


class TextFormatter(logging.Formatter):
    """``2026-11-22T10:00:00.000Z INFO  logger: message key=value ...`` on one line (tracebacks indented below)."""

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        fields = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        line = f"{ts} {record.levelname:<7} {record.name}: {_redact(record.getMessage())}"
        if fields:
            line += f" {fields}"
        if record.exc_info:
            line += "\n  " + _redact(self.formatException(record.exc_info)).replace("\n", "\n  ")
        return line


def configure_logging(*, level: str, fmt: str) -> None:
    """Route every logger to stderr in the chosen format; quiet the chatty libraries below WARNING."""
    # What LogRecord would look up for every line and no formatter here prints (see the module docstring).
    logging.logProcesses = logging.logMultiprocessing = logging.logThreads = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("aiohttp.access", "kubernetes_asyncio", "urllib3", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
