"""Package marker.

Imported by ``manager.manager`` (``reconcile.setup``) only.
"""
