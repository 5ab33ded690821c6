"""The in-process reconcile-cost measurement starts from a converged WebServer and writes nothing while it measures."""

from __future__ import annotations

from bench import reconcile_cost
from webserver_operator.api.models import WEBSERVERS
from webserver_operator.core.resources import DEPLOYMENTS, EVENTS, SERVICES


async def test_the_measured_webserver_has_converged() -> None:
    api, reconciler = await reconcile_cost._converged()
    ns, name = reconcile_cost.KEY
    assert name in api.collections[DEPLOYMENTS.path(namespace=ns)]
    assert name in api.collections[SERVICES.path(namespace=ns)]
    assert api.collections[EVENTS.path(namespace=ns)], "the Created Event was written"
    ws = api.collections[WEBSERVERS.path(namespace=ns)][name]
    assert ws["status"]["observedGeneration"] == 1
    versions = {
        path: {n: o["metadata"]["resourceVersion"] for n, o in objs.items()} for path, objs in api.collections.items()
    }
    await reconciler.reconcile(reconcile_cost.KEY)
    after = {
        path: {n: o["metadata"]["resourceVersion"] for n, o in objs.items()} for path, objs in api.collections.items()
    }
    assert after == versions, "a reconcile of the converged WebServer writes nothing"


def test_both_cases_are_measured() -> None:
    results = reconcile_cost.measure(reconciles=50, rounds=1, event_loop="asyncio")
    assert set(results) == {"same versions", "deployment moved"}
    assert all(value > 0 for value in results.values())
