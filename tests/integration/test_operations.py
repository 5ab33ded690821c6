"""The operations surface on the real control plane: probes, the stall watchdog, leader election across processes.

Failover times measured here are printed (run with ``-s`` to see them) and asserted against the targets: a killed
leader is replaced within lease duration + 2 retry periods, a leader that exits gracefully within 3 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.operator import OperatorProcess
from tests.support.chart import MANAGER_RULES
from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver
from tests.support.proxy import FreezableProxy
from tests.support.rbac import grant_operator
from tests.support.webservers import wait_condition, wait_field, wait_ready
from webserver_operator.core.settings import ClientSettings, ServerSettings, WatchSettings
from webserver_operator.manager.configuration import Settings
from webserver_operator.manager.metrics import certs
from webserver_operator.manager.operator import Operator


def _token_kubeconfig(cluster: Cluster, namespace: str, sa: str, path: Path) -> Path:
    cluster.kubectl("create", "serviceaccount", sa, "-n", namespace)
    return cluster.serviceaccount_kubeconfig(namespace=namespace, serviceaccount=sa, path=path)


def test_readyz_waits_for_synced_caches_and_healthz_ignores_api_errors(
    cluster: Cluster, crd: str, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = _token_kubeconfig(cluster, namespace, "operator", tmp_path / "sa.kubeconfig")
    op = OperatorProcess(kubeconfig=kubeconfig, args=[f"--namespaces={namespace}"])
    try:
        op.wait_started(ready=False)
        time.sleep(2)
        code, text = op.probe("/readyz")
        assert code == 500, text
        assert "cache not synced" in text, text
        code, text = op.probe("/healthz")
        assert code == 200, f"API errors (403) must not fail liveness:\n{text}"
        assert any(
            "deployments" in line.get("msg", "") and "forbidden" in line.get("msg", "").lower()
            for line in op.snapshot()
        ), op.tail()
        # Grant what the operator needs in its namespace: it becomes ready without a restart.
        grant_operator(cluster, namespace, MANAGER_RULES)
        wait_until(lambda: op.probe("/readyz")[0] == 200, timeout=90, message=lambda: op.probe("/readyz")[1])
        cluster.apply(webserver("web", replicas=1), namespace=namespace)
        wait_ready(cluster, namespace, "web")
    finally:
        assert op.stop() == 0


def test_missing_rbac_for_children_is_reported_on_the_webserver(
    cluster: Cluster, crd: str, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = _token_kubeconfig(cluster, namespace, "operator", tmp_path / "sa.kubeconfig")
    grant_operator(cluster, namespace, MANAGER_RULES - {("apps", "deployments", "create")})
    op = OperatorProcess(kubeconfig=kubeconfig, args=[f"--namespaces={namespace}"])
    try:
        op.wait_started(timeout=60)
        cluster.apply(webserver("web", replicas=1), namespace=namespace)
        cond = wait_condition(cluster, namespace, "web", status="False", reason="DeploymentForbidden")
        assert 'Grant the operator\'s ServiceAccount "create" on resource "deployments"' in cond["message"], cond
        assert cluster.get_or_none("service", "web", namespace=namespace) is not None  # the rest still converges
        assert op.probe("/healthz")[0] == 200
    finally:
        assert op.stop() == 0


async def test_healthz_fails_while_the_event_loop_is_blocked(cluster: Cluster, crd: str, namespace: str) -> None:
    settings = Settings(
        client=ClientSettings(kubeconfig=str(cluster.kubeconfig)),
        watch=WatchSettings(namespaces=[namespace]),
        server=ServerSettings(health_probe_bind_address="127.0.0.1:0", metrics_bind_address="0", max_loop_lag=2.0),
    )
    collector_before = (gc.get_threshold(), gc.get_freeze_count())
    operator = Operator(settings)
    task = asyncio.create_task(operator.run())

    for _ in range(200):
        ready = operator.health_port is not None
        if ready and (await _probe_async(operator, "/readyz"))[0] == 200:
            break
        await asyncio.sleep(0.1)
    assert (await _probe_async(operator, "/healthz"))[0] == 200
    # Synced and ready, yet an operator embedded in this process left the process-wide collector settings alone.
    assert (gc.get_threshold(), gc.get_freeze_count()) == collector_before

    seen: dict[str, Any] = {}

    def probe_later() -> None:
        time.sleep(3.0)  # beyond the 2 s limit (the smallest accepted), well inside the block
        seen["result"] = _probe(operator, "/healthz")

    prober = threading.Thread(target=probe_later)
    prober.start()
    time.sleep(4.0)  # noqa: ASYNC251 - blocking the loop on purpose: this is what the probe must detect
    prober.join()
    code, text = seen["result"]
    assert code == 500, text
    assert "event loop blocked" in text, text
    await asyncio.sleep(1.0)
    assert (await _probe_async(operator, "/healthz"))[0] == 200
    operator.request_stop()
    assert await asyncio.wait_for(task, 30) == 0


def _probe(operator: Operator, path: str) -> tuple[int, str]:
    """GET a path of an in-process operator's health server: (status, body), also for 4xx/5xx answers."""
    assert operator.health_port is not None
    url = f"http://127.0.0.1:{operator.health_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


