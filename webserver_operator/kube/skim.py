"""Decoding of tenant-written objects that never builds what no reader reads.

Why: a tenant may pad a WebServer with up to about 1.5 MiB of labels (etcd's request limit), and every list page,
watch event and status-write answer carries the whole object. Decoded whole (orjson, ``kube.jsoncodec``), a
10-object page of 1.6 MB WebServers (16,000 labels each, plus their ``managedFields``) built 58 MiB of Python strings
and dicts, and the cache transform (``reconcile.cached``) threw nearly all of it away again. Those short-lived
objects sit in the same allocator pages as the few that are kept, so the memory was not given back either: the
relist of 100 such WebServers took the operator past its 256Mi limit on a busy machine.

msgspec decodes against a schema and skips the fields the schema does not name without building them (measured on
that page: +2 MiB resident instead of +58 MiB, in a ninth of orjson's time; on a 500-object page of ordinary objects
in half of it). A ``Skim`` names the metadata keys its reader uses; ``labels`` and ``managedFields`` are never built
unless named. ``annotations`` may be named: the API server bounds them to 256 KiB per object.

The shape is that of a custom resource: ``apiVersion``, ``kind``, ``metadata``, ``spec``, ``status`` (``spec`` and
``status`` decoded whole: the CRD schema bounds them). A ``Status`` (a watch ``ERROR`` event's object) keeps its
``message``, ``reason``, ``code`` and ``details``. Input msgspec refuses and the standard library accepts (a lone
UTF-16 surrogate escape, which the API server itself never writes) is decoded whole by ``kube.jsoncodec`` instead.

Built by ``reconcile.cached`` (the WebServer skim); used by ``runtime.informers.informer`` for list pages and watch
events, and by the reconciler for the answers of its WebServer reads and status writes (``KubeClient.request``
``decode=``). Hands on plain dicts and lists, as ``kube.jsoncodec.decode`` would, without the skipped keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from webserver_operator.kube import jsoncodec

__all__ = ["Skim"]

_OBJECT_FIELDS = ("apiVersion", "kind", "spec", "status", "message", "reason", "code", "details")


def _struct(name: str, fields: Iterable[tuple[str, Any]]) -> type[msgspec.Struct]:
    return msgspec.defstruct(name, [(key, kind, msgspec.UNSET) for key, kind in fields])


class Skim:
    """Decoders of one object, a list of them and a watch event, keeping only the ``metadata`` keys named."""

    def __init__(self, metadata: Iterable[str]) -> None:
        self.metadata = frozenset(metadata)
        meta = _struct("SkimmedMetadata", ((key, Any) for key in sorted(self.metadata)))
        obj = _struct("SkimmedObject", [*((key, Any) for key in _OBJECT_FIELDS), ("metadata", meta | None)])
        self._meta, self._obj = meta, obj
        self._object = msgspec.json.Decoder(obj | None)
        items: Any = list[obj]  # type: ignore[valid-type]  # a type built at run time
        self._list = msgspec.json.Decoder(
            _struct("SkimmedList", [("apiVersion", Any), ("kind", Any), ("metadata", Any), ("items", items | None)])
            | None
        )
        self._event = msgspec.json.Decoder(_struct("SkimmedEvent", [("type", Any), ("object", obj | None)]) | None)

    def object(self, data: bytes) -> Any:
        """One object (a GET or a write's answer)."""
        try:
            return self._plain(self._object.decode(data))
        except msgspec.DecodeError:
            return jsoncodec.decode(data)

    def list(self, data: bytes) -> Any:
        """A list page: ``items`` skimmed, the list's own ``metadata`` whole."""
        try:
            decoded = self._list.decode(data)
        except msgspec.DecodeError:
            return jsoncodec.decode(data)
        page = self._plain(decoded)
        if isinstance(page, dict) and page.get("items") is not None:
            page["items"] = [self._plain(item) for item in page["items"]]
        return page

    def event(self, data: bytes) -> Any:
        """A watch event: ``type`` and the skimmed ``object``."""
        try:
            decoded = self._event.decode(data)
        except msgspec.DecodeError:
            return jsoncodec.decode(data)
        event = self._plain(decoded)
        if isinstance(event, dict) and "object" in event:
            event["object"] = self._plain(event["object"])
        return event

    def _plain(self, value: Any) -> Any:
        """A decoded struct as the dict ``kube.jsoncodec`` would give (absent keys left out); others as they are."""
        if not isinstance(value, msgspec.Struct):
            return value
        plain: dict[str, Any] = {}
        for key in value.__struct_fields__:
            item = getattr(value, key)
            if item is msgspec.UNSET:
                continue
            plain[key] = self._plain(item) if isinstance(item, self._meta) else item
        return plain
