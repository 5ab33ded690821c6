"""The baseline check on rendered pod specs: each rule of the Pod Security baseline level, and what it allows.

The same pods go to the real API server's PodSecurity admission in tests/integration/test_pod_security.py.
"""

from __future__ import annotations

import pytest

from tests.support.pod_security import ALLOWED, BEYOND, Beyond, pod_spec
from webserver_operator.core.podsecurity import baseline_violations


def test_a_plain_pod_and_everything_baseline_allows_pass() -> None:
    assert baseline_violations(pod_spec()) == []
    assert baseline_violations(ALLOWED) == []


@pytest.mark.parametrize("case", BEYOND, ids=[c.id for c in BEYOND])
def test_each_baseline_rule_names_what_it_refuses(case: Beyond) -> None:
    violations = baseline_violations(case.spec)
    assert len(violations) == 1, violations
    assert case.named in violations[0]
