"""Which of two resourceVersions of the same object is newer, where the API server lets a client ask.

Why: the reconciler keeps the object its own status write got back until the WebServer informer has caught up with
it (``reconcile.reconciler``). "Caught up" needs an order: an informer that is relisting or reconnecting can be
several of our writes behind, and deciding from what it still holds can find nothing to write while the stored
status says something else. Equality alone cannot tell "behind" from "moved on".

Kubernetes 1.35 made resourceVersions comparable (KEP-5504, stable): for objects of one resource they are positive
integers in decimal, without leading zeros, and a larger one is newer. client-go's
``k8s.io/apimachinery/pkg/util/resourceversion.CompareResourceVersion`` compares them by length, then digit by
digit, and refuses anything else; so does ``compare`` here (no Python package offers this; it is four lines). Every
etcd-backed API server has served such versions since etcd3, so this also holds on the oldest Kubernetes the chart
supports; a server that serves something else (an aggregated API, a non-etcd storage) gets ``None``, and the caller
falls back to equality.

Pure; used by ``reconcile.reconciler``.
"""

from __future__ import annotations

__all__ = ["compare"]


def compare(a: str, b: str) -> int | None:
    """-1, 0 or 1 as resourceVersion ``a`` is older than, the same as or newer than ``b``; None if not comparable."""
    if not (_comparable(a) and _comparable(b)):
        return None
    key_a, key_b = (len(a), a), (len(b), b)
    return (key_a > key_b) - (key_a < key_b)


def _comparable(version: str) -> bool:
    return version.isascii() and version.isdigit() and not version.startswith("0")
