"""A renewed mounted certificate is served without a restart (manager.metrics.certreload); a broken one is not."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import pytest

from tests.support.tls import issue_certificate
from webserver_operator.manager.metrics.certreload import CertificateReloader
from webserver_operator.manager.metrics.certs import server_ssl_context


def handshake(server: ssl.SSLContext, cafile: Path) -> None:
    """A TLS handshake in memory between ``server`` and a client trusting only ``cafile``; raises when it fails."""
    client = ssl.create_default_context(cafile=str(cafile))
    client_in, client_out, server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_end = client.wrap_bio(client_in, client_out, server_hostname="127.0.0.1")
    server_end = server.wrap_bio(server_in, server_out, server_side=True)
    done: set[str] = set()
    for _ in range(20):
        for name, end in (("client", client_end), ("server", server_end)):
            if name in done:
                continue
            try:
                end.do_handshake()
                done.add(name)
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if done == {"client", "server"}:
            return
    raise AssertionError("the handshake did not finish")


def test_a_renewed_pair_is_served_after_the_next_check(tmp_path: Path) -> None:
    mounted = tmp_path / "mounted"
    first_ca = issue_certificate(mounted)
    first_ca = first_ca.rename(tmp_path / "first-ca.crt")
    context = server_ssl_context(str(mounted))
    reloader = CertificateReloader(context, str(mounted))
    assert reloader.check() is False  # nothing changed
    handshake(context, first_ca)

    second_ca = issue_certificate(mounted)  # what the kubelet does after cert-manager's renewal
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, second_ca)  # still the old certificate until the next check
    assert reloader.check() is True
    handshake(context, second_ca)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, first_ca)
    assert reloader.check() is False


def test_a_pair_that_does_not_load_keeps_the_previous_certificate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mounted = tmp_path / "mounted"
    ca = issue_certificate(mounted)
    context = server_ssl_context(str(mounted))
    reloader = CertificateReloader(context, str(mounted))
    issue_certificate(tmp_path / "other")
    (mounted / "tls.key").write_bytes((tmp_path / "other" / "tls.key").read_bytes())  # key of another certificate
    with caplog.at_level(logging.WARNING):
        assert reloader.check() is False
    assert "does not load, still serving the previous one" in caplog.text
    handshake(context, ca)
    (mounted / "tls.crt").unlink()  # mid-update: a file missing
    assert reloader.check() is False
    handshake(context, ca)


async def test_run_checks_every_interval(tmp_path: Path) -> None:
    mounted = tmp_path / "mounted"
    issue_certificate(mounted)
    context = server_ssl_context(str(mounted))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            issue_certificate(mounted)
        if len(waits) == 3:
            raise asyncio.CancelledError

    reloader = CertificateReloader(context, str(mounted), interval=60.0, sleep=sleep)
    with pytest.raises(asyncio.CancelledError):
        await reloader.run()
    assert waits == [60.0, 60.0, 60.0]
    assert reloader.check() is False  # the renewal was loaded by run()