async def _probe_async(operator: Operator, path: str) -> tuple[int, str]:
    return await asyncio.to_thread(_probe, operator, path)


async def test_the_first_reconcile_does_not_wait_for_the_metrics_certificate(
    cluster: Cluster, crd: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While /metrics is still making its certificate, the WebServer gets its children; /readyz waits for /metrics."""
    certificate_made = threading.Event()
    real = certs.self_signed_pem

    def slow_certificate(hosts: list[str], *, validity_seconds: float | None = None) -> certs.SelfSigned:
        certificate_made.wait(60)
        return real(hosts, validity_seconds=validity_seconds)

    monkeypatch.setattr("webserver_operator.manager.metrics.server.self_signed_pem", slow_certificate)
    cluster.apply(webserver("web", replicas=1), namespace=namespace)
    settings = Settings(
        client=ClientSettings(kubeconfig=str(cluster.kubeconfig)),
        watch=WatchSettings(namespaces=[namespace]),
        server=ServerSettings(health_probe_bind_address="127.0.0.1:0", metrics_bind_address="127.0.0.1:0"),
    )
    operator = Operator(settings)
    task = asyncio.create_task(operator.run())
    try:
        for _ in range(600):
            found = await asyncio.to_thread(cluster.get_or_none, "deployment", "web", namespace=namespace)
            if found is not None or task.done():
                break
            await asyncio.sleep(0.1)
        assert found is not None, "the WebServer's Deployment was not created while /metrics was starting"
        code, text = await _probe_async(operator, "/readyz")
        assert code == 500, text
        assert "metrics server starting" in text, text
        certificate_made.set()
        for _ in range(300):
            code, text = await _probe_async(operator, "/readyz")
            if code == 200:
                break
            await asyncio.sleep(0.1)
        assert code == 200, text
        assert "metrics server listening" in text, text
    finally:
        certificate_made.set()
        operator.request_stop()
        assert await asyncio.wait_for(task, 30) == 0


async def test_a_metrics_port_in_use_stops_the_operator_with_exit_code_2(
    cluster: Cluster, crd: str, namespace: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = Settings(
            client=ClientSettings(kubeconfig=str(cluster.kubeconfig)),
            watch=WatchSettings(namespaces=[namespace]),
            server=ServerSettings(
                health_probe_bind_address="127.0.0.1:0",
                metrics_bind_address=f"127.0.0.1:{port}",
                metrics_secure=False,
            ),
        )
        assert await asyncio.wait_for(Operator(settings).run(), 60) == 2


def _proxied(cluster: Cluster, tmp_path: Path) -> tuple[FreezableProxy, Path]:
    """A proxy in front of the API server, and a kubeconfig that goes through it."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    server = admin["clusters"][0]["cluster"]["server"]
    host, port = server.removeprefix("https://").rsplit(":", 1)
    proxy = FreezableProxy(host, int(port))
    admin["clusters"][0]["cluster"]["server"] = f"https://{host}:{proxy.port}"
    kubeconfig = tmp_path / "proxied.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(admin))
    return proxy, kubeconfig


def test_stalled_watch_is_restarted_by_the_watchdog(cluster: Cluster, crd: str, namespace: str, tmp_path: Path) -> None:
    proxy, kubeconfig = _proxied(cluster, tmp_path)
    op = OperatorProcess(
        kubeconfig=kubeconfig,
        args=[f"--namespaces={namespace}", "--watch-timeout=60", "--watch-stall-timeout=4", "--read-timeout=3"],
    )
    try:
        op.wait_started()
        stalled_before = op.metric("webserver_operator_watch_restarts_total", {"reason": "stalled"})
        frozen = proxy.freeze()
        assert frozen >= 3, f"expected the three watch connections to be open, found {frozen}"
        wait_until(
            lambda: op.metric("webserver_operator_watch_restarts_total", {"reason": "stalled"}) >= stalled_before + 3,
            timeout=30,
            message="the watchdog to restart the three silent watches",
        )
        # The restarted watches work: a new WebServer is reconciled through fresh connections.
        cluster.apply(webserver("web", replicas=1), namespace=namespace)
        wait_ready(cluster, namespace, "web", timeout=60)
        assert op.probe("/healthz")[0] == 200
    finally:
        op.stop()
        proxy.close()


def test_liveness_holds_while_the_api_server_is_unreachable(
    cluster: Cluster, crd: str, namespace: str, tmp_path: Path
) -> None:
    """An outage longer than twice the stall timeout: the watches are silent, yet /healthz stays 200 (no restarts)."""
    proxy, kubeconfig = _proxied(cluster, tmp_path)
    op = OperatorProcess(
        kubeconfig=kubeconfig,
        args=[f"--namespaces={namespace}", "--watch-timeout=60", "--watch-stall-timeout=2", "--read-timeout=2"],
    )
    try:
        op.wait_started()
        proxy.close()  # the API server is gone for this operator: connections are refused from now on
        deadline = time.monotonic() + 8.0  # 4 x the stall timeout, twice what liveness used to allow
        while time.monotonic() < deadline:
            status, text = op.probe("/healthz")
            assert status == 200, text
            time.sleep(0.5)
    finally:
        op.stop()
        proxy.close()


def test_forty_watched_namespaces_do_not_starve_requests_or_the_lease(
    cluster: Cluster, crd: str, namespace: str
) -> None:
    """120 watches (3 per namespace) must not take every pooled connection from lists, writes and the Lease."""
    with contextlib.ExitStack() as stack:
        others = [stack.enter_context(cluster.temporary_namespace(f"t-pool-{i}")) for i in range(39)]
        op = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            args=[
                f"--namespaces={','.join([namespace, *others])}",
                "--leader-elect",
                f"--leader-election-namespace={namespace}",
            ],
        )
        try:
            op.wait_started(timeout=60)
            cluster.apply(webserver("web", replicas=1), namespace=namespace)
            wait_ready(cluster, namespace, "web", timeout=60)
            assert op.proc.poll() is None, f"the operator exited (it does when it cannot renew its Lease):\n{op.tail()}"
        finally:
            op.stop()


