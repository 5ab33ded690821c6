"""Client settings: timeouts, retry budget and client-side rate limit of the one shared API client.

Why these defaults: kubernetes_asyncio sets *no* timeout by default (a half-open TCP connection hangs a reconcile
forever), and a single-number timeout is a *total* timeout that kills healthy long watches. So every request gets a
connect timeout plus a per-read (socket idle) timeout, and watches get a read timeout longer than the server-side
``timeoutSeconds`` the informer passes (<= 300 s): a healthy watch is always ended by the server first (or kept alive
by bookmarks), a dead one is detected by the client within ``watch_read_timeout``.

A frozen dataclass, not pydantic: the manager maps its pydantic-settings onto this; the kube layer stays dependency
free and its values are validated here once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from webserver_operator import __version__

__all__ = ["DEFAULT_USER_AGENT", "ClientSettings"]

DEFAULT_USER_AGENT = f"webserver-operator/{__version__}"


@dataclass(frozen=True)
class ClientSettings:
    #: Seconds to establish the TCP+TLS connection.
    connect_timeout: float = 10.0
    #: Seconds the server may stay silent while answering a normal request (socket read timeout, not total).
    read_timeout: float = 30.0
    #: Socket read timeout of watch streams; must exceed the ``timeoutSeconds`` passed to the server (<= 300).
    watch_read_timeout: float = 330.0
    #: Retries after the first attempt for 429, 500/502/503/504 and transport errors.
    max_retries: int = 5
    #: First backoff delay in seconds; doubles per retry, with jitter, capped at ``backoff_cap``.
    backoff_base: float = 0.2
    backoff_cap: float = 30.0
    #: Client-side token bucket: sustained requests per second (``None`` = no client-side limit) and burst size.
    qps: float | None = None
    burst: int = 0
    user_agent: str = field(default=DEFAULT_USER_AGENT)

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout", "watch_read_timeout", "backoff_cap"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"ClientSettings.{name} must be a positive number of seconds, got {value!r}")
        if not (math.isfinite(self.backoff_base) and self.backoff_base >= 0):
            raise ValueError(f"ClientSettings.backoff_base must be >= 0, got {self.backoff_base!r}")
        if self.max_retries < 0:
            raise ValueError(f"ClientSettings.max_retries must be >= 0, got {self.max_retries!r}")
        if self.qps is not None and not (math.isfinite(self.qps) and self.qps > 0):
            raise ValueError(f"ClientSettings.qps must be > 0 or None (no limit), got {self.qps!r}")
        if self.burst < 0:
            raise ValueError(f"ClientSettings.burst must be >= 0, got {self.burst!r}")
        if not self.user_agent:
            raise ValueError("ClientSettings.user_agent must not be empty")
