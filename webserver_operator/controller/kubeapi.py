"""What the controller layer needs from ``webserver_operator.kube``, as structural types, plus error classification.

Why Protocols: the informer only needs ``request``/``watch`` and a resource's paths, so it is typed against that
shape; the real ``kube.client.Kube`` satisfies it, and so does the scripted fake the unit tests use. The error
*classes* are the kube layer's own, because the informer's recovery depends on what went wrong:

* 410 Gone (or an ERROR event with code 410 / reason Expired): our resourceVersion left the watch window -> relist.
* 403 / 404: RBAC missing or CRD not installed -> say so clearly, retry slowly; a person has to act.
* anything else (transport errors, 429, 5xx, odd 4xx): transient -> back off and resume from the last resourceVersion.
"""

import contextlib
import enum
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from webserver_operator.kube.errors import ApiError


class ResourceRef(Protocol):
    """The part of ``kube.resources.Resource`` the controller uses."""

    @property
    def plural(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def namespaced(self) -> bool: ...

    @property
    def api_version(self) -> str: ...

    def path(self, *, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str: ...


class KubeApi(Protocol):
    """The part of ``kube.client.Kube`` the informer uses."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]: ...

    def watch(
        self, path: str, *, query: Mapping[str, str]
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[dict[str, Any]]]:
        """Open a watch: ``async with kube.watch(...) as events: async for event in events``.

        Opening raises ``ApiError`` (e.g. 410, 403) or ``TransportError``; iterating raises ``TransportError`` and
        ends normally when the server closes the stream at ``timeoutSeconds``.
        """
        ...


class Failure(enum.StrEnum):
    """How the informer reacts to an error; the value is the ``reason`` label of the watch-restart metric."""

    GONE = "expired"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    TRANSIENT = "error"


class WatchErrorEvent(Exception):  # noqa: N818 - named after the watch event type
    """A watch ERROR event, raised so it is handled like the equivalent HTTP error. ``status`` is the metav1.Status."""

    def __init__(self, status: Mapping[str, Any]) -> None:
        super().__init__(f"watch ERROR event: {status.get('code')} {status.get('reason')}: {status.get('message')}")
        self.status = dict(status)


def classify(exc: BaseException) -> Failure:
    if isinstance(exc, WatchErrorEvent):
        return classify_status(exc.status)
    if isinstance(exc, ApiError):
        return classify_code(exc.status)
    # TransportError, timeouts, decoding errors, bugs: all retried with backoff.
    return Failure.TRANSIENT


def classify_code(code: int | None) -> Failure:
    if code == 410:
        return Failure.GONE
    if code == 403:
        return Failure.FORBIDDEN
    if code == 404:
        return Failure.NOT_FOUND
    return Failure.TRANSIENT


def classify_status(status: Mapping[str, Any]) -> Failure:
    """Classify the ``metav1.Status`` carried by a watch ERROR event."""
    if status.get("reason") in ("Expired", "Gone"):
        return Failure.GONE
    code = status.get("code")
    return classify_code(code if isinstance(code, int) else None)
