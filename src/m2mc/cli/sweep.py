"""``m2mc sweep SWEEP.toml --out DIR [--master URL]``: simulations as Spark tasks, then analysis.

Exit status: 0 every simulation ran and every check passed; 1 a simulation
failed or a check found violations; 2 bad input (sweep file, scenario).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep", help="run a grid of simulations as Spark tasks, then analyse them",
        description="Run scenarios x seeds x parameter grid (a TOML sweep file, see "
                    "docs/pipeline.md) as Spark tasks, one simulation each, then analyse "
                    "every trace as `m2mc analyze` does.")
    p.add_argument("spec", type=Path, metavar="SWEEP.toml", help="the sweep file")
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--master", default=None,
                   help="Spark master URL (default local[*]); OUT must then be shared storage")
    p.add_argument("--node", default=None, help="node whose timeline the report plots")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs an earlier sweep into OUT finished; run the rest")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from m2mc.cli.analyze import spark_conf
    from m2mc_pipeline.api import sweep
    from m2mc_pipeline.sweep import parse_spec

    spec = parse_spec(args.spec)  # bad sweep file: exit 2 before Spark starts
    result = sweep(spec, args.out, args.master, conf=spark_conf(args.conf),
                   progress=not args.quiet, exiting=True, timeline_node=args.node,
                   resume=args.resume)
    failed = result.failed
    for o in failed:
        print(f"failed: {o.task} seed {o.seed} ({Path(o.scenario).name}): {o.error}",
              file=sys.stderr)
    if result.analysis is None:
        print("no simulation succeeded; nothing analysed", file=sys.stderr)
        return 1
    bad = {k: v for k, v in result.analysis.violations.items() if v}
    if bad:
        listing = ", ".join(f"{k}={v}" for k, v in bad.items())
        print(f"violations: {listing} (details: {result.analysis.verify_path})",
              file=sys.stderr)
    print(f"{len(result.outcomes) - len(failed)}/{len(result.outcomes)} simulations ran; "
          f"report: {result.analysis.report_path}", file=sys.stderr)
    return 0 if result.ok else 1
