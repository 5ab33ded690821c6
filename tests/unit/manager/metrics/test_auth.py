"""Who may read /metrics (manager.metrics.auth): 401, 403, 500 and 200 as controller-runtime's filter, cached, and
limited so that a flood of made-up tokens from any pod costs the API server a bounded number of reviews."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Unpack

import pytest

from tests.support.fake_api import status_error
from webserver_operator.core.vocabulary import RequestOptions
from webserver_operator.manager.metrics.auth import ALLOW_TTL, DENY_TTL, TOKEN_TTL, MetricsAuth
from webserver_operator.manager.metrics.reviewlimit import ReviewLimiter
from webserver_operator.manager.metrics.reviews import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS

PROMETHEUS = "system:serviceaccount:monitoring:prometheus"
TENANT = "system:serviceaccount:team-a:app"


class ReviewingApi:
    """Answers reviews like the API server: tokens map to users, ``readers`` may get /metrics."""

    def __init__(self) -> None:
        self.tokens = {"prom-token": PROMETHEUS, "tenant-token": TENANT}
        self.readers = {PROMETHEUS}
        self.requests: list[tuple[str, Any]] = []
        self.error: Exception | None = None
        self.gate = asyncio.Event()  # cleared: every review waits (a slow API server)
        self.gate.set()
        self.finished = 0

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict[str, Any]:
        assert method == "POST"
        body: Any = options.get("body")
        self.requests.append((path, body))
        await self.gate.wait()
        self.finished += 1
        if self.error is not None:
            raise self.error
        if path == TOKEN_REVIEWS:
            user = self.tokens.get(body["spec"]["token"])
            if user is None:
                return {"status": {"authenticated": False, "error": "invalid bearer token"}}
            return {"status": {"authenticated": True, "user": {"username": user, "groups": ["system:authenticated"]}}}
        assert path == SUBJECT_ACCESS_REVIEWS
        spec = body["spec"]
        allowed = spec["user"] in self.readers and spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": allowed}}

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> ReviewingApi:
    return ReviewingApi()


def unlimited() -> ReviewLimiter:
    return ReviewLimiter(qps=1e9, burst=1_000_000, in_flight=1_000_000)


async def check(auth: MetricsAuth, authorization: str | None) -> tuple[int, str]:
    verdict = await auth.check(authorization=authorization)
    return verdict.status, verdict.message


@pytest.mark.parametrize("header", [None, "", "Basic cHJvbTpwdw==", "Bearer "])
async def test_no_bearer_token_is_401_without_asking_the_api_server(api: ReviewingApi, header: str | None) -> None:
    status, message = await check(MetricsAuth(api), header)
    assert status == 401
    assert "Authorization: Bearer <token>" in message
    assert api.requests == []


async def test_a_token_the_api_server_does_not_authenticate_is_401(api: ReviewingApi) -> None:
    status, message = await check(MetricsAuth(api), "Bearer forged")
    assert status == 401
    assert message.startswith("Unauthorized: the API server did not authenticate the bearer token")
    assert "send a current ServiceAccount token" in message
    assert api.count(SUBJECT_ACCESS_REVIEWS) == 0


async def test_a_user_without_the_right_is_403_and_told_what_to_bind(api: ReviewingApi) -> None:
    status, message = await check(MetricsAuth(api), "Bearer tenant-token")
    assert status == 403
    assert message.startswith(f"Authorization denied for user {TENANT}")
    assert "get on the non-resource URL /metrics" in message and "metrics-reader" in message


async def test_a_reader_passes_and_the_review_asks_for_get_on_metrics(api: ReviewingApi) -> None:
    assert await check(MetricsAuth(api), "Bearer prom-token") == (200, "")
    ((_, sar),) = [r for r in api.requests if r[0] == SUBJECT_ACCESS_REVIEWS]
    assert sar["spec"]["user"] == PROMETHEUS
    assert sar["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}


async def test_reviews_are_cached_as_the_api_server_library_caches_them(api: ReviewingApi) -> None:
    clock = Clock()
    auth = MetricsAuth(api, clock=clock)
    for _ in range(10):
        assert (await check(auth, "Bearer prom-token"))[0] == 200
        assert (await check(auth, "Bearer tenant-token"))[0] == 403
        assert (await check(auth, "Bearer forged"))[0] == 401
    assert api.count(TOKEN_REVIEWS) == 3  # one per token, unauthenticated ones included
    assert api.count(SUBJECT_ACCESS_REVIEWS) == 2

    api.readers.add(TENANT)  # a ClusterRoleBinding is created: it counts once the denial has expired
    clock.now += DENY_TTL + 1
    assert (await check(auth, "Bearer tenant-token"))[0] == 200
    assert api.count(TOKEN_REVIEWS) == 3  # the token's answer lives a minute
    clock.now += TOKEN_TTL
    assert (await check(auth, "Bearer tenant-token"))[0] == 200
    assert api.count(TOKEN_REVIEWS) == 4

    api.readers.clear()  # the binding is removed: an allowance lives 5 minutes, as in k8s.io/apiserver
    clock.now = ALLOW_TTL - 1  # prom-token's allowance was cached at 0
    assert (await check(auth, "Bearer prom-token"))[0] == 200
    clock.now += 2
    assert (await check(auth, "Bearer prom-token"))[0] == 403


async def test_the_cache_holds_no_token(api: ReviewingApi) -> None:
    auth = MetricsAuth(api)
    await check(auth, "Bearer prom-token")
    assert "prom-token" not in repr(vars(auth._users))


async def test_a_failed_review_is_500_logged_with_the_permission_to_grant_and_not_cached(
    api: ReviewingApi, caplog: pytest.LogCaptureFixture
) -> None:
    auth = MetricsAuth(api)
    api.error = status_error(403, "Forbidden", method="POST", path=TOKEN_REVIEWS)
    with caplog.at_level(logging.ERROR):
        status, message = await check(auth, "Bearer prom-token")
    assert status == 500
    assert "did not review the token" in message and "see the operator log" in message
    assert "create on tokenreviews (authentication.k8s.io)" in caplog.text
    api.error = None
    assert (await check(auth, "Bearer prom-token"))[0] == 200


async def test_a_failed_access_review_is_500_naming_the_user(api: ReviewingApi) -> None:
    auth = MetricsAuth(api)
    assert (await check(auth, "Bearer prom-token"))[0] == 200  # the token's answer is cached from here on
    api.error = status_error(503, "ServiceUnavailable", method="POST", path=SUBJECT_ACCESS_REVIEWS)
    auth._access = type(auth._access)(ttl=lambda _: 0)  # the allowance forgotten: the next scrape asks again
    verdict = await auth.check(authorization="Bearer prom-token")
    assert (verdict.status, verdict.message) == (
        500,
        f"Authorization for user {PROMETHEUS} failed (see the operator log)",
    )


async def test_a_flood_of_junk_tokens_does_not_push_the_readers_identity_out_of_the_cache(api: ReviewingApi) -> None:
    """Issue 32 major 2: 4096 junk tokens pushed Prometheus' cached identity out; it then cost a review again."""
    clock = Clock()
    auth = MetricsAuth(api, clock=clock, limiter=unlimited())
    assert (await check(auth, "Bearer prom-token"))[0] == 200
    for i in range(5000):
        assert (await check(auth, f"Bearer junk-{i}"))[0] == 401
    reviews = len(api.requests)
    clock.now += TOKEN_TTL - 1
    assert (await check(auth, "Bearer prom-token"))[0] == 200
    assert len(api.requests) == reviews  # answered from the cache: no TokenReview, no SubjectAccessReview
    assert len(auth._users) <= 4096 + 1  # the junk side stays bounded


