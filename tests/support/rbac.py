"""What the API server's authorizer lets a user do, as `kubectl auth can-i --list` reports it.

Shared by the tests that check least privilege against the real API server (the operator's ServiceAccount, the
user-facing aggregated roles): Kubernetes itself is the judge, not a re-implementation of RBAC.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tests.support.chart import Rule
from tests.support.cluster import Cluster

# What any authenticated identity may do (system:basic-user, system:discovery, system:public-info-viewer).
DEFAULT_RULES: frozenset[Rule] = frozenset(
    {
        ("authentication.k8s.io", "selfsubjectreviews", "create"),
        ("authorization.k8s.io", "selfsubjectaccessreviews", "create"),
        ("authorization.k8s.io", "selfsubjectrulesreviews", "create"),
    }
)
_CAN_I_LINE = re.compile(r"^(\S*)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$")


def can_i_list(cluster: Cluster, *, user: str, namespace: str) -> dict[Rule, set[str]]:
    """What ``user`` (impersonated) may do in ``namespace``: {(group, resource, verb): resourceNames}.

    Non-resource URLs and the rules every authenticated identity has are left out.
    """
    out = cluster.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", namespace).stdout
    granted: dict[Rule, set[str]] = {}
    for line in out.splitlines()[1:]:
        match = _CAN_I_LINE.match(line)
        assert match, f"unexpected `kubectl auth can-i --list` line: {line!r}"
        token, _urls, names, verbs = match.groups()
        if not token:
            continue  # non-resource URLs (discovery, /healthz...) granted to everyone
        resource_and_group, _, subresource = token.partition("/")
        resource, _, group = resource_and_group.partition(".")
        if subresource:
            resource = f"{resource}/{subresource}"
        for verb in verbs.split():
            granted.setdefault((group, resource, verb), set()).update(names.split())
    for rule in DEFAULT_RULES:
        granted.pop(rule, None)
    return granted


def grant_operator(cluster: Cluster, namespace: str, rules: Iterable[Rule]) -> None:
    """The ServiceAccount ``operator`` gets exactly ``rules`` in ``namespace``: a Role, bound once.

    Called again, it replaces the Role's rules (a test takes rights away and gives them back) and keeps the binding.
    """
    verbs: dict[tuple[str, str], list[str]] = {}
    for group, resource, verb in sorted(rules):
        verbs.setdefault((group, resource), []).append(verb)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "operator"},
        "rules": [{"apiGroups": [g], "resources": [r], "verbs": v} for (g, r), v in verbs.items()],
    }
    cluster.apply(role, namespace=namespace)
    if cluster.kubectl("get", "rolebinding", "operator", "-n", namespace, check=False).returncode != 0:
        cluster.kubectl(
            "create", "rolebinding", "operator", "-n", namespace, "--role=operator",
            f"--serviceaccount={namespace}:operator",
        )  # fmt: skip
