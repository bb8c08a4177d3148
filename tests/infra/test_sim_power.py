"""examples/scenarios/infra-power.toml on the simulator: four of nine members are
switched off during traffic (a crash: whatever they had not saved is gone) and come
back, one of them in another cell. Each resumes its membership, and every member
delivers every message once, in one total order (seeds/001 P1, P2, P4-P6 on the
trace; docs/interfaces.md §5 by ``m2mc analyze`` over seeds 1-20, in
test_sim_verdict.py; the suite's share of them unless M2MC_SEEDS=all, tests/seed_sweeps.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trace_check import verify

from seed_sweeps import sweep
from sim_cache import SimRuns

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "infra-power.toml"
SEEDS = (1, 2, *sweep(3, 20))  # (1 and 2 are not marked slow)
SWITCHED_OFF = {"m00": 1, "m01": 1, "m02": 2, "m03": 1}  # member -> times switched off


def rows(trace: Path, node: str) -> list[dict[str, object]]:
    with (trace / f"{node}.jsonl").open() as f:
        return [json.loads(line) for line in f]


def check_run(seed: int, runs: SimRuns) -> None:
    result = runs.run(SCENARIO, seed)
    trace = result.out / "trace"
    v = verify(trace)
    assert v.ok, v.problems[:10]
    assert v.members == 9 and v.sent > 1000
    assert v.deliveries == 9 * v.sent  # every member delivered every message, once
    assert result.counters["crashes"] == result.counters["restarts"] == 5
    assert result.counters["drops_loss"] > 1000
    for node, times in SWITCHED_OFF.items():
        events = [r["event"] for r in rows(trace, node)]
        assert events.count("crash") == events.count("restart") == times
        assert events.count("join") == 1 and "leave" not in events, node  # resumed
        after = events[events.index("restart"):]
        assert "nack" in after and "deliver" in after  # caught up by NACK
    # m01 was switched off in cell-1 and came back in cell-3
    m01 = rows(trace, "m01")
    t_off = next(float(r["t"]) for r in m01 if r["event"] == "crash")  # type: ignore[arg-type]
    t_on = next(float(r["t"]) for r in m01 if r["event"] == "restart")  # type: ignore[arg-type]
    peers = [(float(r["t"]), r["peer"]) for r in m01  # type: ignore[arg-type]
             if r["event"] == "drop" and r["peer"]]  # packets the cell lost: who sent them
    assert {p for t, p in peers if t < t_off} == {"h1"}
    assert {p for t, p in peers if t > t_on} == {"h3"}


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_infra_power_scenario(seed: int, sim_runs: SimRuns) -> None:
    check_run(seed, sim_runs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS[2:])
def test_infra_power_scenario_every_seed(seed: int, sim_runs: SimRuns) -> None:
    check_run(seed, sim_runs)
