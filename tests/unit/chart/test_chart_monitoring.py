"""The chart's monitoring: PrometheusRule alerts and the Grafana dashboard ConfigMap, as rendered.

The alerts are what `helm template` renders with the values under `metrics.prometheusRule`; promtool (built by
`make tools`) checks them (`promtool check rules`) and runs their unit tests (`promtool test rules`, cases in
tests/unit/chart/promtool/). Every alert and panel must read only metrics that the operator's own registry exports.
The shard alert exists only when the chart is sharded (sharding.shards > 1), and has its own promtool cases.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.paths import CHART
from tests.support.chart import FULLNAME, NAMESPACE, built_tool, find, one, render
from tests.support.monitoring import exported_series_names, unknown_metrics

pytestmark = pytest.mark.tools

PROMTOOL_CASES = Path(__file__).parent / "promtool" / "webserver-operator.rules.test.yaml"
ALERTS = {
    "WebServerOperatorDown",
    "WebServerOperatorNoLeader",
    "WebServerOperatorReconcileErrors",
    "WebServerOperatorWorkQueueLatency",
    "WebServerOperatorWorkQueueDepth",
    "WebServerNotReady",
}
SHARDED_CASES = Path(__file__).parent / "promtool" / "webserver-operator.sharded.rules.test.yaml"
SHARD_ALERT = "WebServerOperatorShardWithoutHolder"
ENABLED = ("--set", "metrics.prometheusRule.enabled=true,metrics.grafanaDashboard.enabled=true")
SHARDED = ("--set", "sharding.shards=4,replicaCount=2")


def _rule_groups(*args: str) -> list[dict[str, Any]]:
    rule = one(render(*ENABLED, *args), "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def _alerts(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(built_tool("promtool")), *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd
    )


def _write_rules(groups: list[dict[str, Any]], directory: Path) -> Path:
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def test_monitoring_is_off_by_default_and_needs_metrics() -> None:
    for docs in (render(), render(*ENABLED, "--set", "metrics.enabled=false")):
        assert not find(docs, "PrometheusRule")
        assert not find(docs, "ConfigMap")


def test_the_rule_ships_every_alert() -> None:
    rule = one(render(*ENABLED), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == NAMESPACE
    alerts = _alerts(rule["spec"]["groups"])
    assert set(alerts) == ALERTS
    for name, alert in alerts.items():
        assert alert["labels"]["severity"] in ("critical", "warning"), name
        assert alert["annotations"]["summary"], name
        assert alert["annotations"]["description"], name
        assert f'job="{FULLNAME}-metrics"' in alert["expr"], name


def test_promtool_check_rules(tmp_path: Path) -> None:
    rules = _write_rules(_rule_groups(), tmp_path)
    result = _promtool("check", "rules", "--lint=all", "--lint-fatal", str(rules), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout, result.stdout


def test_promtool_unit_tests(tmp_path: Path) -> None:
    _write_rules(_rule_groups(), tmp_path)
    shutil.copy(PROMTOOL_CASES, tmp_path / PROMTOOL_CASES.name)
    result = _promtool("test", "rules", PROMTOOL_CASES.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


def test_promtool_fails_a_broken_expectation(tmp_path: Path) -> None:
    """The unit tests can fail: with a higher depth threshold the depth alert must not fire, and promtool says so."""
    _write_rules(_rule_groups("--set", "metrics.prometheusRule.workQueueDepth=1000"), tmp_path)
    shutil.copy(PROMTOOL_CASES, tmp_path / PROMTOOL_CASES.name)
    result = _promtool("test", "rules", PROMTOOL_CASES.name, cwd=tmp_path)
    assert result.returncode != 0
    assert "WebServerOperatorWorkQueueDepth" in result.stdout + result.stderr


def test_every_alert_reads_only_exported_metrics() -> None:
    exprs = [alert["expr"] for alert in _alerts(_rule_groups(*SHARDED)).values()]
    assert len(exprs) == len(ALERTS) + 1
    assert unknown_metrics(exprs, exported_series_names()) == {}


def test_the_shard_alert_only_when_sharded() -> None:
    assert SHARD_ALERT not in _alerts(_rule_groups())
    assert SHARD_ALERT not in _alerts(_rule_groups("--set", "sharding.shards=1,replicaCount=3"))
    alerts = _alerts(_rule_groups(*SHARDED))
    assert set(alerts) == ALERTS | {SHARD_ALERT}
    shard = alerts[SHARD_ALERT]
    assert shard["labels"]["severity"] == "critical"
    assert shard["for"] == "1m"
    assert f'job="{FULLNAME}-metrics"' in shard["expr"]


def test_promtool_checks_and_unit_tests_the_sharded_rules(tmp_path: Path) -> None:
    rules = _write_rules(_rule_groups(*SHARDED), tmp_path)
    check = _promtool("check", "rules", "--lint=all", "--lint-fatal", str(rules), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(ALERTS) + 1} rules found" in check.stdout, check.stdout
    shutil.copy(SHARDED_CASES, tmp_path / SHARDED_CASES.name)
    result = _promtool("test", "rules", SHARDED_CASES.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


def test_the_sharded_cases_fail_without_the_shard_alert(tmp_path: Path) -> None:
    """The cases can fail: rendered unsharded there is no shard alert, and the killed holder's case says so."""
    _write_rules(_rule_groups(), tmp_path)
    shutil.copy(SHARDED_CASES, tmp_path / SHARDED_CASES.name)
    result = _promtool("test", "rules", SHARDED_CASES.name, cwd=tmp_path)
    assert result.returncode != 0
    assert SHARD_ALERT in result.stdout + result.stderr


