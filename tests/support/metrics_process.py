"""Run the metrics server and the probe server in a process of their own, as the operator runs them.

Why a process: the memory a flood of connections costs is read from this process' resident set (``VmRSS`` and
``VmHWM`` in /proc/PID/status), which must not include the test runner's or the flooding client's. Used by
tests/unit/manager/test_connection_flood.py and by the measurement commands in docs/monitoring.md:

    python -m tests.support.metrics_process KUBECONFIG [--max-connections N]

It prints ``{"metrics": PORT, "health": PORT}`` as one JSON line once both listen, and serves until its standard
input closes.
"""

from __future__ import annotations

import argparse
import json
import sys

from webserver_operator import metrics
from webserver_operator.core.settings import ClientSettings, ServerSettings
from webserver_operator.manager.endpoints import ProbeServer
from webserver_operator.manager.metrics.server import MetricsServer
from webserver_operator.manager.probes import Probes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kubeconfig")
    parser.add_argument("--max-connections", type=int, default=None)
    args = parser.parse_args()
    metrics.WEBSERVER_READY.labels(namespace="team-a", name="web", condition="True").set(1)
    probes = Probes(liveness={"event-loop": lambda: (True, "event loop responsive")})
    health = ProbeServer(probes, health_bind=("127.0.0.1", 0))
    health.start()
    server_settings: dict[str, object] = {"metrics_bind_address": "127.0.0.1:0"}
    if args.max_connections is not None:
        server_settings["metrics_max_connections"] = args.max_connections
    server = MetricsServer(
        server=ServerSettings.model_validate(server_settings), client=ClientSettings(kubeconfig=args.kubeconfig)
    )
    server.start()
    print(json.dumps({"metrics": server.port, "health": health.health_port}), flush=True)
    sys.stdin.read()  # until the parent closes it
    server.stop()
    health.stop()


if __name__ == "__main__":
    main()
