"""The metrics server's certificate (manager.metrics.certs, manager.metrics.certgen): self-signed at start, or the
mounted pair."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509

from tests.support.tls import issue_certificate
from webserver_operator.manager.metrics import certs
from webserver_operator.manager.metrics.certgen import self_signed
from webserver_operator.manager.metrics.certs import server_ssl_context


def test_self_signed_certificate_names_the_hosts_and_serves_a_year() -> None:
    now = datetime.datetime(2026, 11, 24, 12, 0, tzinfo=datetime.UTC)
    cert_pem, key_pem = self_signed(hosts=["localhost", "127.0.0.1", "::1", "pod-0", "localhost"], now=now)
    cert = x509.load_pem_x509_certificate(cert_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "pod-0"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    assert cert.not_valid_before_utc < now < cert.not_valid_after_utc
    assert cert.not_valid_after_utc - now == datetime.timedelta(days=365)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert b"PRIVATE KEY" in key_pem
    assert cert.issuer == cert.subject


def test_each_start_makes_a_new_key() -> None:
    now = datetime.datetime.now(datetime.UTC)
    assert self_signed(hosts=["localhost"], now=now)[1] != self_signed(hosts=["localhost"], now=now)[1]


def test_the_self_signed_context_leaves_no_key_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile  # noqa: PLC0415 - tempfile caches its directory: reset it for TMPDIR

    monkeypatch.setattr(tempfile, "tempdir", None)
    context = server_ssl_context(None)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_temp_dir_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile  # noqa: PLC0415

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(
        OSError, match=r"give the pod a writable /tmp .* or mount a certificate and set --metrics-cert-path"
    ):
        server_ssl_context(None)


def test_the_operator_process_never_loads_the_cryptography_library() -> None:
    """The self-signed pair comes from a child process: the operator keeps no 10 MB crypto library resident."""
    program = (
        "import sys, ssl\n"
        "import webserver_operator.manager.operator\n"
        "from webserver_operator.manager.metrics.certs import server_ssl_context\n"
        "context = server_ssl_context(None)\n"
        "assert context.get_ca_certs() == [] and isinstance(context, ssl.SSLContext)\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'cryptography'))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_certificate_program_that_fails_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(certs, "CERTGEN_MODULE", "webserver_operator.manager.no_such_module")
    with pytest.raises(RuntimeError, match=r"exited with 1 \(.*No module named.*\); check that the cryptography"):
        server_ssl_context(None)


def test_a_mounted_pair_is_loaded(tmp_path: Path) -> None:
    issue_certificate(tmp_path)
    assert server_ssl_context(str(tmp_path)).minimum_version == ssl.TLSVersion.TLSv1_2


def test_a_missing_mounted_file_names_it_and_the_fix(tmp_path: Path) -> None:
    issue_certificate(tmp_path)
    (tmp_path / "tls.key").unlink()
    with pytest.raises(FileNotFoundError, match=r"tls\.key not found; mount a kubernetes.io/tls Secret"):
        server_ssl_context(str(tmp_path))


def test_a_key_that_does_not_match_the_certificate_is_refused_clearly(tmp_path: Path) -> None:
    issue_certificate(tmp_path / "a")
    issue_certificate(tmp_path / "b")
    (tmp_path / "a" / "tls.key").write_bytes((tmp_path / "b" / "tls.key").read_bytes())
    with pytest.raises(ssl.SSLError, match="are not a matching PEM certificate and key"):
        server_ssl_context(str(tmp_path / "a"))


def test_the_child_process_says_when_the_pair_expires() -> None:
    """What the in-process renewal (manager.metrics.certreload) schedules from: the certificate's own notAfter."""
    pair = certs.self_signed_pem(["localhost"], validity_seconds=300)
    cert = x509.load_pem_x509_certificate(pair.cert)
    assert pair.not_after == pytest.approx(cert.not_valid_after_utc.timestamp(), abs=1)
    assert pair.not_after == pytest.approx(time.time() + 300, abs=60)
