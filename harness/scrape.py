"""Scrape /metrics as Prometheus does: HTTPS with a bearer token (or plain HTTP where the operator was told so).

Shared by everything that reads the operator's probes and metrics: the host-process operator (harness/operator.py),
the metrics server's unit tests and the e2e release on the local control plane. ``insecureSkipVerify`` is what the
chart's ServiceMonitor uses with the operator's self-signed certificate; ``cafile`` is the cert-manager case.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def client_context(cafile: str | None = None) -> ssl.SSLContext:
    """Verify the server against ``cafile``; without one skip verification (``insecureSkipVerify: true``)."""
    if cafile is not None:
        return ssl.create_default_context(cafile=cafile)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def scrape(url: str, *, token: str | None = None, cafile: str | None = None, timeout: float = 10) -> tuple[int, str]:
    """GET ``url`` (``Authorization: Bearer <token>`` when given); return the status and the body, errors included."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - http(s) URLs of the tests' own servers
    context = client_context(cafile) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:  # noqa: S310
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def metric_value(text: str, name: str, labels: dict[str, str] | None = None) -> float:
    """Sum of the samples named ``name`` whose labels include ``labels`` (0 when absent)."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in (labels or {}).items())
    )
