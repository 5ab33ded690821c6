"""Make the self-signed key and certificate of /metrics in a child process (`python -m ...manager.certgen`).

Why a program of its own: the only use the operator has for the ``cryptography`` library is these few lines, once
at start, and importing it keeps about 10 MB resident for the life of the process (its Rust extension alone maps
8 MB, and a module cannot be unloaded). The operator's own RSS is a number users size pods by, so the long-running
process never imports it: ``manager.metrics.certs`` runs this module in a short-lived child and reads the pair from its
standard output. The private key travels over that pipe only; this program writes no file.

``self_signed`` is pure (the tests call it directly); ``main`` prints ``{"cert": PEM, "key": PEM, "not_after":
seconds since the epoch}`` as one JSON object for the hosts given on the command line (``not_after`` tells
``manager.metrics.certreload`` when to make the next pair).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import sys
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["main", "self_signed"]

_VALIDITY = datetime.timedelta(days=365)
_CLOCK_SKEW = datetime.timedelta(hours=1)


def self_signed(
    *, hosts: Sequence[str], now: datetime.datetime, validity: datetime.timedelta = _VALIDITY
) -> tuple[bytes, bytes]:
    """A new P-256 key and a self-signed server certificate for ``hosts`` (names or IPs), as PEM (cert, key).

    Valid from an hour before ``now`` (clock skew) until ``now + validity``.
    """
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
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m webserver_operator.manager.metrics.certgen",
        description="Print a new self-signed server certificate and its key as JSON {cert, key} (PEM).",
    )
    parser.add_argument("hosts", nargs="+", help="DNS names and IP addresses the certificate names")
    parser.add_argument(
        "--validity-seconds",
        type=float,
        default=_VALIDITY.total_seconds(),
        help="How long the certificate is valid from now (default: 365 days)",
    )
    args = parser.parse_args(argv)
    now = datetime.datetime.now(datetime.UTC)
    validity = datetime.timedelta(seconds=args.validity_seconds)
    cert, key = self_signed(hosts=args.hosts, now=now, validity=validity)
    json.dump({"cert": cert.decode(), "key": key.decode(), "not_after": (now + validity).timestamp()}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
