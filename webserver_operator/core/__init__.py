"""The bottom layer: the words every other layer shares, and generic helpers with no Kubernetes client in them.

``vocabulary`` (object and key types, the cache and API Protocols, the event-handler type), ``backoff`` (the one
backoff formula), ``jsondiff`` (field diff and merge patch), ``quantity`` (resource quantities) and ``settings`` (the
settings sections each layer reads). Nothing here imports another layer of the package.

Imported by every other layer; imports none of them.
"""

__all__: list[str] = []
