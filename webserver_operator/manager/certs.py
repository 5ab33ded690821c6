"""The TLS certificate of /metrics: a mounted one (e.g. a cert-manager Secret), else a self-signed one made at start.

Why self-signed by default: HTTPS needs a certificate before the first scrape, and the operator must not depend on
cert-manager being installed. As controller-runtime does without a ``CertDir``, the operator makes a key and a
certificate at start; Prometheus then scrapes with ``insecureSkipVerify`` (the bearer token still authenticates the
scraper; only the server's identity goes unchecked). With cert-manager the chart mounts the Certificate's Secret
and ``--metrics-cert-path`` points at it, so Prometheus can verify the server against the issuer's CA.

The pod's root filesystem is read-only: the self-signed pair is written to a private temporary directory (/tmp is an
emptyDir) only for ``ssl`` to load it (the standard library loads keys from files only), and deleted at once.
A mounted certificate is read at start and again whenever its files change (``manager.certreload``): a renewal by
cert-manager is served without a restart.

``self_signed`` is pure; ``server_ssl_context`` reads or writes files. Called by ``manager.metrics_server``.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CERT_FILE", "KEY_FILE", "load_mounted", "self_signed", "server_ssl_context"]

#: File names in ``--metrics-cert-path``: the keys of a ``kubernetes.io/tls`` Secret, as cert-manager writes them.
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
_VALIDITY = datetime.timedelta(days=365)
_CLOCK_SKEW = datetime.timedelta(hours=1)


def self_signed(*, hosts: Sequence[str], now: datetime.datetime) -> tuple[bytes, bytes]:
    """A new P-256 key and a self-signed server certificate for ``hosts`` (names or IPs), as PEM (cert, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webserver-operator-metrics")])
    alt_names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def server_ssl_context(cert_dir: str | None) -> ssl.SSLContext:
    """A TLS 1.2+ server context with the certificate in ``cert_dir``, or a self-signed one when it is None."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_dir is not None:
        load_mounted(context, Path(cert_dir))
        return context
    hosts = ["localhost", "127.0.0.1", "::1", socket.gethostname()]
    cert, key = self_signed(hosts=hosts, now=datetime.datetime.now(datetime.UTC))
    try:
        with tempfile.TemporaryDirectory(prefix="metrics-cert-") as tmp:
            cert_file, key_file = Path(tmp, CERT_FILE), Path(tmp, KEY_FILE)
            cert_file.write_bytes(cert)
            key_file.touch(mode=0o600)
            key_file.write_bytes(key)
            context.load_cert_chain(cert_file, key_file)
    except OSError as err:
        raise OSError(
            err.errno,
            f"cannot write the self-signed metrics certificate to a temporary directory ({err}): give the pod a "
            "writable /tmp (the chart mounts an emptyDir) or mount a certificate and set --metrics-cert-path",
        ) from err
    return context


def load_mounted(context: ssl.SSLContext, cert_dir: Path) -> None:
    """Load ``cert_dir``'s tls.crt and tls.key into ``context``; errors name the path and what to mount there."""
    cert_file, key_file = cert_dir / CERT_FILE, cert_dir / KEY_FILE
    missing = [str(f) for f in (cert_file, key_file) if not f.is_file()]
    if missing:
        raise FileNotFoundError(
            f"--metrics-cert-path={cert_dir}: {', '.join(missing)} not found; mount a kubernetes.io/tls Secret "
            "(e.g. cert-manager's) there, or leave --metrics-cert-path unset for a self-signed certificate"
        )
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as err:
        raise ssl.SSLError(
            f"--metrics-cert-path={cert_dir}: {CERT_FILE} and {KEY_FILE} are not a matching PEM certificate and key "
            f"({err}); check the Secret mounted there"
        ) from err
