"""The operator's own API error types, parsed from the Kubernetes ``Status`` body.

Why not kubernetes_asyncio's ``ApiException``: it only carries the raw body, and with ``_preload_content=False`` (which
we use everywhere) the library does not raise at all. Callers need to branch on *what* happened (404 vs 409
AlreadyExists vs 409 Conflict vs 410 Expired) without string matching, and people need a message that says what to do.
So every HTTP failure becomes an ``ApiError`` subclass chosen by status code, carrying the Status ``reason`` and the
API server's ``message`` verbatim; ``str(err)`` adds the request, and a hint a person can act on.

Connection-level failures (refused, reset, TLS, timeouts) have no HTTP status and become ``TransportError``; both
share the ``KubeError`` base so a caller can catch "the API call failed" in one clause. ``ConfigurationError`` is for
kubeconfig / in-cluster setup problems found before any request is made.

Nothing here includes request headers or bodies: they can hold bearer tokens and Secret data.

Raised by ``kube.client`` (and the informer, for watch ERROR events); caught by type in ``runtime``, ``reconcile`` and
``runtime.leases.lease``.
"""

from __future__ import annotations

import email.utils
import http
import json
import math
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from webserver_operator.kube.paths import parse_path, rbac_verb

__all__ = [
    "ApiError",
    "ConfigurationError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeError",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "WritesStopped",
    "api_error_from_response",
    "api_error_from_status",
    "bounded_delay",
    "parse_retry_after",
]

# A non-Status error body (an HTML page from a proxy, say) is quoted up to this many characters.
_MAX_RAW_MESSAGE = 300
#: Longest server-requested delay an ``ApiError`` carries (its ``retry_after``); the callers cap it lower still
#: (``kube.retry``, the work queue). A bound here means no caller ever sees NaN, an infinity or a number that
#: overflows a float (``asyncio.sleep(nan)`` never returns; ``float(10**400)`` raises ``OverflowError``).
MAX_RETRY_AFTER = 3600.0


