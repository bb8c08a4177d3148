"""examples/scenarios/infra-retire.toml on the simulator: the coordinator crashes, the
operator retires it through another host (a ``[[schedule]]`` action), the two
survivors go on with a quorum of 2 of 2, the retired host, coming back, is refused
and stops; readmitted, it serves again. Every member ends with the same total order,
nothing lost or duplicated (the P1-P7 checks of trace_check), on seeds 1-20
(the suite's share of them unless M2MC_SEEDS=all, tests/seed_sweeps.py);
``m2mc analyze`` agrees on seed 1 (test_sim_verdict.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from trace_check import verify

from m2mc.errors import ConfigError
from m2mc.sim import load_scenario
from seed_sweeps import sweep
from sim_cache import SimRuns

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "infra-retire.toml"


def check_run(seed: int, runs: SimRuns) -> None:
    result = runs.run(SCENARIO, seed)
    v = verify(result.out / "trace")
    assert v.ok, v.problems[:10]
    assert v.members == 12 and v.sent > 1000
    assert v.deliveries == 12 * v.sent  # every member delivered every message
    assert result.counters["drops_loss"] > 1000 and result.counters["restarts"] == 2
    answers = sorted((e["t"], e["node"], e["code"]) for e in v.elect if e["phase"] == "admin")
    assert [(n, c) for _, n, c in answers] == [("h2", "ok"), ("h3", "ok")], answers
    smaller = {e["node"] for e in v.elect if e["phase"] == "configuration"
               and e["retired"] == ["h1"] and e["quorum"] == 2 and e["hosts"] == 2}
    assert smaller == {"h2", "h3"}  # both survivors took the smaller quorum
    again = {e["node"] for e in v.elect if e["phase"] == "configuration"
             and e["retired"] == [] and e["hosts"] == 3}
    assert {"h2", "h3"} <= again
    stopped = [e for e in v.elect if e["phase"] == "retired"]
    assert [e["node"] for e in stopped] == ["h1"] and 38.0 <= stopped[0]["t"] < 40.0
    active = [e for e in v.elect if e["phase"] == "active" and e["t"] > 30.0]
    assert active and all(e["node"] != "h1" for e in active)  # h1 never led again


@pytest.mark.parametrize("seed", [1, 2])
def test_infra_retire_scenario(seed: int, sim_runs: SimRuns) -> None:
    check_run(seed, sim_runs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", sweep(3, 20))
def test_infra_retire_scenario_every_seed(seed: int, sim_runs: SimRuns) -> None:
    check_run(seed, sim_runs)


def test_the_schedule_checks_retire_actions() -> None:
    data = tomllib.loads(SCENARIO.read_text())
    data["schedule"][0]["target"] = "h9"
    with pytest.raises(ConfigError, match="no node 'h9'"):
        load_scenario(data)
    data["schedule"][0].pop("target")
    with pytest.raises(ConfigError, match="target"):
        load_scenario(data)
    data["schedule"][0].update(target="h1", action="resign")
    with pytest.raises(ConfigError, match="action"):
        load_scenario(data)
