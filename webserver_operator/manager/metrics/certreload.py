"""Serve a renewed mounted certificate without a restart: cert-manager renews it, the kubelet updates the files.

Why: cert-manager renews a Certificate at two thirds of its lifetime and the kubelet then rewrites the mounted
Secret's files, but the TLS server holds what it read at start; without a reload the operator would serve an
expired certificate unless someone restarted it in between. ``CertificateReloader`` hashes tls.crt and tls.key
every ``interval`` seconds; when they changed it loads them into the serving ``SSLContext``: new connections get
the new certificate, open ones keep theirs. A pair that does not load (half-written, or a key that does not match
yet) is logged and the previous certificate kept; the next check tries again.

Run by ``manager.metrics.server`` on the metrics server's loop when ``--metrics-cert-path`` is set.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

from webserver_operator.manager.metrics.certs import CERT_FILE, KEY_FILE, load_mounted

__all__ = ["CertificateReloader"]

log = logging.getLogger(__name__)


class CertificateReloader:
    """Reloads ``cert_dir``'s pair into ``context`` when the files change (``check``), every ``interval`` (``run``)."""

    def __init__(
        self,
        context: ssl.SSLContext,
        cert_dir: str,
        *,
        interval: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._context = context
        self._dir = Path(cert_dir)
        self._interval = interval
        self._sleep = sleep
        self._loaded = self._fingerprint()

    def _fingerprint(self) -> bytes | None:
        digest = hashlib.sha256()
        try:
            for name in (CERT_FILE, KEY_FILE):
                digest.update((self._dir / name).read_bytes())
        except OSError:
            return None
        return digest.digest()

    def check(self) -> bool:
        """Load the pair if it changed since the last load; True when a new certificate is now served."""
        current = self._fingerprint()
        if current is None or current == self._loaded:
            return False
        try:
            load_mounted(self._context, self._dir)
        except (OSError, ssl.SSLError) as err:
            log.warning("metrics certificate changed but does not load, still serving the previous one: %s", err)
            return False
        self._loaded = current
        log.info("metrics certificate in %s reloaded", self._dir)
        return True

    async def run(self) -> None:
        while True:
            await self._sleep(self._interval)
            self.check()
