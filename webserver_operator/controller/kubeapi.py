"""What the controller layer needs from ``webserver_operator.kube``, as structural types, plus error classification.

Why Protocols: the informer only needs ``request``/``watch`` and a resource's paths, so it is typed against that
shape; the real ``kube.client.Kube`` satisfies it, and so does the scripted fake the unit tests use. The error
*classes* are the kube layer's own, because the informer's recovery depends on what went wrong:

* 410 Gone (or an ERROR event with code 410 / reason Expired): our resourceVersion left the watch window -> relist.
* 403 / 404: RBAC missing or CRD not installed -> say so clearly, retry slowly; a person has to act.
* anything else (transport errors, 429, 5xx, odd 4xx): transient -> back off and resume from the last resourceVersion.
"""

import enum
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from webserver_operator.kube.errors import ApiError, TransportError


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

    def watch(self, path: str, *, query: Mapping[str, str]) -> AsyncIterator[dict[str, Any]]: ...


class Failure(enum.Enum):
    """How the informer reacts to an error; the value is the ``reason`` label of the watch-restart metric."""

    GONE = "gone"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    TRANSIENT = "error"


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of an ``ApiError`` (accepts an int ``status``/``code`` or a Status dict)."""
    for attr in ("code", "status", "status_code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, Mapping) and isinstance(value.get("code"), int):
            return int(value["code"])
    return None


def classify(exc: BaseException) -> Failure:
    if isinstance(exc, ApiError):
        return classify_code(status_code(exc))
    if isinstance(exc, TransportError):
        return Failure.TRANSIENT
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
