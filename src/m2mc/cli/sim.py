"""``m2mc sim SCENARIO.toml --seed N --out DIR`` (docs/interfaces.md §3).

Runs a deterministic simulation and writes the trace (docs/interfaces.md §4)
under DIR. Prints one JSON object: run id, seed, every drawn parameter (swarm
mode), the counters (events, deliveries, drops by reason, crashes, ...) and the
messages sent per group. The same scenario and seed give byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from m2mc.errors import UsageError


def _seed(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a seed >= 0, got {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sim", help="run a deterministic simulation scenario",
        description="Simulate SCENARIO (TOML, see docs/simulator.md) with one seed; write "
                    "run.json and trace/<node>.jsonl under --out.")
    parser.add_argument("scenario", metavar="SCENARIO.toml", help="scenario file")
    parser.add_argument("--seed", type=_seed, required=True, help="the run's seed (integer)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--swarm", action="store_true",
                        help="draw fault parameters from the seed within the [swarm] ranges")
    packets = parser.add_mutually_exclusive_group()
    packets.add_argument("--trace-packets", dest="packets", action="store_true", default=None,
                         help="also write packet_out/packet_in events")
    packets.add_argument("--no-trace-packets", dest="packets", action="store_false")
    parser.add_argument("--parquet", action="store_true", default=None,
                        help="also write trace/<node>.parquet (needs pyarrow)")
    parser.add_argument("--no-trace", dest="trace", action="store_false", default=None,
                        help="write no trace files (run.json only)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from m2mc.sim import run_scenario

    if args.parquet:
        from m2mc.trace.writer import parquet_available

        if not parquet_available():
            raise UsageError("--parquet needs pyarrow: pip install 'm2mc[pipeline]'")
    scenario = Path(args.scenario)
    if not scenario.is_file():
        raise UsageError(f"no such scenario file: {scenario}")
    if args.swarm:
        print(f"swarm seed {args.seed}", file=sys.stderr)
    result = run_scenario(scenario, args.seed, Path(args.out), swarm=args.swarm,
                          trace_packets=args.packets, parquet=args.parquet, trace=args.trace)
    if args.swarm:
        for path, value in result.drawn.items():
            print(f"swarm {path} = {value!r}", file=sys.stderr)
    print(json.dumps({"run": result.run_id, "scenario": result.scenario, "seed": result.seed,
                      "out": str(result.out), "drawn": result.drawn,
                      "chaos": len(result.chaos),
                      "counters": dict(result.counters), "sent": dict(result.sent),
                      "wall_seconds": round(result.wall_seconds, 3)}, sort_keys=True))
    return 0
