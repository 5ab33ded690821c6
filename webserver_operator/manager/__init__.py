"""Package marker.

Imported by ``cli`` only.
"""

__all__: list[str] = []
