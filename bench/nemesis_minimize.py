"""Shrink a failing nemesis run to the fewest faults that still fail.

    .venv/bin/python bench/nemesis_minimize.py SCENARIO.toml SEED --out min.toml

Draws the seed's faults from the scenario's ``[[chaos]]`` entries (as ``m2mc sim``
does), writes them into a plain scenario, and then removes faults one at a time
(crashes, partitions, sleeps) for as long as the run still fails the checks of
tests/infra/trace_check.py (unexpected, duplicated, lost, total order) on the same
seed; a removal that makes the run pass is put back. The smallest failing scenario
is written to ``--out`` (a plain TOML file: ``m2mc sim OUT --seed SEED`` fails), and
one JSON line says what is left and the first problems it shows.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "infra"))  # trace_check, the tests' fast checker


def problems(raw: dict[str, Any], seed: int) -> list[str]:
    from trace_check import verify

    from m2mc.sim import run_scenario

    with tempfile.TemporaryDirectory(prefix="m2mc-min-") as tmp:
        run_scenario(raw, seed, Path(tmp))
        return verify(Path(tmp) / "trace").problems


def faults(raw: dict[str, Any]) -> list[tuple[str, int]]:
    """Every fault of a plain scenario: ("crash"|"partition", index), ("sleep", node idx)."""
    out = [(kind, i) for kind in ("crash", "partition")
           for i in range(len(raw.get("faults", {}).get(kind, [])))]
    for i, node in enumerate(raw.get("node", [])):
        if node.get("mobility", {}).get("model") == "waypoints" and "sleeps" in node:
            out += [("sleep", i)]
    return out


def without(raw: dict[str, Any], kind: str, index: int) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    if kind == "sleep":
        node = out["node"][index]
        node["mobility"] = {"model": "static"}
        node.pop("sleeps", None)
    else:
        del out["faults"][kind][index]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", type=Path)
    parser.add_argument("seed", type=int)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import tomli_w

    from m2mc.sim.runner import resolve

    spec, _ = resolve(args.scenario, args.seed, swarm=False)
    raw: dict[str, Any] = json.loads(json.dumps(spec.raw))
    sleepers = {n for e in spec.episodes if e["fault"] == "sleep" for n in e["nodes"]}
    for node in raw.get("node", []):
        if node.get("id") in sleepers:
            node["sleeps"] = True  # a marker for faults(); removed before writing
    if not problems(_plain(raw), args.seed):
        print(json.dumps({"seed": args.seed, "fails": False}))
        return 1
    changed = True
    while changed:
        changed = False
        for kind, index in reversed(faults(raw)):
            trial = without(raw, kind, index)
            if problems(_plain(trial), args.seed):
                raw, changed = trial, True
                print(f"removed {kind} {index}: still fails", file=sys.stderr, flush=True)
    plain = _plain(raw)
    args.out.write_text(tomli_w.dumps(plain))
    left = problems(plain, args.seed)
    print(json.dumps({"seed": args.seed, "fails": True, "out": str(args.out),
                      "crashes": plain.get("faults", {}).get("crash", []),
                      "partitions": plain.get("faults", {}).get("partition", []),
                      "sleepers": [n["id"] for n in plain.get("node", [])
                                   if n.get("mobility", {}).get("model") == "waypoints"],
                      "problems": len(left), "first": left[:5]}))
    return 0


def _plain(raw: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    for node in out.get("node", []):
        node.pop("sleeps", None)
    return out


if __name__ == "__main__":
    sys.exit(main())
