"""The ClusterRoles for people who use WebServers, as rendered by the chart and by config/rbac.

Both install paths ship the same three roles (same rules, same aggregation labels), as tests/support/chart.py's
USER_ROLES says; tests/integration/test_user_rbac.py checks on a real API server that aggregation gives `view` and
`edit` users exactly those rights.
"""

from __future__ import annotations

import pytest

from harness.paths import ROOT
from tests.support.chart import FULLNAME, USER_ROLES, find, granted_of, kustomize, render, user_roles_of

pytestmark = pytest.mark.tools


def test_chart_ships_the_three_aggregated_user_roles() -> None:
    docs = render()
    assert user_roles_of(docs, f"{FULLNAME}-") == USER_ROLES
    # Nothing binds them: they reach people only through view/edit/admin (or a binding the admin writes).
    bound = {d["roleRef"]["name"] for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert not bound & {f"{FULLNAME}-{suffix}" for suffix in USER_ROLES}
    assert all(d["metadata"]["labels"]["app.kubernetes.io/component"] == "rbac" for d in find(docs, "ClusterRole"))


def test_user_roles_follow_the_release_name_and_exist_with_watch_namespaces() -> None:
    docs = render("--set", "watchNamespaces={team-a}", release="other")
    assert user_roles_of(docs, "other-webserver-operator-") == USER_ROLES
    assert granted_of(docs, "other-webserver-operator")  # the operator's own RBAC is still there


@pytest.mark.parametrize("setting", ["rbac.aggregateClusterRoles=false", "rbac.create=false"])
def test_user_roles_can_be_switched_off(setting: str) -> None:
    assert user_roles_of(render("--set", setting), f"{FULLNAME}-") == {}


def test_config_rbac_ships_the_same_roles() -> None:
    docs = kustomize(ROOT / "config" / "rbac")
    assert user_roles_of(docs, "") == USER_ROLES
