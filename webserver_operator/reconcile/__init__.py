"""Package marker.

Imported by ``manager.operator`` (``reconcile.setup``) only.
"""

__all__: list[str] = []
