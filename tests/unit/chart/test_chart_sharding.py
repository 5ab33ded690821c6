"""The chart and config/ run sharded (sharding.shards > 1), and one shard renders what the chart rendered before.

Why: sharded, every replica reconciles its share of the shards, which needs more than a leader does: RBAC on every
Lease of the release namespace (member Leases have names nobody knows in advance), a PodDisruptionBudget so that a
drain does not evict several shard holders at once, and a spread over nodes. None of it may reach an installation
that does not shard: `helm upgrade` with the defaults must not change its Role, add a PodDisruptionBudget or roll
its Deployment. The rendered flags are parsed by the operator's own CLI parser and settings.

Rendered by the project's helm and kubectl (marker ``tools``); which Lease verbs the sharded code really sends is
checked in test_rbac_use_sharded.py.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from harness.paths import CHART, CONFIG
from tests.support.chart import (
    FULLNAME,
    KUSTOMIZE_NAMESPACE,
    KUSTOMIZE_PREFIX,
    LEADER_ELECTION_RULES,
    LEASE,
    MANAGER_RULES,
    METRICS_AUTH_RULES,
    NAMESPACE,
    RELEASE,
    SHARDED_LEADER_ELECTION_RULES,
    deployment_of,
    find,
    flag_values_of,
    granted_of,
    helm_binary,
    helm_template,
    kustomize,
    manager_of,
    one,
    render,
    restricted_violations,
    rule_triples,
)
from webserver_operator.cli import build_parser
from webserver_operator.manager.configuration import load_settings

pytestmark = pytest.mark.tools

SHARDED = ("--set", "sharding.shards=4,replicaCount=3")
SELECTOR = {
    "app.kubernetes.io/name": "webserver-operator",
    "app.kubernetes.io/instance": "rel",
    "app.kubernetes.io/component": "manager",
}
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": SELECTOR},
        "matchLabelKeys": ["pod-template-hash"],
    }
]
#: The leader election Role's rules, exactly, for every unsharded installation: the leader Lease by name, and create
#: and list (to see shard Leases of a sharded configuration still running), which cannot be limited by name.
ONE_LEADER_RULES = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": [LEASE],
        "verbs": ["get", "update"],
    },
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "list"]},
]


def _leader_role(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(docs, "Role", f"{FULLNAME}-leader-election")


def _pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment_of(docs)["spec"]["template"]["spec"]
    return spec


def test_sharded_values_reach_the_operator_as_its_own_settings() -> None:
    docs = render(*SHARDED)
    args = manager_of(docs)["args"]
    assert flag_values_of(args, "--shards") == ["4"]
    settings = load_settings(build_parser().parse_args(["run", *args])).leader_election
    assert (settings.shards, settings.leader_elect, settings.leader_election_id) == (4, True, LEASE)
    assert deployment_of(docs)["spec"]["replicas"] == 3


def test_one_shard_renders_the_objects_of_an_unsharded_chart() -> None:
    for args in ([], ["--set", "replicaCount=3"], ["--set", "replicaCount=3,watchNamespaces={team-a}"]):
        docs = render(*args)
        assert docs == render(*args, "--set", "sharding.shards=1"), args
        assert not flag_values_of(manager_of(docs)["args"], "--shards"), args
        assert _leader_role(docs)["rules"] == ONE_LEADER_RULES, args
        assert not find(docs, "PodDisruptionBudget"), args
        assert "topologySpreadConstraints" not in _pod_spec(docs), args


def test_sharded_leader_election_role_covers_every_lease_of_the_release_namespace() -> None:
    docs = render(*SHARDED)
    assert _leader_role(docs)["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "create", "update", "delete"],
        }
    ]
    assert granted_of(docs, FULLNAME) == {
        None: set(MANAGER_RULES | METRICS_AUTH_RULES),
        NAMESPACE: set(SHARDED_LEADER_ELECTION_RULES),
    }
    # Only the release namespace: the watched namespaces get the manager's rules and nothing on Leases.
    watched = render(*SHARDED, "--set", "watchNamespaces={team-a}")
    assert granted_of(watched, FULLNAME) == {
        None: set(METRICS_AUTH_RULES),
        "team-a": set(MANAGER_RULES),
        NAMESPACE: set(SHARDED_LEADER_ELECTION_RULES),
    }


def test_sharded_replicas_get_a_disruption_budget_and_a_spread_over_nodes() -> None:
    docs = render(*SHARDED)
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": SELECTOR}}
    assert deployment_of(docs)["spec"]["selector"] == {"matchLabels": SELECTOR}
    spec = _pod_spec(docs)
    assert spec["topologySpreadConstraints"] == SPREAD
    assert restricted_violations(spec) == []


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"podDisruptionBudget": {"minAvailable": 2}}, {"minAvailable": 2}),
        ({"podDisruptionBudget": {"maxUnavailable": "50%"}}, {"maxUnavailable": "50%"}),
        ({"podDisruptionBudget": {"enabled": True, "maxUnavailable": 2}}, {"maxUnavailable": 2}),
    ],
    ids=["minAvailable", "maxUnavailable", "enabled"],
)
def test_explicit_disruption_budget_values_win(values: dict[str, Any], expected: dict[str, Any]) -> None:
    pdb = one(render(*SHARDED, values=values), "PodDisruptionBudget")
    assert {k: v for k, v in pdb["spec"].items() if k != "selector"} == expected


def test_explicit_spread_constraints_win() -> None:
    mine = [{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]
    assert _pod_spec(render(*SHARDED, values={"topologySpreadConstraints": mine}))["topologySpreadConstraints"] == mine


def test_one_sharded_replica_gets_the_spread_but_no_disruption_budget() -> None:
    """A budget with maxUnavailable 1 over one pod would allow evicting it, and with minAvailable block every drain."""
    docs = render("--set", "sharding.shards=4")
    assert not find(docs, "PodDisruptionBudget")
    assert _pod_spec(docs)["topologySpreadConstraints"] == SPREAD
    assert flag_values_of(manager_of(docs)["args"], "--shards") == ["4"]


def _notes(*args: str) -> str:
    cmd = [str(helm_binary()), "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("NOTES:", 1)[1]


def test_notes_name_the_shard_leases_and_say_when_one_replica_holds_them_all() -> None:
    sharded = _notes(*SHARDED)
    assert f"Leases {NAMESPACE}/{LEASE}-shard-<0..3>" in sharded
    assert f"get leases -l webserver-operator.dev/shard-of={LEASE}" in sharded
    assert "gains nothing" not in sharded
    alone = _notes("--set", "sharding.shards=4")
    assert "One replica holds every shard, so sharding gains nothing yet: set replicaCount to 2 or more." in alone
    assert "Sharded" not in _notes()


def test_shards_without_leader_election_fail_with_what_to_set() -> None:
    result = helm_template("--set", "sharding.shards=4,leaderElection.enabled=false", check=False)
    assert result.returncode != 0
    assert "sharding.shards=4 needs leaderElection.enabled=true" in result.stderr, result.stderr
    assert "or sharding.shards=1" in result.stderr, result.stderr


@pytest.mark.parametrize("setting", ["sharding.shards=0", "sharding.shards=257", "sharding.shards=two", "sharding.x=1"])
def test_schema_rejects_bad_shard_values(setting: str) -> None:
    result = helm_template("--set", setting, check=False)
    assert result.returncode != 0, f"{setting} was accepted"
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr


# --- config/sharding: the same for `kubectl apply -k` ------------------------------------------------------------


@pytest.fixture(scope="module")
def sharded_config() -> list[dict[str, Any]]:
    return kustomize(CONFIG / "sharding")


def test_config_sharding_is_config_default_with_the_sharded_role_replicas_budget_and_spread(
    sharded_config: list[dict[str, Any]],
) -> None:
    default = kustomize(CONFIG / "default")
    ids = sorted((d["kind"], d["metadata"]["name"]) for d in sharded_config)
    budget = ("PodDisruptionBudget", f"{KUSTOMIZE_PREFIX}controller-manager")
    assert ids == sorted([*((d["kind"], d["metadata"]["name"]) for d in default), budget])
    role = one(sharded_config, "Role")
    assert rule_triples(role["rules"]) == SHARDED_LEADER_ELECTION_RULES
    assert all("resourceNames" not in rule for rule in role["rules"])
    assert rule_triples(one(default, "Role")["rules"]) == LEADER_ELECTION_RULES, "config/default keeps one leader"

    deployment = one(sharded_config, "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["replicas"] == 3
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    settings = load_settings(build_parser().parse_args(["run", *args])).leader_election
    assert (settings.shards, settings.leader_elect) == (8, True)
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread == [{**SPREAD[0], "labelSelector": {"matchLabels": selector}}]
    pdb = one(sharded_config, "PodDisruptionBudget")
    assert pdb["metadata"]["namespace"] == KUSTOMIZE_NAMESPACE
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    # Everything else is config/default's, unchanged.
    changed = {("Role", role["metadata"]["name"]), ("Deployment", deployment["metadata"]["name"]), budget}
    assert [d for d in sharded_config if (d["kind"], d["metadata"]["name"]) not in changed] == [
        d for d in default if (d["kind"], d["metadata"]["name"]) not in changed
    ]
