"""``python -m chaos`` (``make chaos``): the full chaos run on a dedicated local cluster, report in docs/reliability.md.

Why a dedicated cluster (``CLUSTER_NAME=webserver-operator-chaos`` under the same KWOK_WORKDIR): the run kills
etcd and the API server and leaves 200 WebServers' worth of history; it must never share a control plane with a test
session. The cluster is created fresh (so the audit log and etcd start empty) with enough kwok nodes for the pods,
and deleted at the end unless ``--keep-cluster``.

``--preset sharded`` (or naming only sharded faults, ``--faults shard-kill,...``) runs the sharded scenario of issue 18
and writes its report into its own block of docs/reliability.md (``report.write_block``), leaving the full run's
report around it as it is. ``--cluster-name`` (default ``$CHAOS_CLUSTER_NAME``, else ``webserver-operator-chaos``)
names the dedicated cluster when several people share a machine: it is deleted and created again, so never give it
the name of a cluster in use.

Exit codes: 0 every verdict passed, 1 the run completed and some verdict failed (the report says which), 2 the
harness itself could not run or could not finish: the message says where (phase, fault, step, time) and the report
still holds every fault measured before it, the aborted one marked.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from chaos import report
from chaos.scenario import FULL, SHARDED, SHORT, Result, run, with_faults
from harness.paths import ROOT

CLUSTER_NAME = "webserver-operator-chaos"


def _progress(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)  # noqa: T201


def _hack(*args: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [str(ROOT / "hack" / args[0]), *args[1:]], capture_output=True, text=True, env=env, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"chaos: hack/{' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result.stdout.strip()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--preset", choices=("full", "short", "sharded"), default="full", help="full (default), short or sharded"
    )
    parser.add_argument("--faults", default="", help="comma-separated subset of the faults, in order")
    parser.add_argument("--webservers", type=int, default=0, help="override the number of WebServers")
    parser.add_argument("--report", default="docs/reliability.md", help="report path ('' to skip)")
    parser.add_argument("--keep-cluster", action="store_true", help="leave the chaos cluster running at the end")
    parser.add_argument("--nodes", type=int, default=6, help="kwok nodes (110 pods each)")
    parser.add_argument(
        "--cluster-name",
        default=os.environ.get("CHAOS_CLUSTER_NAME") or CLUSTER_NAME,
        help="the dedicated cluster (deleted and created afresh: never one in use)",
    )
    parser.add_argument(
        "--operator-source",
        default="",
        help="directory holding another version's webserver_operator package to run instead of this checkout's",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)

    config = {"full": FULL, "short": SHORT, "sharded": SHARDED}[args.preset]
    if args.faults:
        try:
            config = with_faults(config, [f.strip() for f in args.faults.split(",") if f.strip()])
        except ValueError as err:
            parser.error(str(err))
    if args.webservers:
        config = replace(config, webservers=args.webservers)
    if args.operator_source:
        source = Path(args.operator_source).resolve()
        if not (source / "webserver_operator" / "__init__.py").is_file():
            parser.error(f"--operator-source {source} holds no webserver_operator package")
        config = replace(config, operator_source=source)
    env = {**os.environ, "CLUSTER_NAME": args.cluster_name, "NODES": str(args.nodes)}
    _progress(f"fresh cluster {args.cluster_name} ({args.nodes} kwok nodes)")
    for attempt in (1, 2, 3):
        _hack("cluster.sh", "down", env=env)
        try:
            _hack("cluster.sh", "up", env=env)
            break
        except SystemExit as err:
            # kwokctl picks each component's port once, when the cluster is created; another cluster on the machine
            # can take one of them in between (seen as "address already in use" in a component log).
            if attempt == 3:
                raise
            _progress(f"creating the cluster failed (attempt {attempt}), trying again: {str(err)[-300:]}")
    kubeconfig = Path(_hack("cluster.sh", "kubeconfig", env=env))
    bin_dir = Path(_hack("tools.sh", "bindir", env=env))
    workdir = Path(tempfile.mkdtemp(prefix="chaos-"))
    _progress(f"operator logs and toxiproxy log in {workdir}")
    try:
        result = asyncio.run(
            run(
                config,
                cluster_dir=kubeconfig.parent,
                kubeconfig=kubeconfig,
                bin_dir=bin_dir,
                workdir=workdir,
                progress=_progress,
            )
        )
    finally:
        if not args.keep_cluster:
            _hack("cluster.sh", "down", env=env)
    command = "make chaos" + (
        f" CHAOS_ARGS={shlex.quote(' '.join(argv or sys.argv[1:]))}" if (argv or sys.argv[1:]) else ""
    )
    if args.report:
        path = ROOT / args.report
        if result.config.sharded:
            report.write_block(path, report.render(result, command=command))
        else:
            report.write(path, report.render(result, command=command))
        _progress(f"report written to {path}")
    print(report.summary(result), file=sys.stderr)  # noqa: T201
    return exit_code(result)


def exit_code(result: Result) -> int:
    """2 for a harness failure (whatever the verdicts measured before it), else 0 when every verdict passed, else 1."""
    if result.aborted is not None:
        return 2
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
