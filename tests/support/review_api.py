"""A stand-in API server that answers TokenReviews and SubjectAccessReviews, for unit tests of the metrics server.

Why an HTTP server and not an in-process fake of ``ApiRequests``: the metrics server builds its own API client from a
kubeconfig, on its own thread and loop, exactly as in production; pointing that kubeconfig here exercises the whole
path (kubeconfig, client, reviews, cache, middleware, TLS) without a cluster. The integration tests ask the real API
server the same questions (tests/integration/test_metrics_auth.py).

Tokens map to users (``tokens``); users in ``readers`` may ``get /metrics``. ``reviews`` counts the reviews asked.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from webserver_operator.manager.metrics.reviews import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS


class ReviewApi:
    """Serves the two review endpoints on 127.0.0.1 from a thread of its own; ``kubeconfig(path)`` points at it."""

    def __init__(self, *, tokens: dict[str, str], readers: set[str]) -> None:
        self.tokens = tokens
        self.readers = readers
        self.reviews: collections.Counter[str] = collections.Counter()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="review-api", daemon=True)

    async def _token_review(self, request: web.Request) -> web.Response:
        self.reviews["token"] += 1
        token = (await request.json())["spec"]["token"]
        user = self.tokens.get(token)
        status: dict[str, Any] = {"authenticated": False}
        if user is not None:
            status = {"authenticated": True, "user": {"username": user, "uid": f"uid-{user}", "groups": ["g"]}}
        return web.json_response({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status})

    async def _access_review(self, request: web.Request) -> web.Response:
        self.reviews["access"] += 1
        spec = (await request.json())["spec"]
        attributes = spec["nonResourceAttributes"]
        allowed = spec["user"] in self.readers and attributes == {"path": "/metrics", "verb": "get"}
        status = {"allowed": allowed, "reason": "reader" if allowed else ""}
        kind = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}
        return web.json_response({**kind, "status": status})

    def _serve(self) -> None:
        app = web.Application()
        app.router.add_post(TOKEN_REVIEWS, self._token_review)
        app.router.add_post(SUBJECT_ACCESS_REVIEWS, self._access_review)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, host="127.0.0.1", port=0)
        self._loop.run_until_complete(site.start())
        self.port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    def __enter__(self) -> ReviewApi:
        self._thread.start()
        self._started.wait(10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for this server, with a token of the operator's own (never reviewed here)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "operator", "user": {"token": "operator-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "operator"}}],
            "current-context": "fake",
        }
        path.write_text(yaml.safe_dump(config))
        return path
