"""The TLS certificate of /metrics: a mounted one (e.g. a cert-manager Secret), else a self-signed one made at start.

Why self-signed by default: HTTPS needs a certificate before the first scrape, and the operator must not depend on
cert-manager being installed. As controller-runtime does without a ``CertDir``, the operator makes a key and a
certificate at start; Prometheus then scrapes with ``insecureSkipVerify`` (the bearer token still authenticates the
scraper; only the server's identity goes unchecked). With cert-manager the chart mounts the Certificate's Secret
and ``--metrics-cert-path`` points at it, so Prometheus can verify the server against the issuer's CA.

The pod's root filesystem is read-only: the self-signed pair is written to a private temporary directory (/tmp is an
emptyDir) only for ``ssl`` to load it (the standard library loads keys from files only), and deleted at once.
A mounted certificate is read at start and again whenever its files change, and the self-signed one is made anew
before it expires (both ``manager.metrics.certreload``): new connections get the new pair without a restart, through the
``ServingCertificate`` holder, which only ever holds a context that loaded.

The pair is made in a child process (``manager.metrics.certgen``), so that the operator never imports ``cryptography``:
that library would keep about 10 MB resident for the life of the process, for a few lines run once.
``server_ssl_context`` reads or writes files. Called by ``manager.metrics.server``.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "CERT_FILE",
    "KEY_FILE",
    "SelfSigned",
    "ServingCertificate",
    "load_mounted",
    "pem_context",
    "self_signed_pem",
    "server_ssl_context",
    "serving_hosts",
]

#: File names in ``--metrics-cert-path``: the keys of a ``kubernetes.io/tls`` Secret, as cert-manager writes them.
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
#: The program that makes the self-signed pair (``manager.metrics.certgen``), run as a child of the operator.
CERTGEN_MODULE = "webserver_operator.manager.metrics.certgen"
_CERTGEN_TIMEOUT_SECONDS = 60.0


class SelfSigned(NamedTuple):
    """A self-signed pair as PEM, and when the certificate expires (seconds since the epoch)."""

    cert: bytes
    key: bytes
    not_after: float


class ServingCertificate:
    """The TLS context new connections get (``manager.metrics.connections`` calls it at each accept).

    Why a holder and not one ``SSLContext`` reloaded in place: ``load_cert_chain`` on a live context installs the
    certificate before it checks the key, so a new certificate with a key that does not match would leave the
    context serving a certificate it has no key for, until a restart. ``manager.metrics.certreload`` builds a whole new
    context and ``swap``s it in only once it loaded, as controller-runtime's certwatcher does; connections already
    open keep theirs.
    """

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context

    def __call__(self) -> ssl.SSLContext:
        return self.context

    def swap(self, context: ssl.SSLContext) -> None:
        self.context = context


def serving_hosts() -> list[str]:
    """The names the self-signed certificate is made for."""
    return ["localhost", "127.0.0.1", "::1", socket.gethostname()]


def self_signed_pem(hosts: list[str], *, validity_seconds: float | None = None) -> SelfSigned:
    """A new self-signed pair for ``hosts``, made by ``manager.metrics.certgen`` in a child process (blocks)."""
    command = [sys.executable, "-m", CERTGEN_MODULE, *hosts]
    if validity_seconds is not None:
        command.append(f"--validity-seconds={validity_seconds}")
    try:
        done = subprocess.run(command, capture_output=True, timeout=_CERTGEN_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(
            f"cannot make the self-signed metrics certificate: running {' '.join(command[:3])} failed ({err}); "
            "mount a certificate and set --metrics-cert-path, or serve plain HTTP with --no-metrics-secure"
        ) from err
    if done.returncode != 0:
        error = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(
            f"cannot make the self-signed metrics certificate: {' '.join(command[:3])} exited with "
            f"{done.returncode} ({error[-1] if error else 'no message'}); check that the cryptography package is "
            "installed, or mount a certificate and set --metrics-cert-path"
        )
    pair = json.loads(done.stdout)
    return SelfSigned(str(pair["cert"]).encode(), str(pair["key"]).encode(), float(pair["not_after"]))


def _new_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def server_ssl_context(cert_dir: str | None) -> ssl.SSLContext:
    """A new TLS 1.2+ server context with the certificate in ``cert_dir``, or a self-signed one when it is None."""
    if cert_dir is not None:
        context = _new_context()
        load_mounted(context, Path(cert_dir))
        return context
    return pem_context(self_signed_pem(serving_hosts()))


def pem_context(pair: SelfSigned) -> ssl.SSLContext:
    """A new TLS 1.2+ server context serving ``pair`` (written to a private temporary directory, deleted at once)."""
    context = _new_context()
    cert, key = pair.cert, pair.key
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
