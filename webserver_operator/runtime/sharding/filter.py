"""One informer's shard filter: the selector it sends, the test every object passes, and who is found to filter.

Why a module of its own: an informer of a sharded operator must keep exactly its shards' objects (one shard, or the
union of the shards its replica holds: ``runtime.sharding.ranges.ShardUnion``) whatever the API server does with
``shardSelector`` (KEP-5866, the ``ShardedListAndWatch`` gate, alpha in Kubernetes 1.36), and must say when the server
does not filter, since then every replica decodes every object. That is a concern apart from listing and watching,
so ``runtime.informers.informer`` asks this filter five things: the query parameter to add, where an object stands (the
client-side test, run on both paths so another shard's object never reaches the store or a handler), whether a list
page's ``metadata.shardInfo`` echoes the selector, and, after a list or a stray watch event, records who filters;
``rescope`` changes the shards kept when the replica gains or hands over one.

The shards kept (``scope``) change at once on ``rescope``; the selector of the request in flight (``sent``) changes
with the next request. An object outside the scope but inside what was sent is one of a shard just handed over,
which the server rightly sent: it is dropped without counting as evidence. Only an object outside what was sent is a
stray, which says the server does not filter.

Who filters (``ShardFiltering``), as kube-apiserver v1.36.3 behaves (read in ``k8s.io/apiserver/pkg/storage`` and
checked by tests/integration/test_sharded_informers.py):

* ``server``: the list echoed the selector. Built-in resources' lists do (their list types carry ``shardInfo``).
* ``client``: the server ignored the selector: a list or watch brought an object of another shard, or a built-in
  resource's list came back without the echo (gate off, or a server older than 1.36).
* ``unconfirmed``: a custom resource's list without the echo and without strays. The server filters custom resources
  but cannot echo on their ``UnstructuredList``, and a server without the gate answers the same way; the first stray
  settles it.

The first ``client`` verdict in the process is logged once as a warning with the evidence and the fix
(``PROCESS_FALLBACK_NOTICE``); ``webserver_operator_shard_filter_client_side{resource}`` shows the verdict (1 client,
0 server, absent while unconfirmed) and ``webserver_operator_shard_filter_dropped_total{resource}`` what the client
side dropped (strays only: a handed-over shard's objects the server rightly sent are not counted). The ranges come
from ``runtime.sharding.ranges``; built by ``runtime.informers.informer.Informer`` from its ``shard``.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from webserver_operator import metrics
from webserver_operator.core.resources import Resource
from webserver_operator.core.vocabulary import KubeObject
from webserver_operator.runtime.informers.scope import Placement, Rescoped, ScopeFactory
from webserver_operator.runtime.sharding.ranges import SHARD_SELECTOR_PARAM, ShardRange, ShardUnion

__all__ = ["PROCESS_FALLBACK_NOTICE", "FallbackNotice", "ShardFilter", "ShardFiltering", "ShardSelectorMismatch"]

logger = logging.getLogger(__name__)

#: Who applies an informer's shard range (see the module docstring).
ShardFiltering = Literal["server", "client", "unconfirmed"]


class ShardSelectorMismatch(Exception):
    """The API server answered a sharded list with a ``shardInfo`` for a different selector than the one sent."""


class FallbackNotice:
    """Says once that the API server ignores shard selectors: every sharded informer finds it, one line is enough.

    The module keeps one for the process (``PROCESS_FALLBACK_NOTICE``); tests give an informer their own.
    """

    def __init__(self) -> None:
        self.given = False

    def first(self) -> bool:
        """True the first time it is asked, False after."""
        first, self.given = not self.given, True
        return first


PROCESS_FALLBACK_NOTICE = FallbackNotice()


def _namespace_of(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


class ShardFilter:
    """Keeps one informer to its shards (never to every shard at the start: see ``for_range``)."""

    def __init__(
        self,
        shard: ShardRange | ShardUnion,
        resource: Resource,
        *,
        name: str,
        notice: FallbackNotice = PROCESS_FALLBACK_NOTICE,
    ) -> None:
        scope = shard if isinstance(shard, ShardUnion) else ShardUnion.of(shard)
        if scope.everything:
            raise ValueError("the range covering every namespace needs no shard filter: pass no shard")
        if not resource.namespaced:
            raise ValueError(
                f"{resource.plural} are cluster-scoped: shards are keyed on the namespace, so they cannot be sharded"
            )
        #: The shards kept now.
        self.scope = scope
        #: The shards the last request asked for (what the server filters the answer by, when it filters).
        self.sent = scope
        self.name = name
        #: Who filters, known after the first list; see ``ShardFiltering``.
        self.filtering: ShardFiltering | None = None
        # Kubernetes 1.36 echoes shardInfo on the lists of resources it stores as typed objects (the core group and
        # the other built-in groups without a dot) but not on custom resources' (unstructured) lists, which it
        # filters all the same: only for the former does a missing echo prove that the server ignored the selector.
        self._echo_expected = "." not in resource.group
        self._notice = notice
        self._m_dropped = metrics.SHARD_FILTER_DROPPED.labels(resource=name)

    @classmethod
    def for_range(
        cls,
        shard: ShardRange | ShardUnion | None,
        resource: Resource,
        *,
        name: str,
        notice: FallbackNotice = PROCESS_FALLBACK_NOTICE,
    ) -> ShardFilter | None:
        """The filter for ``shard``; ``None`` (nothing sent, nothing tested) without one or for everything."""
        if shard is None or shard.everything:
            return None
        return cls(shard, resource, name=name, notice=notice)

    @property
    def selector(self) -> str | None:
        """The selector of the shards kept now (``None`` once they are every shard: nothing to send)."""
        return self.scope.selector

    @classmethod
    def factory(
        cls, shard: ShardRange | ShardUnion | None, *, notice: FallbackNotice = PROCESS_FALLBACK_NOTICE
    ) -> ScopeFactory | None:
        """What an ``Informer`` or ``InformerGroup`` is given to keep ``shard``; ``None`` without one or for all."""
        if shard is None or shard.everything:
            return None
        return lambda resource, name: cls(shard, resource, name=name, notice=notice)

    def __str__(self) -> str:
        return str(self.scope)

    def rescope(self, to: object) -> Rescoped:
        """Keep the ``ShardUnion`` ``to`` from now on; ``widened`` when it adds shards (only a list brings them)."""
        if not isinstance(to, ShardUnion):
            raise TypeError(f"a shard filter is rescoped to a ShardUnion, not {to!r}")
        if to == self.scope:
            return "same"
        widened = not self.scope.covers(to)
        self.scope = to
        return "widened" if widened else "narrowed"

    def keeps(self, obj: KubeObject) -> bool:
        """Whether a stored object's namespace is in the shards kept now."""
        return self.scope.contains(_namespace_of(obj))

    # -- what the informer asks ---------------------------------------------------------------------------------

    def add_to(self, query: dict[str, str]) -> None:
        """Add the selector to a list or watch query (none once every shard is kept)."""
        self.sent = self.scope
        if self.sent.selector is not None:
            query[SHARD_SELECTOR_PARAM] = self.sent.selector

    def place(self, obj: KubeObject) -> Placement:
        """The client-side test (see ``Placement``); counts the strays it drops."""
        namespace = _namespace_of(obj)
        if self.scope.contains(namespace):
            return "kept"
        if self.sent.contains(namespace):
            return "released"
        self._m_dropped.inc()
        return "stray"

    def echoed(self, list_meta: dict[str, Any], *, path: str) -> bool:
        """True when a list page's metadata echoes the selector sent; raises if the server applied another one."""
        echo = (list_meta.get("shardInfo") or {}).get("selector")
        if echo is None:
            return False
        if echo != self.sent.selector:
            raise ShardSelectorMismatch(
                f"the API server filtered {path} by shardSelector {echo!r}, not the {self.sent.selector!r} this "
                "informer sent: its ShardedListAndWatch implementation writes selectors differently from Kubernetes "
                "1.36's; report this with the server's version"
            )
        return True

    def after_list(self, *, echoed: bool, strays: int) -> None:
        """Decide who filters from a full list: strays, else the echo, else what a missing echo means here.

        A list sent without a selector (every shard kept) says nothing either way.
        """
        if self.sent.selector is None:
            return
        if strays:
            self._record("client", f"its list answer held {strays} object(s) of other shards")
        elif echoed:
            self._record("server", "it echoed the selector in metadata.shardInfo")
        elif self._echo_expected:
            self._record("client", "its list answer has no metadata.shardInfo")
        elif self.filtering != "client":  # a server once seen ignoring the selector is not trusted again
            self._record("unconfirmed", "no metadata.shardInfo, which it omits for custom resources")

    def after_stray_event(self, obj: KubeObject) -> None:
        """A watch event outside what the watch asked for arrived (and was dropped): the server does not filter it."""
        if self.filtering != "client":
            self._record("client", f"its watch sent an object of namespace {_namespace_of(obj)!r}, outside the shard")

    # -- verdicts -----------------------------------------------------------------------------------------------

    def _record(self, filtering: ShardFiltering, evidence: str) -> None:
        previous, self.filtering = self.filtering, filtering
        if filtering != "unconfirmed":
            metrics.SHARD_FILTER_CLIENT_SIDE.labels(resource=self.name).set(1 if filtering == "client" else 0)
        if filtering == previous:
            return
        extra = {"informer": self.name, "shard_filtering": filtering}
        if filtering == "client" and (previous == "server" or self._notice.first()):
            logger.warning(
                "informer %s: the API server ignored shardSelector (%s): it runs without the ShardedListAndWatch "
                "feature gate, or predates Kubernetes 1.36. This replica receives every shard's objects and drops "
                "those outside %s itself: correct, but decoding and watch traffic are not divided among replicas. "
                "Start kube-apiserver with --feature-gates=ShardedListAndWatch=true to have the server filter.",
                self.name,
                evidence,
                self.sent,
                extra=extra,
            )
        elif filtering == "client":
            logger.info(
                "informer %s: filtering %s client-side (the API server ignored shardSelector: %s)",
                self.name,
                self.sent,
                evidence,
                extra=extra,
            )
        elif filtering == "server":
            logger.info("informer %s: the API server filters by %s (%s)", self.name, self.sent, evidence, extra=extra)
        else:
            logger.info(
                "informer %s: the API server sent only objects of %s but did not confirm that it filters (%s); "
                "anything of another shard that arrives is dropped here",
                self.name,
                self.sent,
                evidence,
                extra=extra,
            )