def _leader(ops: dict[str, OperatorProcess]) -> list[str]:
    leaders = []
    for name, op in ops.items():
        if op.proc.poll() is None and op.metric("leader_election_master_status") == 1:
            leaders.append(name)
    return leaders


def _elected_pair(cluster: Cluster, namespace: str) -> dict[str, OperatorProcess]:
    args = [
        f"--namespaces={namespace}",
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        "--lease-duration=4",
        "--renew-deadline=3",
        "--retry-period=1",
    ]
    ops = {}
    for name in ("op-a", "op-b"):
        ops[name] = OperatorProcess(kubeconfig=cluster.kubeconfig, args=args, env={**os.environ, "POD_NAME": name})
    for op in ops.values():
        op.wait_started()  # a standby is ready too: its caches are synced
    wait_until(lambda: len(_leader(ops)) == 1, timeout=20, message="exactly one leader")
    time.sleep(2)
    assert len(_leader(ops)) == 1, "two leaders"
    return ops


def _lease_holder(cluster: Cluster, namespace: str) -> str:
    lease = cluster.get_json("lease", "webserver-operator-leader", namespace=namespace)
    return str(lease["spec"].get("holderIdentity") or "")


def test_killed_leader_is_replaced_and_drift_is_repaired(cluster: Cluster, crd: str, namespace: str) -> None:
    ops = _elected_pair(cluster, namespace)
    try:
        (leader,) = _leader(ops)
        assert _lease_holder(cluster, namespace).startswith(f"{leader}_")
        cluster.apply(webserver("web", replicas=2), namespace=namespace)
        wait_ready(cluster, namespace, "web")
        standby = next(n for n in ops if n != leader)
        ops[leader].kill()
        killed_at = time.monotonic()
        cluster.kubectl("scale", "deployment/web", "-n", namespace, "--replicas=5")
        wait_until(lambda: _leader(ops) == [standby], timeout=15, interval=0.1, message="the standby to lead")
        took_over = time.monotonic() - killed_at
        wait_field(cluster, "deployment", "web", namespace=namespace, path="spec.replicas", expected=2, timeout=15)
        repaired = time.monotonic() - killed_at
        print(f"\nfailover after kill -9: standby leading after {took_over:.2f}s, drift repaired after {repaired:.2f}s")
        assert took_over < 4 + 2 * 1 + 1.0, f"took {took_over:.2f}s (lease 4s + 2 retry periods)"
        assert _lease_holder(cluster, namespace).startswith(f"{standby}_")
    finally:
        for op in ops.values():
            op.stop()


