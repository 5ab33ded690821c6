"""Secure /metrics against the real API server: 401 without a valid token, 403 without the right, 200 with it, and
a flood from any pod that leaves the operator within bounds.

The operator runs as a real process under a ServiceAccount holding exactly config/rbac's manager and metrics-auth
roles (the reviews are the API server's answers, through the RBAC users install). Scrapers are ServiceAccounts with
TokenRequest tokens: ``prometheus`` bound to config/rbac's metrics-reader ClusterRole, ``tenant`` bound to nothing
for metrics. Scrapes are HTTPS with ``insecureSkipVerify``, as the ServiceMonitor does with the self-signed
certificate; with ``--metrics-cert-path`` (cert-manager's case) the client verifies the server against the CA.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.operator import OperatorProcess
from harness.paths import ROOT
from harness.scrape import metric_value, scrape
from tests.support.cluster import Cluster, wait_until
from tests.support.serviceaccounts import ClusterRoleBindings, cluster_role_from, service_account_token
from tests.support.tls import issue_certificate

RBAC = ROOT / "config" / "rbac"


@dataclass
class Identities:
    namespace: str
    operator_kubeconfig: Path
    unreviewing_kubeconfig: Path
    prometheus: str
    tenant: str


@pytest.fixture(scope="module")
def identities(cluster: Cluster, crd: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identities]:
    workdir = tmp_path_factory.mktemp("metrics-auth")
    bindings = ClusterRoleBindings(cluster)
    manager, metrics_auth = cluster_role_from(RBAC / "role.yaml"), cluster_role_from(RBAC / "metrics_auth_role.yaml")
    with cluster.temporary_namespace("metrics-auth") as namespace:
        try:
            for sa, roles in (("operator", (manager, metrics_auth)), ("unreviewing", (manager,))):
                cluster.kubectl("create", "serviceaccount", sa, "-n", namespace)
                for role in roles:
                    bindings.bind(role, namespace=namespace, serviceaccount=sa)
            prometheus = service_account_token(cluster, namespace=namespace, name="prometheus")
            bindings.bind(
                cluster_role_from(RBAC / "metrics_reader_role.yaml"), namespace=namespace, serviceaccount="prometheus"
            )
            yield Identities(
                namespace=namespace,
                operator_kubeconfig=cluster.serviceaccount_kubeconfig(
                    namespace=namespace, serviceaccount="operator", path=workdir / "operator.kubeconfig"
                ),
                unreviewing_kubeconfig=cluster.serviceaccount_kubeconfig(
                    namespace=namespace, serviceaccount="unreviewing", path=workdir / "unreviewing.kubeconfig"
                ),
                prometheus=prometheus,
                tenant=service_account_token(cluster, namespace=namespace, name="tenant"),
            )
        finally:
            bindings.cleanup()


@pytest.fixture(scope="module")
def secure_operator(identities: Identities, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log_path = tmp_path_factory.mktemp("secure-operator") / "operator.log"
    proc = OperatorProcess(
        kubeconfig=identities.operator_kubeconfig, args=["--metrics-secure"], log_path=log_path
    ).wait_started()
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.tail()


def test_without_a_token_or_with_a_forged_one_the_answer_is_401(secure_operator: OperatorProcess) -> None:
    assert secure_operator.metrics_scheme == "https"
    status, body = scrape(secure_operator.metrics_url)
    assert status == 401, body
    assert "Authorization: Bearer <token>" in body
    assert scrape(secure_operator.metrics_url, token="not-a-token")[0] == 401


def test_a_serviceaccount_without_the_metrics_reader_role_gets_403(
    secure_operator: OperatorProcess, identities: Identities
) -> None:
    status, body = scrape(secure_operator.metrics_url, token=identities.tenant)
    assert status == 403, body
    assert f"Authorization denied for user system:serviceaccount:{identities.namespace}:tenant" in body
    assert "webserver_operator" not in body


def test_a_serviceaccount_bound_to_metrics_reader_reads_the_metrics(
    secure_operator: OperatorProcess, identities: Identities
) -> None:
    status, body = scrape(secure_operator.metrics_url, token=identities.prometheus)
    assert status == 200, body
    assert "# TYPE webserver_operator_managed_webservers gauge" in body
    # The reviews were the API server's: the operator's own client counted them (POST, 201).
    assert metric_value(body, "rest_client_requests_total", {"method": "POST", "code": "201"}) >= 2


def test_an_operator_without_review_rights_answers_500_and_says_which_role_it_needs(
    identities: Identities, tmp_path: Path
) -> None:
    proc = OperatorProcess(
        kubeconfig=identities.unreviewing_kubeconfig, args=["--metrics-secure"], log_path=tmp_path / "operator.log"
    ).wait_started()
    try:
        status, body = scrape(proc.metrics_url, token=identities.prometheus)
        assert status == 500, body
        assert "Authentication failed" in body
        # The answer can reach the test before the log line reaches the reader of the operator's stderr.
        wait_until(
            lambda: any(
                "needs create on tokenreviews (authentication.k8s.io)" in str(line.get("msg", ""))
                for line in proc.snapshot()
            ),
            timeout=10,
            message=lambda: f"the operator to log which role it needs:\n{proc.tail()}",
        )
    finally:
        assert proc.stop() == 0, proc.tail()


def test_a_mounted_certificate_is_served_and_verifies_against_its_ca(identities: Identities, tmp_path: Path) -> None:
    ca = issue_certificate(tmp_path / "certs")
    proc = OperatorProcess(
        kubeconfig=identities.operator_kubeconfig,
        args=["--metrics-secure", f"--metrics-cert-path={tmp_path / 'certs'}"],
        log_path=tmp_path / "operator.log",
    ).wait_started()
    try:
        status, body = scrape(proc.metrics_url, token=identities.prometheus, cafile=str(ca))
        assert status == 200, body
    finally:
        assert proc.stop() == 0, proc.tail()


def test_a_flood_from_any_pod_leaves_the_operator_within_bounds_and_prometheus_served(
    secure_operator: OperatorProcess, identities: Identities
) -> None:
    """Issue 32 major 1 and 2 on the real API server: 2000 bare connects, 2000 idle TLS, 2000 made-up tokens.

    The operator runs as a process with its defaults; the flood comes from another process
    (tests/support/connflood.py). Its peak resident set may grow by at most 64 MiB (the bound and why:
    tests/unit/manager/test_connection_flood.py); /healthz and the reader's scrapes answer 200 throughout. Before the
    fix the same kind of flood took the operator from 56 MB to 618 MB. Measured: 58.0 MiB, peak +35.1 MiB, every
    probe and scrape 200 (a loaded 2-core machine, the flood 49 s).
    """
    pid = secure_operator.proc.pid
    assert scrape(secure_operator.metrics_url, token=identities.prometheus)[0] == 200  # the reader's identity cached
    before_kib = _status_kib(pid, "VmRSS")
    port = secure_operator.metrics_url.split(":")[2].split("/")[0]
    flood = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.support.connflood", "127.0.0.1", port),
            *("--bare", "2000", "--tls", "2000", "--tokens", "2000", "--hold", "1"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    probes: list[int | str] = []
    scrapes: list[int | str] = []
    while flood.poll() is None:
        try:
            probes.append(secure_operator.probe("/healthz", timeout=1)[0])
            scrapes.append(scrape(secure_operator.metrics_url, token=identities.prometheus, timeout=10)[0])
        except OSError as err:
            probes.append(repr(err))
        time.sleep(0.5)
    out, _ = flood.communicate(timeout=60)
    report = json.loads(out)
    grown_mib = (_status_kib(pid, "VmHWM") - before_kib) / 1024
    print(f"\noperator RSS {before_kib / 1024:.1f} MiB, peak +{grown_mib:.1f} MiB; {report}; scrapes {scrapes}")
    assert report["bare_opened"] == 2000 and report["tls_opened"] == 2000
    assert grown_mib <= 64
    assert probes and all(code == 200 for code in probes), probes
    assert scrapes and all(code == 200 for code in scrapes), scrapes


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")
