"""What the API server is asked, and what its answers mean, when someone scrapes /metrics: pure, no I/O.

Why the API server decides: a scraper proves who it is with a bearer token (a ServiceAccount token, as Prometheus
sends from ``bearerTokenFile``); the API server says whose token it is (TokenReview, authentication.k8s.io/v1) and
whether that identity may ``get`` the non-resource URL ``/metrics`` (SubjectAccessReview, authorization.k8s.io/v1).
Access to metrics is then granted the way access to the API server's and the kubelet's own /metrics is, with RBAC
(a ClusterRole with ``nonResourceURLs: ["/metrics"]``, ``verbs: ["get"]``), as controller-runtime's
``pkg/metrics/filters`` does through k8s.io/apiserver's delegating authenticator and authorizer.

Here: the request bodies, the reading of the answers, and the ``Authorization`` header parsing (the rules of
k8s.io/apiserver's bearertoken authenticator). ``manager.metrics.auth`` sends the reviews and caches the answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "Decision",
    "UserInfo",
    "access_decision",
    "access_review",
    "authenticated_user",
    "bearer_token",
    "token_review",
]

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"  # noqa: S105 - an API path, not a secret
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True)
class UserInfo:
    """The identity behind a token, as the TokenReview reported it (hashable: it keys the access cache)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Decision:
    """A SubjectAccessReview's answer: allowed or not, and the authorizer's reason (for the log)."""

    allowed: bool
    reason: str = ""


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None when there is no usable one.

    As k8s.io/apiserver's bearertoken authenticator: the scheme is case-insensitive, other schemes and an empty
    token count as no token (401, not 500).
    """
    parts = (authorization or "").strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def token_review(token: str) -> dict[str, Any]:
    """The TokenReview that asks whose ``token`` is (no audiences: the API server's own, as controller-runtime)."""
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}


def authenticated_user(answer: dict[str, Any]) -> UserInfo | None:
    """The user a TokenReview answer names, or None when the token was not authenticated."""
    status = answer.get("status") or {}
    if status.get("authenticated") is not True:
        return None
    user = status.get("user") or {}
    extra = user.get("extra") or {}
    return UserInfo(
        name=str(user.get("username") or ""),
        uid=str(user.get("uid") or ""),
        groups=tuple(str(g) for g in user.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(v) for v in values or ())) for k, values in extra.items())),
    )


def access_review(user: UserInfo, *, verb: str, path: str) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user`` may ``verb`` the non-resource URL ``path``."""
    spec: dict[str, Any] = {
        "user": user.name,
        "groups": list(user.groups),
        "nonResourceAttributes": {"path": path, "verb": verb},
    }
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {key: list(values) for key, values in user.extra}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def access_decision(answer: dict[str, Any]) -> Decision:
    """Allowed only on an explicit ``allowed: true``: a denial and "no opinion" both refuse."""
    status = answer.get("status") or {}
    reason = str(status.get("reason") or status.get("evaluationError") or "")
    return Decision(allowed=status.get("allowed") is True, reason=reason)
