"""Package marker.

Imported by ``manager.operator`` (``reconcile.setup``) only.
"""
