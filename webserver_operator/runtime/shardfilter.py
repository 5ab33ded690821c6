"""One informer's shard filter: the selector it sends, the test every object passes, and who is found to filter.

Why a module of its own: an informer of a sharded operator must keep exactly one shard's objects whatever the API
server does with ``shardSelector`` (KEP-5866, the ``ShardedListAndWatch`` gate, alpha in Kubernetes 1.36), and must
say when the server does not filter, since then every replica decodes every object. That is a concern apart from
listing and watching, so ``runtime.informer`` asks this filter four things: the query parameter to add, whether an
object belongs (the client-side test, run on both paths so another shard's object never reaches the store or a
handler), whether a list page's ``metadata.shardInfo`` echoes the selector, and, after a list or a stray watch
event, records who filters.

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
side dropped. The range itself comes from ``core.shards``; built by ``runtime.informer.Informer`` from its ``shard``.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from webserver_operator import metrics
from webserver_operator.core.resources import Resource
from webserver_operator.core.shards import SHARD_SELECTOR_PARAM, ShardRange
from webserver_operator.core.vocabulary import KubeObject

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
    """Keeps one informer to ``shard`` (never the range covering everything: see ``for_range``)."""

    def __init__(
        self, shard: ShardRange, resource: Resource, *, name: str, notice: FallbackNotice = PROCESS_FALLBACK_NOTICE
    ) -> None:
        selector = shard.selector
        if selector is None:
            raise ValueError("the range covering every namespace needs no shard filter: pass no shard")
        if not resource.namespaced:
            raise ValueError(
                f"{resource.plural} are cluster-scoped: shards are keyed on the namespace, so they cannot be sharded"
            )
        self.shard = shard
        self.selector = selector
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
        shard: ShardRange | None,
        resource: Resource,
        *,
        name: str,
        notice: FallbackNotice = PROCESS_FALLBACK_NOTICE,
    ) -> ShardFilter | None:
        """The filter for ``shard``; ``None`` (nothing sent, nothing tested) without one or for everything."""
        if shard is None or shard.everything:
            return None
        return cls(shard, resource, name=name, notice=notice)

    # -- what the informer asks ---------------------------------------------------------------------------------

    def add_to(self, query: dict[str, str]) -> None:
        """Add the selector to a list or watch query."""
        query[SHARD_SELECTOR_PARAM] = self.selector

    def admits(self, obj: KubeObject) -> bool:
        """The client-side test: True when ``obj`` belongs to the shard; counts what it drops."""
        if self.shard.contains(_namespace_of(obj)):
            return True
        self._m_dropped.inc()
        return False

    def echoed(self, list_meta: dict[str, Any], *, path: str) -> bool:
        """True when a list page's metadata echoes our selector; raises if the server applied another one."""
        echo = (list_meta.get("shardInfo") or {}).get("selector")
        if echo is None:
            return False
        if echo != self.selector:
            raise ShardSelectorMismatch(
                f"the API server filtered {path} by shardSelector {echo!r}, not the {self.selector!r} this informer "
                "sent: its ShardedListAndWatch implementation writes selectors differently from Kubernetes 1.36's; "
                "report this with the server's version"
            )
        return True

    def after_list(self, *, echoed: bool, strays: int) -> None:
        """Decide who filters from a full list: strays, else the echo, else what a missing echo means here."""
        if strays:
            self._record("client", f"its list answer held {strays} object(s) of other shards")
        elif echoed:
            self._record("server", "it echoed the selector in metadata.shardInfo")
        elif self._echo_expected:
            self._record("client", "its list answer has no metadata.shardInfo")
        elif self.filtering != "client":  # a server once seen ignoring the selector is not trusted again
            self._record("unconfirmed", "no metadata.shardInfo, which it omits for custom resources")

    def after_stray_event(self, obj: KubeObject) -> None:
        """A watch event of another shard arrived (and was dropped): the server does not filter this watch."""
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
                self.shard,
                extra=extra,
            )
        elif filtering == "client":
            logger.info(
                "informer %s: filtering %s client-side (the API server ignored shardSelector: %s)",
                self.name,
                self.shard,
                evidence,
                extra=extra,
            )
        elif filtering == "server":
            logger.info("informer %s: the API server filters by %s (%s)", self.name, self.shard, evidence, extra=extra)
        else:
            logger.info(
                "informer %s: the API server sent only objects of %s but did not confirm that it filters (%s); "
                "anything of another shard that arrives is dropped here",
                self.name,
                self.shard,
                evidence,
                extra=extra,
            )
