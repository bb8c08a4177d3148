"""``m2mc demo [--out DIR]``: the end-to-end tour (docs/interfaces.md §3).

Runs the steps of :data:`m2mc.demo.tour.STEPS` (the M2MP steps; without ``--quick``
also those :mod:`m2mc.demo.steps` adds: the chat on real nodes, the sweep, the
pipeline). Exit status 0 if every step passed, 1 if one found a problem (a message
did not arrive). With ``--out DIR`` the results go to ``DIR/demo.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from m2mc.demo import tour
from m2mc.demo.steps import register as register_full_tour
from m2mc.demo.tour import DemoContext


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="the main job, end to end, on embedded defaults",
        description="The main job, end to end, on loopback: M2MP listeners and senders over "
                    "multicast, the M2MP daemon serving local processes, a threaded chat "
                    "between 'm2mc chat --script' participants in an S_b group and bots in a "
                    "causal and a total-order group on real nodes, a simulator "
                    "sweep comparing the orderings (as Spark tasks), and the PySpark pipeline "
                    "over all of it: verify.json, metrics.json and report.html under --out.")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="write demo.json, the traces and the report here "
                             "(default: demo-out for the full tour)")
    parser.add_argument("--quick", action="store_true",
                        help="only the M2MP steps (multicast, daemon): seconds, no Spark")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed for payloads and group/port choice (default: random)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    ctx = DemoContext(out=out, rng=random.Random(args.seed))
    if not getattr(args, "quick", False) and not any(name == "pipeline" for name, _ in tour.STEPS):
        register_full_tour()
    started = time.monotonic()
    results = tour.run_steps(ctx)
    passed = sum(r.ok for r in results)
    print(f"m2mc demo: {passed}/{len(results)} steps passed in "
          f"{time.monotonic() - started:.1f}s")
    if out is not None:
        (out / "demo.json").write_text(json.dumps(
            {"ok": passed == len(results), "steps": [asdict(r) for r in results]}, indent=2))
    return 0 if passed == len(results) else 1
