"""Package marker.

Imported by ``builders``, ``reconcile`` and ``cli manifests``; nothing is re-exported.
"""
