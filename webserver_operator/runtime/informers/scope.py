"""``Scope``: what an informer keeps when it does not keep every object of its resource, as a seam.

Why a seam: the informer (list, watch, 410 relist, stall watchdog) is generic, and which objects it keeps is a
concern of its own. A sharded operator keeps only its shards' namespaces (``runtime.sharding.filter.ShardFilter``,
which implements this Protocol); tomorrow something else may narrow an informer. client-go keeps such selectors in
the ListWatch the reflector is given, not in the reflector. The informer asks a scope five things (what to add to a
list or watch query, where an object stands, whether a list page echoed the selector, and, after a list or a stray
watch event, to record who filters) and, when the caller changes it (``Informer.rescope``), which stored objects it
still keeps.

Who builds a scope: the caller of ``Informer`` or ``InformerGroup`` passes a ``ScopeFactory``; each informer calls it
once with its resource and name (a scope keeps per-informer state: what the last request sent, who filters). No
factory, or one that answers ``None``: the informer keeps everything and sends no selector.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

from webserver_operator.core.resources import Resource
from webserver_operator.core.vocabulary import KubeObject

__all__ = ["Placement", "Rescoped", "Scope", "ScopeFactory"]

#: Where an object stands: ``kept`` (in the scope), ``stray`` (outside what the request asked for: the server does
#: not filter), ``released`` (let go by a rescope after the request that brought it was sent).
Placement = Literal["kept", "stray", "released"]
#: What a rescope did: nothing, kept less (a re-watch suffices), or kept more (only a new list brings the rest).
Rescoped = Literal["same", "narrowed", "widened"]


class Scope(Protocol):
    """The objects one informer keeps, and what it sends so that the API server may filter for it."""

    @property
    def filtering(self) -> str | None:
        """Who was found to filter (e.g. ``server``, ``client``, ``unconfirmed``); ``None`` until a list said."""

    def add_to(self, query: dict[str, str]) -> None:
        """Add the selector to a list or watch query."""

    def place(self, obj: KubeObject) -> Placement:
        """Where ``obj``, listed or watched, stands."""

    def keeps(self, obj: KubeObject) -> bool:
        """Whether a stored object is still in the scope (after ``rescope``)."""

    def echoed(self, list_meta: dict[str, Any], *, path: str) -> bool:
        """True when a list page's metadata says the server applied the selector sent."""

    def after_list(self, *, echoed: bool, strays: int) -> None:
        """Record who filters, from a full list."""

    def after_stray_event(self, obj: KubeObject) -> None:
        """Record that a watch event outside what the watch asked for arrived."""

    def rescope(self, to: object) -> Rescoped:
        """Keep ``to`` from now on (the scope's own description of what to keep)."""


#: Builds the scope of one informer from its resource and name; ``None``: keep everything.
ScopeFactory = Callable[[Resource, str], Scope | None]
