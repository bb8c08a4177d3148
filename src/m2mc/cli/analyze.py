"""``m2mc analyze DIR... --out DIR [--master URL]`` (docs/interfaces.md §3).

Verifies and measures traces with the PySpark pipeline (m2mc_pipeline), which
is imported only when the command runs: ``import m2mc`` never loads pyspark.
Exit status: 0 every check passed, 1 a check found violations, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "analyze", help="verify and measure traces with the PySpark pipeline",
        description="Verify (docs/interfaces.md §5) and measure the traces under each DIR; "
                    "write verify.json, metrics.json, report.html and Parquet tables "
                    "under --out (--verify-only: verify.json alone). Exit 1 when any check "
                    "finds a violation.")
    p.add_argument("dirs", nargs="+", metavar="DIR",
                   help="trace directory (*.jsonl / *.parquet + run.json); local, hdfs:// "
                        "or s3a://")
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--master", default=None,
                   help="Spark master URL (default local[*]; e.g. spark://HOST:7077, yarn)")
    p.add_argument("--tables", default=None,
                   help="where Parquet tables go (default OUT/tables; on a cluster a shared "
                        "path such as hdfs:///m2mc/tables)")
    p.add_argument("--node", default=None,
                   help="node whose message timeline the report plots "
                        "(default: worst p99 delivery delay)")
    p.add_argument("--no-self-delivery", action="store_true",
                   help="do not require a sender to deliver its own messages")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration (repeatable)")
    p.add_argument("--verify-only", action="store_true",
                   help="only the checks: write verify.json (and the examples of any "
                        "violation), no metrics.json, report.html or other tables; the "
                        "verdict in about half the time on a small trace")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def spark_conf(pairs: list[str]) -> dict[str, str]:
    from m2mc.errors import UsageError

    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--conf wants KEY=VALUE, got {pair!r}")
        conf[key] = value
    return conf


def run(args: argparse.Namespace) -> int:
    from m2mc_pipeline.api import analyze

    result = analyze(args.dirs, args.out, args.master, timeline_node=args.node,
                     self_delivery=not args.no_self_delivery, tables=args.tables,
                     conf=spark_conf(args.conf), progress=not args.quiet, exiting=True,
                     verify_only=args.verify_only)
    bad = {k: v for k, v in result.violations.items() if v}
    if bad:
        listing = ", ".join(f"{k}={v}" for k, v in bad.items())
        print(f"violations: {listing} (details: {result.verify_path})", file=sys.stderr)
        return 1
    where = result.verify_path if args.verify_only else result.report_path
    print(f"valid: {result.verify['counts']['events']} events checked; "
          f"{'verdict' if args.verify_only else 'report'}: {where}", file=sys.stderr)
    return 0
