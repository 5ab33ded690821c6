"""The dashboard test's pure helpers (tests/support/panels.py, panel_png.legend): what is sent to Prometheus.

The e2e test trusts these to send a panel's query as Grafana would and to find an alert's signal; a helper that
dropped a selector or kept a threshold would make that test pass on nothing.
"""

from __future__ import annotations

import pytest

from harness.paths import CHART
from tests.support.panel_png import legend
from tests.support.panels import alert_signal, dashboard_queries, grafana_expr, rate_interval


@pytest.mark.parametrize(
    ("expr", "signal"),
    [
        ('absent(up{job="j"} == 1)', 'up{job="j"}'),
        (
            'max by (name) (leader_election_master_status{job="j"}) < 1',
            'max by (name) (leader_election_master_status{job="j"})',
        ),
        ("sum(rate(a[5m])) / sum(rate(b[5m])) > 0.1", "sum(rate(a[5m])) / sum(rate(b[5m]))"),
        ("(x > 3)", "x"),
        ("rate(x[5m])", "rate(x[5m])"),
        ("a > b", "a > b"),  # not a threshold: two series compared, kept whole
    ],
)
def test_alert_signal_drops_only_the_outer_threshold_and_absent(expr: str, signal: str) -> None:
    assert alert_signal(expr) == signal


def test_grafana_variables_are_filled_as_grafana_fills_them() -> None:
    expr = 'sum(rate(x{job=~"$job"}[$__rate_interval])) + y{job=~"${job}"}'
    assert grafana_expr(expr, job="a.b-c", scrape_interval_s=1, step_s=2) == (
        'sum(rate(x{job=~"a\\\\.b-c"}[4s])) + y{job=~"a\\\\.b-c"}'
    )
    assert rate_interval(15, 60) == "75s"  # $__interval + scrape interval when that is more than 4 scrapes
    with pytest.raises(AssertionError, match="does not know"):
        grafana_expr("x{namespace=~'$namespace'}", job="j", scrape_interval_s=1, step_s=2)


def test_every_panel_target_is_found_with_its_legend() -> None:
    queries = dashboard_queries(CHART / "files" / "dashboards" / "webserver-operator.json")
    assert len(queries) >= 20
    assert len({q.id for q in queries}) == len(queries)
    assert all(q.expr and q.title for q in queries)


def test_legend_fills_labels_as_grafana() -> None:
    assert (
        legend("{{controller}} {{ result }}", {"controller": "webserver", "result": "success"}) == "webserver success"
    )
    assert legend("{{pod}}", {}) == ""
