"""The operator's RBAC grants exactly what its code uses: every verb it sends is granted, every granted verb is sent.

Granting more than is used hands a compromised or buggy operator powers it never needed (a review once found
``patch`` on Events while the recorder never sent one; it now does, for a repeated Event); granting less breaks it
on some cluster. So this drives the operator's
own wiring (``reconcile.setup`` on an informer cache, the leader elector) against the in-process fake API through
every path that needs a permission, maps each request to the (apiGroup, resource, verb) the API server authorizes,
and compares that with ``tests.support.chart.OPERATOR_RULES``, which config/rbac and the chart are checked against
(here for their text, in test_chart_kustomize / test_chart when rendered, and by the API server's authorizer in
tests/integration/test_manifests.py).

The paths: informers list and watch WebServers, Deployments and Services; a first reconcile creates the children,
records Events and writes status (answered 409 once, so it re-reads the WebServer); a reconcile whose cache missed
the children meets 409 AlreadyExists, reads them and repairs a drifted one with a patch; the same drift twice
more repeats an Event, which patches its count; pods that stay unready have their probe Events listed; a budget
left by a WebServer scaled below two replicas is deleted; the Lease is created, renewed and released; a scrape of
``/metrics`` has its token and its access reviewed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Unpack

import yaml

from harness.paths import ROOT
from tests.support.chart import GROUP, LEADER_ELECTION_RULES, MANAGER_RULES, OPERATOR_RULES, Rule
from tests.support.factories import webserver
from tests.support.fake_api import FakeApi, status_error
from webserver_operator.api.models import WEBSERVERS, WebServer
from webserver_operator.core.resources import DEPLOYMENTS, EVENTS, LEASES, PODDISRUPTIONBUDGETS, SERVICES
from webserver_operator.core.settings import ControllerSettings, LeaseSettings, WatchSettings
from webserver_operator.core.vocabulary import Decode, QueryValue, RequestOptions
from webserver_operator.desired import desired_pdb
from webserver_operator.kube.paths import parse_path, rbac_verb
from webserver_operator.manager.metrics.auth import MetricsAuth
from webserver_operator.manager.metrics.reviews import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from webserver_operator.reconcile.setup import setup_webserver_controller
from webserver_operator.runtime.informers.cache import InformerCache
from webserver_operator.runtime.leases.lease import Lease
from webserver_operator.runtime.sharding.shardset import no_shard_leases_live

NS, NAME, SOLO = "team-a", "web", "solo"

#: Checked by an admission plugin, not by a request: setting blockOwnerDeletion on the children's ownerReferences
#: needs update on the owner's finalizers where OwnerReferencesPermissionEnforcement is on.
ADMISSION_ONLY: frozenset[Rule] = frozenset({(GROUP, "webservers/finalizers", "update")})


class RecordingApi(FakeApi):
    """The fake API, remembering the RBAC rule every request and watch needs."""

    def __init__(self) -> None:
        super().__init__()
        self.used: set[Rule] = set()

    def _record(self, method: str, path: str, *, watch: bool = False) -> None:
        info = parse_path(path)
        assert info is not None, path
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        self.used.add((info.group, resource, rbac_verb(method, path, watch=watch)))

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict[str, Any]:
        self._record(method, path)
        if method == "POST" and path == TOKEN_REVIEWS:  # the API server's answers to the metrics endpoint's reviews
            return {"status": {"authenticated": True, "user": {"username": "system:serviceaccount:mon:prometheus"}}}
        if method == "POST" and path == SUBJECT_ACCESS_REVIEWS:
            return {"status": {"allowed": True}}
        return await super().request(method, path, **options)

    @contextlib.asynccontextmanager
    async def watch(
        self, path: str, *, query: Mapping[str, QueryValue], decode: Decode | None = None
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        self._record("GET", path, watch=True)
        async with super().watch(path, query=query, decode=decode) as events:
            yield events


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not predicate():  # noqa: ASYNC110 - polling the resulting state is the point
            await asyncio.sleep(0.005)


def replicas(api: FakeApi) -> object:
    deployment = api.get(DEPLOYMENTS.path(namespace=NS, name=NAME)) or {}
    return (deployment.get("spec") or {}).get("replicas")


def service_port(api: FakeApi) -> object:
    service = api.get(SERVICES.path(namespace=NS, name=NAME)) or {}
    return ((service.get("spec") or {}).get("ports") or [{}])[0].get("port")


def budget_allows(api: FakeApi) -> object:
    budget = api.get(PODDISRUPTIONBUDGETS.path(namespace=NS, name=NAME)) or {}
    return (budget.get("spec") or {}).get("maxUnavailable")


async def reconcile_everything(api: RecordingApi) -> None:
    api.put(WEBSERVERS.path(namespace=NS), webserver(NAME, namespace=NS, replicas=2, port=80))
    solo = api.put(WEBSERVERS.path(namespace=NS), webserver(SOLO, namespace=NS, replicas=1, port=80))
    left = desired_pdb(WebServer.model_validate({**solo, "spec": {**solo["spec"], "replicas": 2}}))
    assert left is not None
    api.put(PODDISRUPTIONBUDGETS.path(namespace=NS), left)
    status = WEBSERVERS.path(namespace=NS, name=NAME) + "/status"
    api.fail("PUT", status, status_error(409, "Conflict", method="PUT", path=status))
    cache = InformerCache(api, WatchSettings(namespaces=[NS]))
    controller = setup_webserver_controller(cache, api=api, settings=ControllerSettings(workers=1))
    informers = asyncio.create_task(cache.run())
    await cache.synced()
    running = asyncio.create_task(controller.run())
    try:
        await until(lambda: bool((api.get(WEBSERVERS.path(namespace=NS, name=NAME)) or {}).get("status")))
        await until(lambda: bool(api.collections.get(EVENTS.path(namespace=NS))))
        assert replicas(api) == 2
        # The watches deliver nothing here, so the caches never see the children: the next reconcile meets 409
        # AlreadyExists, reads them, and repairs what someone changed by hand in each.
        deployment = api.get(DEPLOYMENTS.path(namespace=NS, name=NAME))
        service = api.get(SERVICES.path(namespace=NS, name=NAME))
        assert deployment is not None
        assert service is not None
        deployment["spec"]["replicas"] = 5
        service["spec"]["ports"][0]["port"] = 8080
        api.put(DEPLOYMENTS.path(namespace=NS), deployment)
        api.put(SERVICES.path(namespace=NS), service)
        budget = api.get(PODDISRUPTIONBUDGETS.path(namespace=NS, name=NAME))
        assert budget is not None
        budget["spec"]["maxUnavailable"] = 0
        api.put(PODDISRUPTIONBUDGETS.path(namespace=NS), budget)
        controller.enqueue((NS, NAME))
        await until(lambda: replicas(api) == 2 and service_port(api) == 80 and budget_allows(api) == 1)
        for _ in range(2):  # the same change again: the same Event, whose count is patched up the second time
            deployment = api.get(DEPLOYMENTS.path(namespace=NS, name=NAME))
            assert deployment is not None
            deployment["spec"]["replicas"] = 5
            api.put(DEPLOYMENTS.path(namespace=NS), deployment)
            controller.enqueue((NS, NAME))
            await until(lambda: replicas(api) == 2)
        await until(lambda: any(e.get("count", 1) > 1 for e in api.collections[EVENTS.path(namespace=NS)].values()))
        # Pods of the current version that stay unready: the kubelet's probe Events are listed.
        deployment = api.get(DEPLOYMENTS.path(namespace=NS, name=NAME))
        assert deployment is not None
        deployment["status"] = {
            "observedGeneration": deployment["metadata"].get("generation", 1),
            "replicas": 2,
            "updatedReplicas": 2,
            "readyReplicas": 1,
            "availableReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "True", "lastUpdateTime": "2020-01-01T00:00:00Z"}],
        }
        api.put(DEPLOYMENTS.path(namespace=NS), deployment)
        controller.enqueue((NS, NAME))
        await until(lambda: ("", "events", "list") in api.used)
        # A WebServer scaled below two replicas while the operator was away: its budget, listed at start, is deleted.
        await until(lambda: api.get(PODDISRUPTIONBUDGETS.path(namespace=NS, name=SOLO)) is None)
    finally:
        await controller.stop(1.0)
        await asyncio.gather(running, return_exceptions=True)
        informers.cancel()
        await asyncio.gather(informers, return_exceptions=True)


async def lead_and_release(api: RecordingApi) -> None:
    path = LEASES.path(namespace=NS, name="leader")
    elector = Lease(
        api,
        name="leader",
        namespace=NS,
        identity="me",
        settings=LeaseSettings(lease_duration=3, renew_deadline=2, retry_period=0.05),
    )
    await elector.acquire(
        may_try=no_shard_leases_live(api, namespace=NS, leader="leader", lease_duration=3, clock=time.monotonic)
    )
    acquired = api.get(path)
    hold = asyncio.create_task(elector.hold())
    await until(lambda: api.get(path) != acquired)  # renewed
    hold.cancel()
    await asyncio.gather(hold, return_exceptions=True)
    await elector.release()
    lease = api.get(path)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == ""


async def scrape_metrics(api: RecordingApi) -> None:
    verdict = await MetricsAuth(api).check(authorization="Bearer a-token")
    assert verdict.allowed, verdict


async def test_every_granted_verb_is_used_and_every_used_verb_is_granted() -> None:
    api = RecordingApi()
    await reconcile_everything(api)
    await lead_and_release(api)
    await scrape_metrics(api)
    assert api.used - OPERATOR_RULES == set(), "the operator sends requests its RBAC does not grant"
    assert OPERATOR_RULES - ADMISSION_ONLY - api.used == set(), "RBAC grants verbs the operator never uses"


def _rule_triples(rules: list[dict[str, Any]]) -> set[Rule]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_config_rbac_grants_exactly_the_rules() -> None:
    role = yaml.safe_load((ROOT / "config/rbac/role.yaml").read_text())
    leader = yaml.safe_load((ROOT / "config/rbac/leader_election_role.yaml").read_text())
    assert _rule_triples(role["rules"]) == MANAGER_RULES
    assert _rule_triples(leader["rules"]) == LEADER_ELECTION_RULES


def test_the_charts_manager_rules_are_exactly_the_rules() -> None:
    """The chart's ClusterRole/Role rules live in one template: its text, without rendering (no helm needed)."""
    helpers = (ROOT / "charts/webserver-operator/templates/_helpers.tpl").read_text()
    match = re.search(r'\{\{- define "webserver-operator.managerRules" -\}\}\n(.*?)\{\{- end \}\}', helpers, re.S)
    assert match is not None, "the managerRules template moved: update this test"
    assert _rule_triples(yaml.safe_load(match.group(1))) == MANAGER_RULES


def test_the_chart_readme_lists_exactly_the_rules() -> None:
    """The chart's README tells installers what the ServiceAccount may do: the same rules, no more, no less."""
    readme = (ROOT / "charts/webserver-operator/README.md").read_text()
    rows = re.findall(r"^\s*\| `([^`]*)`(?: \(core\))? \| `([^`]+)` \| ([^|]+) \|$", readme, re.M)
    listed = {
        (group.strip('"'), resource, verb)
        for group, resource, verbs in rows
        for verb in re.findall(r"\b(get|list|watch|create|update|patch|delete|deletecollection)\b", verbs.split("(")[0])
    }
    # And the one rule granted only with templateUpgrade.perMinute (the pacer's namespace opt-out, test_chart.py).
    assert listed == OPERATOR_RULES | {("", "namespaces", "get")}