def test_rule_values_reach_the_alerts(tmp_path: Path) -> None:
    values = {
        "replicaCount": 2,
        "sharding": {"shards": 4},
        "metrics": {
            "prometheusRule": {
                "enabled": True,
                "labels": {"release": "prom"},
                "alertLabels": {"team": "web"},
                "selector": 'job="custom", cluster="prod"',
                "webServerNotReadyFor": "30m",
                "reconcileErrorRatio": 0.25,
                "workQueueLatencySeconds": 5,
                "workQueueDepth": 7,
            }
        },
    }
    result = subprocess.run(
        [str(built_tool("helm")), "template", "rel", str(CHART), "--namespace", NAMESPACE, "-f", "-"],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rule = one([d for d in yaml.safe_load_all(result.stdout) if d], "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prom"
    alerts = _alerts(rule["spec"]["groups"])
    assert set(alerts) == ALERTS | {SHARD_ALERT}
    for name, alert in alerts.items():
        assert alert["labels"]["team"] == "web", name
        assert 'job="custom", cluster="prod"' in alert["expr"], name
    assert alerts["WebServerNotReady"]["for"] == "30m"
    assert alerts["WebServerOperatorReconcileErrors"]["expr"].rstrip().endswith("> 0.25")
    assert alerts["WebServerOperatorWorkQueueLatency"]["expr"].rstrip().endswith("> 5")
    assert alerts["WebServerOperatorWorkQueueDepth"]["expr"].rstrip().endswith("> 7")
    rules = _write_rules(rule["spec"]["groups"], tmp_path)
    check = _promtool("check", "rules", "--lint=all", "--lint-fatal", str(rules), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr


def test_no_leader_alert_only_with_leader_election() -> None:
    alerts = _alerts(_rule_groups("--set", "leaderElection.enabled=false"))
    assert set(alerts) == ALERTS - {"WebServerOperatorNoLeader"}


@pytest.mark.parametrize("setting", ["metrics.prometheusRule.selector=job", "metrics.prometheusRule.workQueueDepth=0"])
def test_schema_rejects_bad_rule_values(setting: str) -> None:
    result = subprocess.run(
        [str(built_tool("helm")), "template", "rel", str(CHART), "--set", setting],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0, f"{setting} was accepted"


def test_dashboard_config_map() -> None:
    docs = render(*ENABLED)
    config_map = one(docs, "ConfigMap", f"{FULLNAME}-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == NAMESPACE
    (key,) = config_map["data"]
    assert key.endswith(".json")
    shipped = json.loads((CHART / "files" / "dashboards" / "webserver-operator.json").read_text())
    assert json.loads(config_map["data"][key]) == shipped
    moved = one(
        render(
            *ENABLED,
            "--set",
            "metrics.grafanaDashboard.namespace=monitoring,metrics.grafanaDashboard.annotations.grafana_folder=Ops",
        ),
        "ConfigMap",
    )
    assert moved["metadata"]["namespace"] == "monitoring"
    assert moved["metadata"]["annotations"] == {"grafana_folder": "Ops"}


def test_service_monitor_keeps_the_operators_labels() -> None:
    monitor = one(render("--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
