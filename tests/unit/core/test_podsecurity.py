"""The baseline check on rendered pod specs: each rule of the Pod Security baseline level, and what it allows.

The same pods go to the real API server's PodSecurity admission in tests/integration/test_pod_security.py, which
checks that each line here is the one admission gives.
"""

from __future__ import annotations

import pytest

from tests.support.pod_security import ALLOWED_EDGES, BEYOND, Allowed, Beyond, pod_spec
from webserver_operator.core.podsecurity import baseline_violations, template_violations


@pytest.mark.parametrize("case", ALLOWED_EDGES, ids=[c.id for c in ALLOWED_EDGES])
def test_what_baseline_allows_passes(case: Allowed) -> None:
    assert baseline_violations(case.spec, annotations=case.annotations) == []


@pytest.mark.parametrize("case", BEYOND, ids=[c.id for c in BEYOND])
def test_each_baseline_rule_names_what_it_refuses(case: Beyond) -> None:
    violations = baseline_violations(case.spec, annotations=case.annotations)
    assert len(violations) == 1, violations
    assert case.named in violations[0]


def test_every_check_of_a_pod_beyond_everything_is_one_line_in_admissions_order() -> None:
    spec = pod_spec(
        {
            "securityContext": {"privileged": True, "capabilities": {"add": ["NET_ADMIN", "SYS_ADMIN"]}},
            "readinessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}},
        },
        hostPID=True,
        hostNetwork=True,
        volumes=[{"name": "root", "hostPath": {"path": "/"}}, {"name": "etc", "hostPath": {"path": "/etc"}}],
    )
    assert baseline_violations(spec) == [
        "host namespaces (hostNetwork=true, hostPID=true)",
        'privileged (container "web" must not set securityContext.privileged=true)',
        'non-default capabilities (container "web" must not include "NET_ADMIN", "SYS_ADMIN" in '
        "securityContext.capabilities.add)",
        'hostPath volumes (volumes "root", "etc")',
        'probe or lifecycle host (container "web" uses probe or lifecycle host "10.0.0.1")',
    ]


def test_a_pod_template_is_checked_with_its_annotations() -> None:
    template = {
        "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/web": "unconfined"}},
        "spec": pod_spec(),
    }
    assert template_violations(template) == [
        "forbidden AppArmor profile (annotation must not set AppArmor profile type to "
        '"container.apparmor.security.beta.kubernetes.io/web="unconfined"")'  # Go's joinQuote does not escape
    ]
    assert template_violations({"spec": pod_spec()}) == []
