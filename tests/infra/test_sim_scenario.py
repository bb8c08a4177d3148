"""examples/scenarios/infra-failover.toml on the simulator: 3 hosts, 12 members moving
between 3 cells with gaps, 20% wireless loss, the coordinator crashing halfway.
Every member ends with the same total order, nothing lost or duplicated."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from trace_check import verify

from m2mc.errors import ConfigError
from m2mc.sim import load_scenario, run_scenario
from seed_sweeps import sweep

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "infra-failover.toml"


def check_run(seed: int, out: Path) -> None:
    result = run_scenario(SCENARIO, seed, out)
    v = verify(out / "trace")
    assert v.ok, v.problems[:10]
    assert v.members == 12 and v.sent > 1000
    assert v.deliveries == 12 * v.sent  # every member delivered every message
    assert result.counters["drops_loss"] > 1000 and result.counters["coverage_lost"] > 0
    active = [e for e in v.elect if e["phase"] == "active"]
    assert active[0]["node"] == "h1" and active[0]["t"] < 30.0  # the first coordinator
    after = [e for e in active if e["t"] > 30.0]
    assert after and after[0]["node"] != "h1"  # ... crashed, and another took over
    first = next(e for e in v.elect if e["phase"] == "first_sequenced" and e["t"] > 30.0)
    assert first["t"] - 30.0 < 3.0  # failover time, virtual seconds
    assert first["gseq"] > after[0]["resumed_gseq"]  # the sequence continues after it


@pytest.mark.parametrize("seed", [1, 2])
def test_infra_failover_scenario(seed: int, tmp_path: Path) -> None:
    check_run(seed, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", sweep(3, 20))
def test_infra_failover_scenario_every_seed(seed: int, tmp_path: Path) -> None:
    check_run(seed, tmp_path)


def test_the_stack_checks_its_parameters() -> None:
    data = tomllib.loads(SCENARIO.read_text())
    data["stack"]["subscribe"] = "yes"
    with pytest.raises(ConfigError, match="subscribe"):
        load_scenario(data)
    data["stack"].pop("subscribe")
    data["stack"]["hosts"] = []
    with pytest.raises(ConfigError, match="hosts"):
        load_scenario(data)
    data["stack"]["hosts"] = ["h1", "h2", "h3"]
    data["stack"]["no_such_key"] = 1
    with pytest.raises(ConfigError, match="no_such_key"):
        load_scenario(data)


def test_same_seed_same_trace(tmp_path: Path) -> None:
    """docs/interfaces.md §3: the same scenario and seed give byte-identical trace files."""
    import hashlib

    data = tomllib.loads(SCENARIO.read_text())
    data["run"] = {"chaos": 12.0, "heal": 4.0}
    data["faults"]["crash"][0].update({"at": 6.0, "restart": 9.0})
    digests = []
    for name in ("a", "b"):
        run_scenario(data, 7, tmp_path / name)
        files = sorted((tmp_path / name / "trace").glob("*.jsonl"))
        digests.append({f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files})
    assert digests[0] == digests[1] and len(digests[0]) == 15