def bounded_delay(value: object) -> float | None:
    """``value`` (from a header or a Status body) as seconds in [0, ``MAX_RETRY_AFTER``]; ``None`` when not a number.

    NaN and non-numbers are ``None`` (no hint: the caller's own backoff applies); infinities and huge integers are
    clamped without converting them to a float first.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return float(min(max(value, 0), int(MAX_RETRY_AFTER)))
    if math.isnan(value):
        return None
    return min(max(value, 0.0), MAX_RETRY_AFTER)


class ConfigurationError(Exception):
    """No usable kubeconfig / in-cluster configuration; the message says what to set."""


class KubeError(Exception):
    """Base of every failure of a request to the API server."""

    method: str
    path: str
    #: How many attempts were made before giving up (set by the retry loop; 1 when not retried).
    attempts: int = 1

    @property
    def retriable(self) -> bool:
        """Whether repeating the same request may succeed (429, 5xx, transport errors)."""
        return False

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses have keyword-only constructors: rebuild from state so copy/pickle work.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[KubeError], args: tuple[Any, ...], state: dict[str, Any]) -> KubeError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class ApiError(KubeError):
    """The API server answered with an HTTP error status."""

    #: Fallback hint for statuses without a dedicated subclass.
    hint: ClassVar[str] = ""

    def __init__(
        self,
        *,
        status: int,
        reason: str,
        message: str,
        method: str,
        path: str,
        retry_after: float | None = None,
        details: Mapping[str, Any] | None = None,
        verb: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.method = method.upper()
        self.path = path
        self.retry_after = bounded_delay(retry_after)
        self.details: Mapping[str, Any] = details or {}
        #: The RBAC verb of the request (get, list, watch, create, update, patch, delete, deletecollection).
        self.verb = verb or rbac_verb(self.method, path)

    def action_hint(self) -> str:
        """What a person can do about it; subclasses specialise."""
        return self.hint

    def __str__(self) -> str:
        attempts = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        text = f"{self.method} {self.path} failed{attempts} with HTTP {self.status} {self.reason}: {self.message}"
        hint = self.action_hint()
        return f"{text.rstrip('.')}. {hint}" if hint else text

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, reason={self.reason!r}, {self.method} {self.path})"


class NotFound(ApiError):
    hint = (
        "The object does not exist (deleted meanwhile?) or its API is not served: "
        "if the resource is defined by a CustomResourceDefinition, install that CRD."
    )


class Conflict(ApiError):
    @property
    def already_exists(self) -> bool:
        """409 from a create: an object with that name exists (ours not yet in the cache, or a foreign one)."""
        return self.reason == "AlreadyExists"

    def action_hint(self) -> str:
        if self.already_exists:
            return "An object with this name already exists; the operator never overwrites objects it does not own."
        return "The object changed since it was read; it is re-read and the change retried on the next reconcile."


class Gone(ApiError):
    hint = "The requested resourceVersion is too old (compacted); list again and watch from the new resourceVersion."


class Invalid(ApiError):
    hint = "The API server rejected the object; fix the fields named above."


class Forbidden(ApiError):
    def action_hint(self) -> str:
        if "cannot" not in self.message:
            # Not an RBAC denial: e.g. "unable to create new content in namespace x because it is being terminated".
            return "The API server refused the request for the reason above."
        info = parse_path(self.path)
        if info is None:
            return "Grant the operator's ServiceAccount access to this path (see the chart's RBAC)."
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        group = info.group or '"" (core)'
        return (
            f'Grant the operator\'s ServiceAccount "{self.verb}" on resource "{resource}" in API group {group}'
            " (see the chart's RBAC)."
        )


class Unauthorized(ApiError):
    hint = (
        "The API server did not accept the operator's credentials: check the kubeconfig user, or in a cluster the "
        "ServiceAccount token mount (it is re-read from its file every minute)."
    )


class TooManyRequests(ApiError):
    hint = "The API server is throttling the operator (API priority and fairness); it asks again after Retry-After."

    @property
    def retriable(self) -> bool:
        return True


_RETRIABLE_5XX = frozenset({500, 502, 503, 504})


class ServerError(ApiError):
    hint = "The API server (or a proxy in front of it) failed; check its health. The request will be retried later."

    @property
    def retriable(self) -> bool:
        return self.status in _RETRIABLE_5XX


class WritesStopped(KubeError):
    """A write refused before it left the process: this replica may no longer write (it lost its leader Lease)."""

    def __init__(self, *, method: str, path: str, why: str) -> None:
        super().__init__(why)
        self.method = method.upper()
        self.path = path
        self.why = why

    def __str__(self) -> str:
        return f"{self.method} {self.path} not sent: {self.why}"


class TransportError(KubeError):
    """No HTTP answer: connection refused/reset, TLS failure, connect or read timeout, truncated stream."""

    def __init__(self, *, method: str, path: str, cause: str, host: str = "", retriable: bool = True) -> None:
        super().__init__(cause)
        self.method = method.upper()
        self.path = path
        self.cause = cause
        self.host = host
        self._retriable = retriable

    @property
    def retriable(self) -> bool:
        return self._retriable

    def __str__(self) -> str:
        attempts = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        where = f" at {self.host}" if self.host else ""
        return (
            f"{self.method} {self.path} failed{attempts}: no answer from the API server{where}: {self.cause}. "
            "Check that the server address in the kubeconfig / KUBERNETES_SERVICE_HOST is reachable from here "
            "(network policy, proxy, certificate authority)."
        )


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def _error_class(status: int) -> type[ApiError]:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else ApiError


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds: delta-seconds (what the API server sends) or an HTTP date; ``None`` if absent/bad.

    Bounded by ``bounded_delay``: never negative, NaN, infinite or above ``MAX_RETRY_AFTER``.
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return bounded_delay(seconds)


def _default_reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase.replace(" ", "").replace("-", "")
    except ValueError:
        return "Unknown"


def api_error_from_response(
    status: int,
    body: bytes,
    *,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    verb: str | None = None,
) -> ApiError:
    """Build the ``ApiError`` subclass for an HTTP error answer.

    Uses the ``Status`` object's ``reason``/``message``/``details`` when the body is one; otherwise quotes the start of
    the body (proxies answer with HTML/text). ``Retry-After`` comes from the header, else ``details.retryAfterSeconds``.
    """
    try:
        decoded: Any = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        return api_error_from_status(
            decoded,
            status=status,
            method=method,
            path=path,
            retry_after=parse_retry_after(_header(headers, "Retry-After")),
            verb=verb,
        )
    message = ""
    if body:
        text = body.decode("utf-8", errors="replace").strip()
        message = text if len(text) <= _MAX_RAW_MESSAGE else text[:_MAX_RAW_MESSAGE] + "..."
    return api_error_from_status(
        {"message": message},
        status=status,
        method=method,
        path=path,
        retry_after=parse_retry_after(_header(headers, "Retry-After")),
        verb=verb,
    )


def api_error_from_status(
    status_object: Mapping[str, Any],
    *,
    status: int | None = None,
    method: str,
    path: str,
    retry_after: float | None = None,
    verb: str | None = None,
) -> ApiError:
    """Build the ``ApiError`` subclass a ``metav1.Status`` describes: an HTTP error body or a watch ``ERROR`` event.

    ``status`` is the HTTP status when there is one; a watch ``ERROR`` event has only the Status' own ``code`` (a
    missing code with reason ``Expired``/``Gone`` is a 410, as the API server means it).
    """
    reason_field = status_object.get("reason")
    code = status if status is not None else status_object.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        code = 410 if reason_field in ("Expired", "Gone") else 500
    reason = str(reason_field or _default_reason(code))
    message = str(status_object.get("message") or "")
    if not message:
        message = f"the API server answered {code} {reason} without an explanation"
    raw_details = status_object.get("details")
    details: Mapping[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    if retry_after is None:
        retry_after = bounded_delay(details.get("retryAfterSeconds"))
    return _error_class(code)(
        status=code,
        reason=reason,
        message=message,
        method=method,
        path=path,
        retry_after=retry_after,
        details=details,
        verb=verb,
    )


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, val in headers.items():
        if key.lower() == lowered:
            return val
    return None
