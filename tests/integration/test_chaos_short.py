"""The short chaos run inside ``make test``: 20 WebServers under churn, etcd frozen, the API server restarted, the
leader's connections reset, with the same verdicts as ``make chaos`` (see chaos/verdicts.py and docs/reliability.md).

Two operator replicas with leader election run as ServiceAccounts of the audited namespace, each behind its own
toxiproxy, watching only this run's namespace. etcd and kube-apiserver are the session cluster's own processes: the
run restarts whatever a fault left dead before it returns, and the test waits for /readyz, so the tests after it find
a working cluster.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chaos import report
from chaos.scenario import SHORT, run
from tests.support.cluster import Cluster, local_kubeconfig, wait_until

# Part of `make test`; the marker lets `make chaos-short` run it alone.
pytestmark = pytest.mark.chaos


def test_short_chaos_run_passes_every_verdict(cluster: Cluster, crd: str, tmp_path: Path) -> None:
    if cluster.backend != "local":
        pytest.skip("signals etcd and kube-apiserver by PID: needs the local control plane (CLUSTER=local)")
    kubeconfig = local_kubeconfig()
    lines: list[str] = []
    try:
        result = asyncio.run(
            run(
                SHORT,
                cluster_dir=kubeconfig.parent,
                kubeconfig=kubeconfig,
                bin_dir=cluster.bin_dir,
                workdir=tmp_path,
                progress=lines.append,
            )
        )
    finally:
        wait_until(
            lambda: cluster.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
            timeout=90,
            message="the API server to be ready again after the chaos run",
        )
    rendered = tmp_path / "reliability.md"
    rendered.write_text(report.render(result, command="pytest tests/integration/test_chaos_short.py"))
    print("\n".join(lines))
    print(report.summary(result))
    assert result.faults, "no fault ran"
    assert result.passed, report.summary(result) + f"\nfull report: {rendered}; operator logs: {tmp_path}"
