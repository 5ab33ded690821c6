"""Namespaces that opt out of the template-revision pacer: ``webserver-operator.dev/template-upgrade=manual``.

Why: the pacer (``reconcile.revisions.Pacer``, ``--template-upgrade-rate``) rolls WebServers to the newest template
revision at the cluster admin's pace. A team that must choose the moment its pods restart (a release freeze, a
stateful cache warmed in memory) labels its namespace, and the pacer leaves every WebServer there on its revision:
only the WebServer's own pod-template change or its owner's annotation (``webserver-operator.dev/template-upgrade:
"true"``) moves it (docs/upgrades.md).

Why a read and not a watch: the label matters only at the moment the pacer would move a WebServer, which happens at
most ``--template-upgrade-rate`` times a minute; caching every Namespace of the cluster for that would cost memory
on every installation, and the operator has no other use for Namespaces. So ``NamespaceOptOut.manual`` reads the one
Namespace when the pacer has room and a WebServer there is on an old revision, and remembers the answer for
``REMEMBER_SECONDS``. RBAC: ``get`` on ``namespaces`` (the chart grants it only when ``templateUpgrade.perMinute`` is
set, for the watched namespaces by name when ``watchNamespaces`` is).

Fails closed: when the Namespace cannot be read (no RBAC, no answer), the WebServer is treated as opted out and the
operator logs what to grant: moving a WebServer its owner may have excluded is the harm the label exists to prevent;
a pacer that waits costs nothing but time.

Pure part (``opted_out``) unit-tested with the read; called by ``reconcile.reconciler`` before ``Pacer.take``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from webserver_operator.core.resources import NAMESPACES
from webserver_operator.core.vocabulary import ApiRequests, KubeObject
from webserver_operator.kube.errors import ApiError, TransportError

__all__ = ["NamespaceOptOut", "opted_out"]

log = logging.getLogger(__name__)

OPT_OUT_LABEL: Final = "webserver-operator.dev/template-upgrade"
"""The Namespace label whose value ``OPT_OUT_VALUE`` keeps the pacer away from every WebServer in it."""
OPT_OUT_VALUE: Final = "manual"
REMEMBER_SECONDS: Final = 60.0
"""How long a Namespace's answer is used before it is read again: a label set or removed takes effect within this,
which is no longer than the pacer's own step at its slowest useful rate (one move a minute)."""


def opted_out(namespace: KubeObject) -> bool:
    """Whether the Namespace object carries ``webserver-operator.dev/template-upgrade=manual``."""
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    return str(labels.get(OPT_OUT_LABEL, "")).lower() == OPT_OUT_VALUE


class NamespaceOptOut:
    """Per namespace: whether the pacer must leave its WebServers alone, read on demand and remembered a while.

    ``clock``: seconds, monotonic.
    """

    def __init__(self, api: ApiRequests, clock: Callable[[], float]) -> None:
        self._api = api
        self._clock = clock
        self._known: dict[str, tuple[float, bool]] = {}

    def remembered_manual(self, namespace: str) -> bool:
        """The remembered answer, without a read: True only when ``namespace`` was seen opted out recently."""
        known = self._known.get(namespace)
        return known is not None and self._clock() - known[0] < REMEMBER_SECONDS and known[1]

    async def manual(self, namespace: str) -> bool:
        """Whether the pacer must leave ``namespace``'s WebServers on their revision (True also when unreadable)."""
        now = self._clock()
        known = self._known.get(namespace)
        if known is not None and now - known[0] < REMEMBER_SECONDS:
            return known[1]
        try:
            obj = await self._api.request("GET", NAMESPACES.path(name=namespace))
        except (ApiError, TransportError) as error:
            log.warning(
                "cannot read Namespace %s to see whether it opts out of paced template upgrades (%s): its WebServers "
                "are not moved at the admin's pace until it can be read. Grant the operator `get` on namespaces "
                "(the chart does so when templateUpgrade.perMinute is set), or move them with the annotation "
                "webserver-operator.dev/template-upgrade=true",
                namespace,
                error,
            )
            answer = True
        else:
            answer = opted_out(obj)
        self._known[namespace] = (now, answer)
        return answer
