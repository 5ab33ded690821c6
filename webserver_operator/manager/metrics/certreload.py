"""Serve a new certificate without a restart: a renewed mounted pair, or a fresh self-signed one before it expires.

Why: cert-manager renews a Certificate at two thirds of its lifetime and the kubelet then rewrites the mounted
Secret's files, but the TLS server holds what it read at start; without a reload the operator would serve an
expired certificate unless someone restarted it in between. The self-signed certificate the operator makes when
nothing is mounted lasts a year; an operator that runs longer would serve it expired.

Both swap a whole new ``SSLContext`` into the ``ServingCertificate`` holder (``manager.metrics.certs``) only once it has
loaded, as controller-runtime's certwatcher swaps only a pair that loaded: new connections get the new certificate,
open ones keep theirs, and a pair that does not load (half-written, or a new certificate whose key has not arrived
yet) leaves the previous one serving, whole.

- ``CertificateReloader`` hashes tls.crt and tls.key every ``interval`` seconds and loads them when they differ from
  what is served; a pair that failed is tried again at the next change, and files put back as they were need no
  reload, since the served pair never changed.
- ``SelfSignedRenewer`` makes a new self-signed pair (``manager.metrics.certs``, in a child process, off the loop) once
two
  thirds of the served one's lifetime have passed, as cert-manager does; a failed attempt is logged and tried again
  after a minute (sooner near the expiry).

Run by ``manager.metrics.server`` on the metrics server's loop: the reloader when ``--metrics-cert-path`` is set, the
renewer otherwise.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from webserver_operator.manager.metrics.certs import (
    CERT_FILE,
    KEY_FILE,
    SelfSigned,
    ServingCertificate,
    pem_context,
    self_signed_pem,
    server_ssl_context,
    serving_hosts,
)

__all__ = ["CertificateReloader", "SelfSignedRenewer"]

log = logging.getLogger(__name__)

#: The share of a self-signed certificate's lifetime after which a new one is made (cert-manager's default).
RENEW_AT = 2 / 3
_RETRY_SECONDS = 60.0


class CertificateReloader:
    """Swaps ``cert_dir``'s pair into ``serving`` when the files change (``check``), every ``interval`` (``run``)."""

    def __init__(
        self,
        serving: ServingCertificate,
        cert_dir: str,
        *,
        interval: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._serving = serving
        self._dir = Path(cert_dir)
        self._interval = interval
        self._sleep = sleep
        self._loaded = self._fingerprint()
        self._failed: bytes | None = None

    def _fingerprint(self) -> bytes | None:
        digest = hashlib.sha256()
        try:
            for name in (CERT_FILE, KEY_FILE):
                digest.update((self._dir / name).read_bytes())
        except OSError:
            return None
        return digest.digest()

    def check(self) -> bool:
        """Swap in the pair if it changed since the last load and loads; True when a new certificate is now served."""
        current = self._fingerprint()
        if current is None or current in (self._loaded, self._failed):
            return False
        try:
            context = server_ssl_context(str(self._dir))
        except (OSError, ssl.SSLError) as err:
            self._failed = current  # warned once per broken pair, tried again when the files change
            log.warning("metrics certificate changed but does not load, still serving the previous one: %s", err)
            return False
        self._serving.swap(context)
        self._loaded, self._failed = current, None
        log.info("metrics certificate in %s reloaded", self._dir)
        return True

    async def run(self) -> None:
        while True:
            await self._sleep(self._interval)
            self.check()


class SelfSignedRenewer:
    """Makes the first self-signed pair (``first``) and a new one before each expires (``run``)."""

    def __init__(
        self,
        *,
        make: Callable[[], SelfSigned] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._make = make or (lambda: self_signed_pem(serving_hosts()))
        self._clock = clock
        self._sleep = sleep
        self._made_at = 0.0
        self._not_after = 0.0
        self.serving: ServingCertificate | None = None

    def first(self) -> ServingCertificate:
        """The holder with a new pair (blocks while the child process makes it)."""
        self.serving = ServingCertificate(self._load(self._make()))
        return self.serving

    def _load(self, pair: SelfSigned) -> ssl.SSLContext:
        context = pem_context(pair)
        self._made_at, self._not_after = self._clock(), pair.not_after
        return context

    def renew_in(self) -> float:
        """Seconds until the next pair is due: two thirds into the served one's lifetime."""
        due = self._made_at + RENEW_AT * (self._not_after - self._made_at)
        return max(0.0, due - self._clock())

    async def run(self) -> None:
        serving = self.serving if self.serving is not None else self.first()
        delay = self.renew_in()
        while True:
            await self._sleep(delay)
            try:
                pair = await asyncio.get_running_loop().run_in_executor(None, self._make)
                context = self._load(pair)
            except (OSError, RuntimeError, ssl.SSLError, ValueError) as err:
                left = self._not_after - self._clock()
                delay = max(1.0, min(_RETRY_SECONDS, left / 2))
                log.warning(
                    "metrics: making a new self-signed certificate failed, the current one expires in %.0fs; "
                    "retrying in %.0fs: %s",
                    left,
                    delay,
                    err,
                )
                continue
            serving.swap(context)
            delay = self.renew_in()
            log.info("metrics: a new self-signed certificate is served (next one in %.0fs)", delay)
