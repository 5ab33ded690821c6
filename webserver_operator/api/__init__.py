"""Package marker.

Imported by ``desired``, ``reconcile`` and ``cli manifests``; nothing is re-exported.
"""

__all__: list[str] = []
