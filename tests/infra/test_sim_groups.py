"""examples/scenarios/infra-groups.toml on the simulator: three groups over one
deployment, 20% loss in the cells, members moving, a group joined and one left during
the run, the first coordinator crashing, and a member switched off for longer than
member_timeout, which the hosts expel and which catches up from their log when it
comes back. Every member delivers exactly its groups' messages, once, in one order
(the trace check here, ``m2mc analyze`` over the same seeds in test_sim_verdict.py;
seeds 1 to 10, the suite's share of them unless M2MC_SEEDS=all, tests/seed_sweeps.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trace_check import verify

from m2mc.infra.member import MemberCore
from m2mc.sim.runner import ScenarioRun
from seed_sweeps import sweep
from sim_cache import SimRuns

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "infra-groups.toml"
SEEDS = tuple(sweep(1, 10))  # (1 is not marked slow)
GROUPS = {"m00": {"ops"}, "m01": {"ops", "alerts"}, "m02": {"ops"},
          "m03": {"ops", "chat", "alerts"}, "m04": {"ops", "chat"},
          "m05": {"ops", "chat", "alerts"}, "m06": {"chat"}, "m07": {"chat", "alerts", "ops"},
          "m08": {"chat"}}  # at the end: m07 joined ops, m08 left alerts


def check_run(seed: int, out: Path, runs: SimRuns) -> None:
    with ScenarioRun(SCENARIO, seed, out) as run:
        run.run()
        cores: dict[str, MemberCore] = {n: run.sim.by_id[n].stack.core  # type: ignore[attr-defined]
                                        for n in GROUPS}
        runs.keep(SCENARIO, seed, run.finish())  # for the Spark test below
    trace = out / "trace"
    v = verify(trace)
    assert v.ok, v.problems[:10]
    assert v.sent > 1300 and v.members == 9
    for n, core in cores.items():
        assert set(core.groups) == GROUPS[n], n
        assert core.stats.lost == 0, n
    sleeper = cores["m01"]
    assert sleeper.stats.resumes_refused == 1 and sleeper.stats.catchups >= 1
    assert sleeper.stats.caught_up > 100  # what it slept through came from the hosts' log
    with (trace / "m01.jsonl").open() as f:
        events = [json.loads(line) for line in f]
    assert [(e["event"], e["group"]) for e in events if e["event"] in ("join", "leave")] == [
        ("join", "ops"), ("join", "alerts")]  # never out of its groups, for the trace
    delivered = {e["group"] for e in events if e["event"] == "deliver"}
    assert delivered == {"ops", "alerts"}


@pytest.mark.parametrize("seed", SEEDS[:1])
def test_infra_groups_scenario(seed: int, tmp_path: Path, sim_runs: SimRuns) -> None:
    check_run(seed, tmp_path, sim_runs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS[1:])
def test_infra_groups_scenario_every_seed(seed: int, tmp_path: Path,
                                         sim_runs: SimRuns) -> None:
    check_run(seed, tmp_path, sim_runs)
