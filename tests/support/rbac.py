"""What the API server's authorizer lets a user do, as `kubectl auth can-i --list` reports it.

Shared by the tests that check least privilege against the real API server (the operator's ServiceAccount, the
user-facing aggregated roles): Kubernetes itself is the judge, not a re-implementation of RBAC.
"""

from __future__ import annotations

import re

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
