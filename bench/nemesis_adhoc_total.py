"""A nemesis sweep of ad hoc total order: ``examples/scenarios/lossy-adhoc-total.toml``
(eight peers; the ``ops`` group in total order; loss, duplication, reordering, a
partition that heals, a crash and restart) on many seeds, each run through the
simulator and checked against docs/interfaces.md §5 (unexpected, duplicated, lost,
S_b, causal and total order) by tests/group/tracecheck.py, the Spark-free mirror of
``m2mc analyze``'s checks. Prints one JSON object::

    {"scenario": ..., "loss": ..., "duplicate": ..., "seeds": 200, "valid": 200,
     "invalid": [], "violations": {}, "wall_seconds": ...}

``invalid`` lists the seeds with any violation, ``violations`` their counts. A run
that fails is kept under ``--keep`` (by default none is kept). ``--analyze`` also
runs ``m2mc analyze`` (the Spark pipeline) over the runs of the first seeds kept for
it and adds its verdict. Exit status 1 if any seed is invalid.

    .venv/bin/python bench/nemesis_adhoc_total.py --seeds 1-200 --jobs 2
    .venv/bin/python bench/nemesis_adhoc_total.py --seeds 1-200 --loss 0.3 --duplicate 0.5 \
        --analyze 200 --keep DIR

2026-11-29: seeds 1-200 at the file's 20% loss, 200 valid (5,346 s); at 30% loss and
50% duplication, 200 valid and ``m2mc analyze`` over all 200 VALID (5,002 s).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "scenarios" / "lossy-adhoc-total.toml"


def load_checker() -> ModuleType:
    """tests/group/tracecheck.py (the tests' checker, by path: tests is no package)."""
    spec = importlib.util.spec_from_file_location("tracecheck",
                                                  ROOT / "tests" / "group" / "tracecheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spec_of(path: Path, loss: float | None, duplicate: float | None) -> dict[str, Any]:
    """The scenario with the lan's loss and duplication replaced where given."""
    with path.open("rb") as f:
        spec = tomllib.load(f)
    lan = spec["domains"]["lan"]
    if loss is not None:
        lan["loss"] = loss
    if duplicate is not None:
        lan["duplicate"] = duplicate
    return spec


def run_seed(spec: dict[str, Any], seed: int, out: Path, keep: Path | None,
             analyze: bool) -> tuple[int, dict[str, int]]:
    """Simulate one seed and check its trace: (seed, violation counts by check)."""
    from m2mc.sim import run_scenario

    run_scenario(spec, seed, out)
    checker = load_checker()
    found = checker.check(checker.load(out / "trace"))
    counts = {name: len(items) for name, items in found.items() if items}
    if keep is not None and (counts or analyze):
        shutil.copytree(out, keep / f"seed-{seed}", dirs_exist_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    return seed, counts


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds.extend(range(int(lo), int(hi or lo) + 1))
    return seeds


def spark_verdict(dirs: list[Path], out: Path) -> dict[str, Any]:
    """``m2mc analyze`` over ``dirs`` at once: its exit status and verify.json's verdict."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "m2mc.cli", "analyze", *map(str, dirs),
                           "--out", str(out), "--quiet", "--master", "local[1]",
                           "--conf", "spark.sql.shuffle.partitions=2"],
                          capture_output=True, text=True, env=env, check=False)
    report = out / "verify.json"
    if not report.exists():
        return {"exit": done.returncode, "error": done.stderr[-500:]}
    verify = json.loads(report.read_text())
    return {"exit": done.returncode, "runs": len(dirs), "valid": verify["valid"],
            "violations": {k: c["violations"] for k, c in verify["checks"].items()
                           if c["violations"]}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", type=Path, default=SCENARIO)
    p.add_argument("--seeds", default="1-200", help="e.g. 1-200 or 5,11,19 (1-200)")
    p.add_argument("--loss", type=float, default=None, help="the lan's loss (the file's)")
    p.add_argument("--duplicate", type=float, default=None,
                   help="the lan's duplication (the file's)")
    p.add_argument("--jobs", type=int, default=2, help="simulations at once (2)")
    p.add_argument("--keep", type=Path, default=None, help="keep failed runs here")
    p.add_argument("--analyze", type=int, default=0, metavar="N",
                   help="also run m2mc analyze (Spark) over the first N seeds (0: not)")
    args = p.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    spec = spec_of(args.scenario, args.loss, args.duplicate)
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="m2mc-nemesis-"))
    keep = args.keep or (work / "kept" if args.analyze else None)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    invalid: dict[int, dict[str, int]] = {}
    try:
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run_seed, spec, seed, work / f"run-{seed}", keep,
                                   seed in seeds[:args.analyze])
                       for seed in seeds]
            for future in futures:
                seed, counts = future.result()
                if counts:
                    invalid[seed] = counts
                    print(f"seed {seed}: {counts}", file=sys.stderr, flush=True)
        lan = spec["domains"]["lan"]
        result: dict[str, Any] = {
            "scenario": str(args.scenario.relative_to(ROOT) if args.scenario.is_relative_to(ROOT)
                            else args.scenario),
            "loss": lan.get("loss", 0.0), "duplicate": lan.get("duplicate", 0.0),
            "seeds": len(seeds),
            "valid": len(seeds) - len(invalid), "invalid": sorted(invalid),
            "violations": {str(s): c for s, c in sorted(invalid.items())}}
        if args.analyze and keep is not None:
            dirs = [keep / f"seed-{s}" for s in seeds[:args.analyze]]
            result["analyze"] = spark_verdict(dirs, work / "analysis")
        result["wall_seconds"] = round(time.perf_counter() - start, 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
