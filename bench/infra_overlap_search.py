"""Two overlapping host crashes, searched case by case (docs/decisions.md, "Only the
keepers' acknowledgments commit").

    PYTHONPATH=src .venv/bin/python bench/infra_overlap_search.py [--cases 3000]
        [--first 0] [--jobs 2]

Each case (drawn from its number) runs the restart property test's workload
(tests/infra/test_properties_restarts.py: three durable hosts, six members sending and
roaming, every host back at the end) with subscriptions on (``subscribe`` or ``all``
of its extensions) and two crashes that overlap: host X down at round a for r1
rounds, host Y down at a round inside X's outage; 0 or 10% loss. Then seeds/001's
P1-P7 must hold (tests/infra/test_properties.py's ``check_all``). The random search of
the property test found the keepers' bug once in many runs; this search aims at it.
Before the fix 2 of cases 0-3,199 stalled (370 and 2,207), after it none (2026-11-29).

Prints one JSON line per failing case (number, seed, extensions, loss, faults, error)
and then ``{"cases", "failed", "wall"}``; exit status 1 when any case failed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "infra"))  # the harness and the checks


def run_case(number: int) -> list[object] | None:
    """One case; None when P1-P7 hold, else what failed."""
    from infra_harness import Net
    from test_properties import EXTENSIONS, check_all
    from test_properties_restarts import Fault, run_with_faults

    from m2mc.infra.config import InfraConfig

    draw = random.Random(number)
    ext = draw.choice([e for e in sorted(EXTENSIONS) if EXTENSIONS[e].get("subscribe")])
    a, r1 = draw.randint(10, 60), draw.randint(3, 25)
    b, r2 = a + draw.randint(1, r1), draw.randint(3, 25)
    x = draw.choice(["H1", "H2", "H3"])
    y = draw.choice([h for h in ("H1", "H2", "H3") if h != x])
    faults = [Fault(at=a, hosts=(x,), rounds=r1), Fault(at=b, hosts=(y,), rounds=r2)]
    loss = draw.choice([0.0, 0.0, 0.1])
    seed = draw.randint(0, 10_000)
    try:
        net = Net(seed=seed, loss=loss, cfg=InfraConfig(**EXTENSIONS[ext]))  # type: ignore[arg-type]
        run_with_faults(net, faults)
        check_all(net)
    except AssertionError as exc:
        return [number, seed, ext, loss, [vars(f) for f in faults], repr(exc)[:200]]
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=3000)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    t0 = time.perf_counter()
    with Pool(args.jobs) as pool:
        failed = [r for r in pool.imap_unordered(
            run_case, range(args.first, args.first + args.cases), chunksize=4) if r]
    for r in failed:
        print(json.dumps(r))
    print(json.dumps({"cases": args.cases, "failed": len(failed),
                      "wall": round(time.perf_counter() - t0, 1)}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
