"""Who may read /metrics: the API server reviews the scraper's bearer token and its right to ``get /metrics``.

The behaviour of controller-runtime's ``pkg/metrics/filters.WithAuthenticationAndAuthorization`` (kubebuilder v4's
default), so the same RBAC and the same Prometheus configuration work for both:

- no ``Authorization: Bearer`` token, or a token the TokenReview does not authenticate: 401 Unauthorized (there,
  an unauthenticated token is reported by k8s.io/apiserver's union authenticator as an error and becomes a 500; a
  bad token is the caller's fault, so it is a 401 here);
- an authenticated user the SubjectAccessReview does not allow ``<method> <path>`` (``get /metrics``): 403, with
  the user's name;
- a review that fails (the API server unreachable, or the operator not allowed to create reviews): 500, and an
  error in the log saying which permission to grant;
- answers cached as k8s.io/apiserver caches them: tokens 1 minute, allowed 5 minutes, denied 30 seconds
  (``manager.metrics.reviewcache``), keyed by an HMAC of the token so the cache holds no token; identities that passed
  are kept apart from tokens that did not, so a flood of junk tokens cannot push them out;
- reviews only for ``GET /metrics``, the one route there is: ``manager.metrics.server`` answers anything else 404
  before it gets here (as controller-runtime filters only its metrics route), so the SubjectAccessReview always asks
  for ``get`` on ``/metrics`` and no request path reaches the API server;
- reviews limited (``manager.metrics.reviewlimit``: 20 per second, bursts of 30, 16 in flight): a request that would
wait
  more than a second for its turn is answered 429 with ``Retry-After``; a review whose callers all hung up is
  cancelled.

What the reviews say and mean is ``manager.metrics.reviews`` (pure); this module sends them through an ``ApiRequests``
(the metrics server's own API client, on its own loop) and turns the outcome into a ``Verdict``. Used by
``manager.metrics.server``'s middleware on every ``GET /metrics``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from webserver_operator.core.vocabulary import ApiRequests
from webserver_operator.kube.errors import KubeError
from webserver_operator.manager.metrics.reviewcache import ReviewCache
from webserver_operator.manager.metrics.reviewlimit import ReviewLimiter, ReviewsBusy
from webserver_operator.manager.metrics.reviews import (
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    Decision,
    UserInfo,
    access_decision,
    access_review,
    authenticated_user,
    bearer_token,
    token_review,
)

__all__ = ["ALLOW_TTL", "DENY_TTL", "METRICS_PATH", "TOKEN_TTL", "MetricsAuth", "Verdict"]

log = logging.getLogger(__name__)

#: k8s.io/apiserver's delegating authenticator/authorizer cache times, as controller-runtime configures them.
TOKEN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
#: The one route that is reviewed, and what the SubjectAccessReview asks for.
METRICS_PATH = "/metrics"
_VERB = "get"

_RBAC_HINT = (
    "the operator's ServiceAccount needs create on tokenreviews (authentication.k8s.io) and subjectaccessreviews "
    "(authorization.k8s.io): the chart's and config/rbac's metrics-auth ClusterRole grants them"
)


@dataclass(frozen=True)
class Verdict:
    """What to answer: ``status`` 200 lets the request through; any other is sent with ``message``."""

    status: int
    message: str = ""
    retry_after: float | None = None

    @property
    def allowed(self) -> bool:
        return self.status == 200


class MetricsAuth:
    """Authenticates (TokenReview) and authorises (SubjectAccessReview) each request, with cached answers."""

    def __init__(
        self,
        api: ApiRequests,
        *,
        clock: Callable[[], float] = time.monotonic,
        limiter: ReviewLimiter | None = None,
    ) -> None:
        self._api = api
        self._key = secrets.token_bytes(32)
        self._limiter = limiter or ReviewLimiter()
        self._users: ReviewCache[bytes, UserInfo | None] = ReviewCache(
            ttl=lambda _: TOKEN_TTL, positive=lambda user: user is not None, clock=clock
        )
        self._access: ReviewCache[UserInfo, Decision] = ReviewCache(
            ttl=lambda d: ALLOW_TTL if d.allowed else DENY_TTL, positive=lambda d: d.allowed, clock=clock
        )

    async def check(self, *, authorization: str | None) -> Verdict:
        """Whether the bearer of ``authorization`` may ``get /metrics``, as a ``Verdict``."""
        token = bearer_token(authorization)
        if token is None:
            return Verdict(401, "Unauthorized: send a ServiceAccount token as 'Authorization: Bearer <token>'")
        try:
            user = await self._users.get(self._digest(token), lambda: self._review_token(token))
        except ReviewsBusy as busy:
            return _busy(busy)
        except KubeError as err:
            log.error("metrics: the TokenReview failed, answering 500: %s (%s)", err, _RBAC_HINT)
            return Verdict(500, "Authentication failed: the API server did not review the token (see the operator log)")
        if user is None:
            return Verdict(
                401,
                "Unauthorized: the API server did not authenticate the bearer token (expired, revoked or from "
                "another cluster); send a current ServiceAccount token",
            )
        verb, path = _VERB, METRICS_PATH
        try:
            decision = await self._access.get(user, lambda: self._review_access(user))
        except ReviewsBusy as busy:
            return _busy(busy)
        except KubeError as err:
            log.error(
                "metrics: the SubjectAccessReview for %s failed, answering 500: %s (%s)", user.name, err, _RBAC_HINT
            )
            return Verdict(500, f"Authorization for user {user.name} failed (see the operator log)")
        if not decision.allowed:
            log.debug("metrics: %s may not %s %s: %s", user.name, verb, path, decision.reason or "no rule allows it")
            return Verdict(
                403,
                f"Authorization denied for user {user.name}: it needs {verb} on the non-resource URL {path} "
                "(bind it to the metrics-reader ClusterRole)",
            )
        return Verdict(200)

    def _digest(self, token: str) -> bytes:
        return hmac.new(self._key, token.encode(), hashlib.sha256).digest()

    async def _review_token(self, token: str) -> UserInfo | None:
        async with self._limiter.turn():
            answer = await self._api.request("POST", TOKEN_REVIEWS, body=token_review(token))
        return authenticated_user(answer)

    async def _review_access(self, user: UserInfo) -> Decision:
        async with self._limiter.turn():
            body = access_review(user, verb=_VERB, path=METRICS_PATH)
            answer = await self._api.request("POST", SUBJECT_ACCESS_REVIEWS, body=body)
        return access_decision(answer)


def _busy(busy: ReviewsBusy) -> Verdict:
    return Verdict(
        429,
        "Too many requests: the operator is reviewing as many tokens as it allows itself to; retry later "
        "(a token that was reviewed recently is answered from the cache)",
        retry_after=busy.retry_after,
    )
