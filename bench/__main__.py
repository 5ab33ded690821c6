"""``python -m bench``: run the benchmark, profile the operator, or redraw a report (`make bench` calls ``run``).

    python -m bench run [--n 1000] [--zero 5000] [--rounds 1] [--systems raw,ours,go,kopf] [--event-loop asyncio]
    python -m bench profile [--n 1000]
    python -m bench report bench/results/<stamp>.json [--readme]
    python -m bench sharded [--n 10000] [--replicas 1,2,4] [--shards 8] [--client-side-too]  (bench/sharded.py)

``run`` writes bench/results/<stamp>.json (every measurement), <stamp>.md (the table), <stamp>-n<N>x<replicas>.png
(charts) and, unless --no-readme, the Results section of bench/README.md. ``--zero N`` adds a size with ``replicas: 0``,
which takes pod simulation out of the picture. The defaults (N=1000, one round, every scenario and system, the raw
limit at 50 requests in flight) are sized to finish within an hour on a 2-core machine; more rounds or sizes are a
choice. Only loopback API servers are used: each run gets its own fresh
local cluster (hack/cluster.sh, cluster name webserver-bench), deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from bench import charts, drop_cost, report, sharded
from bench.progress import say
from bench.runner import Plan, run_plan
from bench.scenarios import SCENARIOS
from bench.systems import EVENT_LOOPS, SYSTEMS
from harness.paths import ROOT

BENCH_DIR = ROOT / "bench"
RESULTS = BENCH_DIR / "results"


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _stamp() -> str:
    day = time.strftime("%Y-%m-%d")
    if not (RESULTS / f"{day}.json").exists():
        return day
    return time.strftime("%Y-%m-%d-%H%M")


def write_outputs(results: dict[str, object], json_path: Path, *, readme: bool) -> None:
    json_path.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    table = report.markdown(results)
    md_path = json_path.with_suffix(".md")
    pngs = charts.render(results, json_path.with_suffix(""))
    links = " ".join(f"![{p.stem}]({p.name})" for p in pngs)
    md_path.write_text(f"# Benchmark {json_path.stem}\n\n{table}\n{links}\n")
    say(f"wrote {json_path}, {md_path}, {', '.join(str(p) for p in pngs)}")
    if readme:
        # The results live in bench/README.md (the project README links it): links relative to bench/.
        rel = json_path.relative_to(BENCH_DIR)
        charts_md = " · ".join(f"[{p.stem}]({p.relative_to(BENCH_DIR)})" for p in pngs)
        section = f"Latest run: [{rel}]({rel}) (charts: {charts_md}). Reproduce with `make bench`.\n\n{table}"
        report.update_readme(BENCH_DIR / "README.md", section)
        say("updated the Results section of bench/README.md")


def cmd_run(args: argparse.Namespace) -> int:
    sizes = [(n, 1) for n in (args.n or [1000])] + [(n, 0) for n in args.zero or []]
    systems = [s for s in args.systems.split(",") if s]
    unknown_scenarios = {s for s in args.scenarios.split(",") if s} - set(SCENARIOS)
    if unknown_scenarios:
        print(
            f"unknown scenario(s) {', '.join(sorted(unknown_scenarios))}: choose from {', '.join(SCENARIOS)}",
            file=sys.stderr,
        )
        return 2
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        print(f"unknown system(s) {', '.join(sorted(unknown))}: choose from {', '.join(SYSTEMS)}", file=sys.stderr)
        return 2
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = _stamp()
    plan = Plan(
        sizes=sizes,
        rounds=args.rounds,
        systems=systems,
        raw_concurrency=_ints(args.raw_concurrency),
        repairs=args.repairs,
        steady_seconds=args.steady_seconds,
        scenarios=tuple(s for s in args.scenarios.split(",") if s),
        log_dir=RESULTS / "logs" / stamp,
        partial=RESULTS / "logs" / stamp / "runs.partial.json",
        event_loop=args.event_loop,
    )
    say(f"benchmark {stamp}: sizes {sizes}, {args.rounds} round(s), systems {systems}")
    results = asyncio.run(run_plan(plan))
    write_outputs(results, RESULTS / f"{stamp}.json", readme=not args.no_readme)
    failed = [r for r in results["runs"] if r.get("error")]
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    path = Path(args.json).resolve()  # the README's links are relative to bench/, whatever the current directory
    results = json.loads(path.read_text())
    if isinstance(results, list):  # runs.partial.json of an unfinished benchmark
        results = {"runs": results, "raw_best_concurrency": report.best_concurrency(results)}
        path = path.with_name(path.name.replace(".partial", "-partial"))
    write_outputs(results, path, readme=args.readme)
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from bench.profiling import profile  # noqa: PLC0415 - only this command needs py-spy

    RESULTS.mkdir(parents=True, exist_ok=True)
    return profile(n=args.n, out_dir=RESULTS / "profile", tag=args.tag)


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM like Ctrl-C: stop the operators and delete the cluster on the way out


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the benchmark (fresh cluster per system and round)")
    run.add_argument("--n", type=int, action="append", help="WebServers with 1 replica (repeatable; default 1000)")
    run.add_argument("--zero", type=int, action="append", help="WebServers with replicas: 0 (repeatable; e.g. 5000)")
    run.add_argument("--rounds", type=int, default=1, help="rounds per size, order alternating (default 1)")
    run.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {','.join(SYSTEMS)}")
    run.add_argument(
        "--raw-concurrency", default="50", help="raw driver's in-flight levels tried, e.g. 16,64 (default 50)"
    )
    run.add_argument("--repairs", type=int, default=100, help="child deletions and drift edits each (default 100)")
    run.add_argument("--steady-seconds", type=float, default=60.0, help="steady-state window (default 60)")
    run.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"operator scenarios to run (default all: {','.join(SCENARIOS)})",
    )
    run.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        help="this operator's --event-loop (default: not passed, so the operator's own default, auto)",
    )
    run.add_argument("--no-readme", action="store_true", help="do not update bench/README.md")
    run.set_defaults(func=cmd_run)
    rep = sub.add_parser("report", help="redraw the table and charts of a results JSON")
    rep.add_argument("json")
    rep.add_argument("--readme", action="store_true", help="also update bench/README.md")
    rep.set_defaults(func=cmd_report)
    prof = sub.add_parser("profile", help="py-spy and tracemalloc profile of this operator during bulk create")
    prof.add_argument("--n", type=int, default=1000)
    prof.add_argument(
        "--tag",
        help="names the outputs profile-n<N>-<tag>.* (default: today's date and short commit; '' for profile-n<N>.*)",
    )
    prof.set_defaults(func=cmd_profile)
    sharded.add_parser(sub, RESULTS)
    drop_cost.add_parser(sub)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