async def test_reviews_are_rate_limited_and_the_excess_is_429_at_once(api: ReviewingApi) -> None:
    """Issue 32 major 2: 200 random tokens made 200 TokenReviews; now the burst, then 20 a second for 1 s at most."""
    auth = MetricsAuth(api, limiter=ReviewLimiter(qps=20, burst=30, in_flight=16, max_wait=1.0))
    verdicts = await asyncio.gather(*(auth.check(authorization=f"Bearer junk-{i}") for i in range(200)))
    statuses = [verdict.status for verdict in verdicts]
    assert 30 + 20 <= api.count(TOKEN_REVIEWS) <= 30 + 21  # the burst, and one second's worth that waited
    assert statuses.count(401) == api.count(TOKEN_REVIEWS) and statuses.count(429) == 200 - statuses.count(401)
    refused = verdicts[-1]
    assert refused.status == 429 and refused.retry_after is not None and refused.retry_after >= 1
    assert "Too many requests" in refused.message and "retry later" in refused.message


async def test_reviews_in_flight_are_bounded(api: ReviewingApi) -> None:
    """Issue 32 major 2: against a slow API server, reviews in flight grew with every new token."""
    api.gate.clear()
    auth = MetricsAuth(api, limiter=ReviewLimiter(qps=1e9, burst=1_000_000, in_flight=4, max_wait=0.2))
    checks = [asyncio.create_task(check(auth, f"Bearer junk-{i}")) for i in range(50)]
    refused, waiting = await asyncio.wait(checks, timeout=2)
    assert len(api.requests) == 4 and len(waiting) == 4  # 4 sent, still waiting for the slow answer
    assert [task.result()[0] for task in refused] == [429] * 46  # refused after waiting 0.2 s for a turn
    api.gate.set()
    assert [status for status, _ in await asyncio.gather(*waiting)] == [401] * 4


async def test_a_review_stops_when_every_caller_hung_up(api: ReviewingApi) -> None:
    """Issue 32 major 2: reviews kept running after their callers hung up (20,000 left running, +396 MiB)."""
    api.gate.clear()
    auth = MetricsAuth(api, limiter=unlimited())
    callers = [asyncio.create_task(check(auth, f"Bearer junk-{i}")) for i in range(100)]
    await asyncio.sleep(0.01)
    assert len(api.requests) == 100 and auth._users.in_flight == 100
    for caller in callers:
        caller.cancel()  # aiohttp cancels the handler of a request whose client went away
    await asyncio.gather(*callers, return_exceptions=True)
    await asyncio.sleep(0)
    assert auth._users.in_flight == 0
    api.gate.set()
    await asyncio.sleep(0.01)
    assert api.finished == 0  # none of the cancelled reviews went on to an answer
