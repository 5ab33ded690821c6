"""The /metrics server (manager.metrics.server) as Prometheus meets it: HTTPS, bearer tokens, reviews by the API server.

The reviews are answered by a stand-in API server (tests/support/review_api.py) reached through a kubeconfig, so
the whole path runs: kubeconfig, the server's own API client on its own loop, the cached reviews, TLS. The real API
server answers the same questions in tests/integration/test_metrics_auth.py.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.scrape import client_context, scrape
from tests.support.review_api import ReviewApi
from tests.support.tls import issue_certificate
from webserver_operator.core.settings import ClientSettings, ServerSettings
from webserver_operator.kube.errors import ConfigurationError
from webserver_operator.manager.metrics.server import MetricsServer, SharedRender

READER = "system:serviceaccount:monitoring:prometheus"
TENANT = "system:serviceaccount:team-a:app"


@pytest.fixture
def review_api() -> Iterator[ReviewApi]:
    with ReviewApi(tokens={"reader": READER, "tenant": TENANT}, readers={READER}) as api:
        yield api


def serve(kubeconfig: Path | None, **server: object) -> MetricsServer:
    settings = ServerSettings.model_validate({"metrics_bind_address": "127.0.0.1:0", **server})
    client = ClientSettings(kubeconfig=str(kubeconfig) if kubeconfig else None)
    metrics_server = MetricsServer(server=settings, client=client, render=lambda: b"# up\nup 1\n")
    metrics_server.start()
    return metrics_server


@pytest.fixture
def secure(review_api: ReviewApi, tmp_path: Path) -> Iterator[MetricsServer]:
    server = serve(review_api.kubeconfig(tmp_path / "kubeconfig"))
    yield server
    server.stop()


def test_https_answers_401_403_and_200_and_caches_the_reviews(secure: MetricsServer, review_api: ReviewApi) -> None:
    url = f"https://127.0.0.1:{secure.port}/metrics"
    assert secure.scheme == "https"
    status, body = scrape(url)
    assert status == 401 and "Authorization: Bearer <token>" in body
    assert scrape(url, token="forged")[0] == 401
    status, body = scrape(url, token="tenant")
    assert status == 403 and f"Authorization denied for user {TENANT}" in body
    for _ in range(5):
        assert scrape(url, token="reader") == (200, "# up\nup 1\n")
    assert review_api.reviews == {"token": 3, "access": 2}


def test_anything_but_get_metrics_is_404_without_a_review(secure: MetricsServer, review_api: ReviewApi) -> None:
    """Issue 32 major 2: every path was reviewed, and went into the SubjectAccessReview (200 paths, 200 reviews)."""
    base = f"https://127.0.0.1:{secure.port}"
    for i in range(20):
        status, body = scrape(f"{base}/debug/{i}", token="tenant")
        assert status == 404 and "serves GET /metrics only" in body
        assert scrape(f"{base}/metrics/{i}", token=f"junk-{i}")[0] == 404
    post = urllib.request.Request(f"{base}/metrics", data=b"", headers={"Authorization": "Bearer reader"})  # noqa: S310
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(post, timeout=10, context=client_context())  # noqa: S310 - the test's own server
    refused.value.close()
    assert refused.value.code == 404
    assert review_api.reviews == {}
    assert scrape(f"{base}/metrics", token="reader")[0] == 200


def test_plain_http_is_refused_on_the_https_port(secure: MetricsServer) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        scrape(f"http://127.0.0.1:{secure.port}/metrics", token="reader", timeout=5)


def test_a_mounted_certificate_verifies_against_its_ca(review_api: ReviewApi, tmp_path: Path) -> None:
    ca = issue_certificate(tmp_path / "certs")
    server = serve(review_api.kubeconfig(tmp_path / "kubeconfig"), metrics_cert_path=str(tmp_path / "certs"))
    try:
        url = f"https://127.0.0.1:{server.port}/metrics"
        assert scrape(url, token="reader", cafile=str(ca))[0] == 200
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            scrape(url, token="reader", cafile=str(issue_certificate(tmp_path / "other")))
    finally:
        server.stop()


def test_the_self_signed_certificate_is_not_trusted_without_skip_verify(secure: MetricsServer, tmp_path: Path) -> None:
    other_ca = issue_certificate(tmp_path / "unrelated")
    with pytest.raises(urllib.error.URLError) as err:
        scrape(f"https://127.0.0.1:{secure.port}/metrics", token="reader", cafile=str(other_ca))
    assert isinstance(err.value.reason, ssl.SSLCertVerificationError)


def test_plain_http_only_when_asked_and_then_without_checks(caplog: pytest.LogCaptureFixture) -> None:
    server = serve(None, metrics_secure=False)
    try:
        assert server.scheme == "http"
        assert scrape(f"http://127.0.0.1:{server.port}/metrics") == (200, "# up\nup 1\n")
    finally:
        server.stop()
    assert "plain HTTP" not in caplog.text  # 127.0.0.1: no warning


def test_plain_http_on_all_interfaces_is_logged_as_a_risk(caplog: pytest.LogCaptureFixture) -> None:
    settings = ServerSettings(metrics_bind_address=":0", metrics_secure=False)
    server = MetricsServer(server=settings, client=ClientSettings(), render=lambda: b"")
    server.start()
    server.stop()
    assert "served over plain HTTP without authentication on 0.0.0.0" in caplog.text
    assert "drop --no-metrics-secure" in caplog.text


def test_a_bad_kubeconfig_stops_the_start_with_its_message(tmp_path: Path) -> None:
    settings = ServerSettings(metrics_bind_address="127.0.0.1:0")
    server = MetricsServer(server=settings, client=ClientSettings(kubeconfig=str(tmp_path / "nope")), render=bytes)
    with pytest.raises(ConfigurationError, match=r"no kubeconfig at .*nope .*: set KUBECONFIG or --kubeconfig"):
        server.start()


async def test_a_launched_server_hands_its_port_or_its_error_to_an_awaiting_loop(tmp_path: Path) -> None:
    served = MetricsServer(
        server=ServerSettings(metrics_bind_address="127.0.0.1:0", metrics_secure=False),
        client=ClientSettings(),
        render=lambda: b"up 1\n",
    )
    served.launch()  # returns at once; the port comes when it listens
    try:
        port = await asyncio.wait_for(served.started(), 15)
        assert port == served.port > 0
        status, body = await asyncio.to_thread(scrape, f"http://127.0.0.1:{port}/metrics")
        assert (status, body) == (200, "up 1\n")
    finally:
        served.stop()
    broken = MetricsServer(
        server=ServerSettings(metrics_bind_address="127.0.0.1:0"),
        client=ClientSettings(kubeconfig=str(tmp_path / "nope")),
        render=bytes,
    )
    broken.launch()
    with pytest.raises(ConfigurationError, match=r"no kubeconfig at .*nope"):
        await asyncio.wait_for(broken.started(), 15)
    broken.stop()


async def test_a_shutdown_that_stops_waiting_for_the_start_leaves_a_server_that_still_stops() -> None:
    served = MetricsServer(
        server=ServerSettings(metrics_bind_address="127.0.0.1:0", metrics_secure=False),
        client=ClientSettings(),
        render=lambda: b"",
    )
    served.launch()
    waiting = asyncio.ensure_future(served.started())
    await asyncio.sleep(0)
    waiting.cancel()  # the operator is told to stop before /metrics listens
    await asyncio.gather(waiting, return_exceptions=True)
    assert await asyncio.wait_for(served.started(), 15) > 0, "the start went on and reported its port"
    served.stop()


async def test_concurrent_scrapes_share_one_render_and_later_ones_render_again() -> None:
    started, release = threading.Event(), threading.Event()
    renders: list[int] = []

    def render() -> bytes:
        renders.append(1)
        started.set()
        release.wait(5)
        return f"up {len(renders)}\n".encode()

    shared = SharedRender(render)
    waiting = [asyncio.create_task(shared()) for _ in range(10)]
    await asyncio.to_thread(started.wait, 5)
    late = asyncio.create_task(shared())  # arrives while the render runs: shares it
    release.set()
    assert set(await asyncio.gather(*waiting, late)) == {b"up 1\n"}
    assert await shared() == b"up 2\n"  # a scrape after the render landed gets a fresh one
    assert len(renders) == 2
