"""A new certificate is served without a restart (manager.metrics.certreload): a renewed mounted pair, a renewed
self-signed one; a pair that does not load never replaces the one being served."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from pathlib import Path

import pytest

from tests.support.tls import issue_certificate
from webserver_operator.manager.metrics.certreload import CertificateReloader, SelfSignedRenewer
from webserver_operator.manager.metrics.certs import SelfSigned, ServingCertificate, self_signed_pem, server_ssl_context


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
    serving = ServingCertificate(server_ssl_context(str(mounted)))
    reloader = CertificateReloader(serving, str(mounted))
    assert reloader.check() is False  # nothing changed
    handshake(serving(), first_ca)

    second_ca = issue_certificate(mounted)  # what the kubelet does after cert-manager's renewal
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(serving(), second_ca)  # still the old certificate until the next check
    assert reloader.check() is True
    handshake(serving(), second_ca)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(serving(), first_ca)
    assert reloader.check() is False


def test_a_pair_that_does_not_load_keeps_the_previous_certificate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mounted = tmp_path / "mounted"
    ca = issue_certificate(mounted)
    serving = ServingCertificate(server_ssl_context(str(mounted)))
    reloader = CertificateReloader(serving, str(mounted))
    issue_certificate(tmp_path / "other")
    (mounted / "tls.key").write_bytes((tmp_path / "other" / "tls.key").read_bytes())  # key of another certificate
    with caplog.at_level(logging.WARNING):
        assert reloader.check() is False
    assert "does not load, still serving the previous one" in caplog.text
    handshake(serving(), ca)
    (mounted / "tls.crt").unlink()  # mid-update: a file missing
    assert reloader.check() is False
    handshake(serving(), ca)


def test_a_new_certificate_with_the_old_key_leaves_the_old_pair_serving_and_good_files_reload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32 minor 13: loading into the live context installed the new certificate before the key check failed.

    The context then served a certificate it had no key for (every handshake failed) until a restart, and putting
    the old files back did not reload, since they matched what had last loaded.
    """
    mounted = tmp_path / "mounted"
    old_ca = issue_certificate(mounted)
    old_files = {name: (mounted / name).read_bytes() for name in ("tls.crt", "tls.key")}
    serving = ServingCertificate(server_ssl_context(str(mounted)))
    reloader = CertificateReloader(serving, str(mounted))

    new_ca = issue_certificate(tmp_path / "renewed")
    (mounted / "tls.crt").write_bytes((tmp_path / "renewed" / "tls.crt").read_bytes())  # the key has not arrived
    with caplog.at_level(logging.WARNING):
        assert reloader.check() is False
    assert "does not load, still serving the previous one" in caplog.text
    handshake(serving(), old_ca)  # the old pair, whole
    assert reloader.check() is False  # the same broken pair is not tried (nor warned about) again

    for name, content in old_files.items():  # the old files put back
        (mounted / name).write_bytes(content)
    assert reloader.check() is False
    handshake(serving(), old_ca)

    (mounted / "tls.key").write_bytes((tmp_path / "renewed" / "tls.key").read_bytes())
    (mounted / "tls.crt").write_bytes((tmp_path / "renewed" / "tls.crt").read_bytes())  # the renewal, complete
    assert reloader.check() is True
    handshake(serving(), new_ca)


async def test_run_checks_every_interval(tmp_path: Path) -> None:
    mounted = tmp_path / "mounted"
    issue_certificate(mounted)
    serving = ServingCertificate(server_ssl_context(str(mounted)))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            issue_certificate(mounted)
        if len(waits) == 3:
            raise asyncio.CancelledError

    reloader = CertificateReloader(serving, str(mounted), interval=60.0, sleep=sleep)
    with pytest.raises(asyncio.CancelledError):
        await reloader.run()
    assert waits == [60.0, 60.0, 60.0]
    assert reloader.check() is False  # the renewal was loaded by run()


def served_certificate(context: ssl.SSLContext) -> bytes:
    """The DER certificate ``context`` presents (a handshake in memory with a client that verifies nothing)."""
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    client_in, client_out, server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_end = client.wrap_bio(client_in, client_out)
    server_end = context.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):
        for end in (client_end, server_end):
            with contextlib.suppress(ssl.SSLWantReadError):
                end.do_handshake()
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    certificate = client_end.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


async def test_the_self_signed_certificate_is_renewed_two_thirds_into_its_life() -> None:
    """Issue 32 minor 13: the self-signed certificate lasted 365 days and was never renewed in-process."""
    now = [1_000_000.0]
    made: list[SelfSigned] = []
    waits: list[float] = []

    def make() -> SelfSigned:  # a real pair from the child process, valid 300 s from the injected now
        pair = self_signed_pem(["localhost"], validity_seconds=300)
        made.append(pair._replace(not_after=now[0] + 300))
        return made[-1]

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds
        if len(waits) == 3:
            raise asyncio.CancelledError

    renewer = SelfSignedRenewer(make=make, clock=lambda: now[0], sleep=sleep)
    serving = renewer.first()
    first = served_certificate(serving())
    with pytest.raises(asyncio.CancelledError):
        await renewer.run()
    assert waits == [200.0, 200.0, 200.0]  # two thirds of 300 s, after each new pair
    assert len(made) == 3  # the first, and one renewal after each of the first two waits
    assert served_certificate(serving()) != first  # new connections get the renewed certificate


async def test_a_failed_renewal_keeps_the_certificate_and_retries(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    pair = self_signed_pem(["localhost"])
    answers: list[SelfSigned | Exception] = [
        pair._replace(not_after=600.0),
        RuntimeError("cannot make the self-signed metrics certificate: exited with 1"),
        pair._replace(not_after=1200.0),
    ]
    waits: list[float] = []

    def make() -> SelfSigned:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds
        if not answers:
            raise asyncio.CancelledError

    renewer = SelfSignedRenewer(make=make, clock=lambda: now[0], sleep=sleep)
    serving = renewer.first()
    before = serving()
    with caplog.at_level(logging.WARNING), pytest.raises(asyncio.CancelledError):
        await renewer.run()
    assert "making a new self-signed certificate failed, the current one expires in 200s; retrying in 60s" in (
        caplog.text
    )
    assert waits[:2] == [400.0, 60.0]
    assert serving() is not before
