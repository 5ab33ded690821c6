"""Command line: `webserver-operator run | manifests | version`.

One entry point for the container image, the Makefile (`make manifests`) and people. Heavy imports happen inside
the subcommands so `version` and `manifests` stay fast and never need a cluster.

Run by the container's entry point and by people; hands settings to ``manager.operator.run_operator``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webserver_operator import __version__

__all__ = ["build_parser", "main"]


def _manifests(args: argparse.Namespace) -> int:
    from webserver_operator.api.chart import write_chart_crd  # noqa: PLC0415 - keep `version` import-light
    from webserver_operator.api.crd import write_manifests  # noqa: PLC0415

    paths = write_manifests(Path(args.output))
    if args.chart_dir:
        paths.append(write_chart_crd(Path(args.chart_dir)))
    for path in paths:
        print(f"wrote {path}")  # noqa: T201 - CLI output
    return 0


def _run(args: argparse.Namespace) -> int:
    from webserver_operator.manager.configuration import SettingsError, load_settings  # noqa: PLC0415
    from webserver_operator.manager.logs import configure_logging  # noqa: PLC0415
    from webserver_operator.manager.operator import run_operator  # noqa: PLC0415

    try:
        settings = load_settings(args)
    except SettingsError as err:
        print(f"webserver-operator: {err}", file=sys.stderr)  # noqa: T201 - fail fast before logging is set up
        return 2
    configure_logging(level=settings.log.log_level, fmt=settings.log.log_format)
    import logging  # noqa: PLC0415

    from webserver_operator.kube.errors import ConfigurationError  # noqa: PLC0415
    from webserver_operator.manager.eventloop import choose_loop, run  # noqa: PLC0415

    try:
        loop = choose_loop(settings.controller.event_loop)
        logging.getLogger("webserver_operator").info("event loop: %s", loop.note)
        return run(run_operator(settings), loop)
    except KeyboardInterrupt:
        return 0
    except ConfigurationError as err:
        # A setting points at nothing usable (kubeconfig, context): say what to set, without a traceback.
        print(f"webserver-operator: {err}", file=sys.stderr)  # noqa: T201 - a clear line, as for bad settings
        return 2
    except Exception as err:
        logging.getLogger("webserver_operator").exception("operator failed: %s", err)
        return 2


def _version(_: argparse.Namespace) -> int:
    print(f"webserver-operator {__version__}")  # noqa: T201 - CLI output
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="webserver-operator", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    from webserver_operator.manager.configuration import add_arguments  # noqa: PLC0415

    run = sub.add_parser("run", help="run the operator against the current kubeconfig or in-cluster config")
    add_arguments(run)
    run.set_defaults(func=_run)
    manifests = sub.add_parser("manifests", help="write the generated CRD under config/")
    manifests.add_argument("--output", default="config", help="config directory to write into (default: config)")
    manifests.add_argument(
        "--chart-dir",
        default="charts/webserver-operator",
        help="Helm chart to write the CRD copy into (default: charts/webserver-operator; empty to skip)",
    )
    manifests.set_defaults(func=_manifests)
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=_version)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