def test_sigterm_leader_releases_and_standby_takes_over_quickly(cluster: Cluster, crd: str, namespace: str) -> None:
    ops = _elected_pair(cluster, namespace)
    try:
        (leader,) = _leader(ops)
        standby = next(n for n in ops if n != leader)
        cluster.apply(webserver("web", replicas=1), namespace=namespace)
        wait_ready(cluster, namespace, "web")
        assert ops[leader].stop(signal.SIGTERM) == 0
        exited_at = time.monotonic()
        cluster.kubectl("scale", "deployment/web", "-n", namespace, "--replicas=3")
        wait_field(cluster, "deployment", "web", namespace=namespace, path="spec.replicas", expected=1, timeout=10)
        repaired = time.monotonic() - exited_at
        print(f"\nfailover after SIGTERM: standby repaired drift {repaired:.2f}s after the leader exited")
        assert repaired < 3.0, f"standby took {repaired:.2f}s"
        assert _leader(ops) == [standby]
    finally:
        for op in ops.values():
            op.stop()


def test_deposed_leader_stops_and_exits_non_zero(cluster: Cluster, crd: str, namespace: str) -> None:
    op = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        args=[
            f"--namespaces={namespace}",
            "--leader-elect",
            f"--leader-election-namespace={namespace}",
            "--lease-duration=4",
            "--renew-deadline=3",
            "--retry-period=1",
        ],
    )
    try:
        op.wait_started()
        wait_until(lambda: op.metric("leader_election_master_status") == 1, timeout=15, message="leading")
        cluster.kubectl(
            "patch",
            "lease",
            "webserver-operator-leader",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec":{"holderIdentity":"someone-else","leaseDurationSeconds":60}}',
        )
        taken = time.monotonic()
        op.proc.wait(timeout=10)
        print(f"\ndeposed leader exited {time.monotonic() - taken:.2f}s after its Lease was taken")
        assert op.proc.returncode == 1, op.tail()
        assert any("leader election lost" in line.get("msg", "") for line in op.snapshot()), op.tail()
        assert _lease_holder(cluster, namespace) == "someone-else"  # not released over the new holder
    finally:
        op.stop()
