"""Package marker.

Imported by ``cli`` only.
"""
