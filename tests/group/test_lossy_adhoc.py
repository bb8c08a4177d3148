"""examples/scenarios/lossy-adhoc.toml on the simulator, every seed from 1 to 20 (the suite's
share of them unless M2MC_SEEDS=all, tests/seed_sweeps.py):
eight peers in an S_b and a causal group under 20% loss, 10% duplication,
reordering, a partition that heals, a crash with restart and a leave/rejoin end with
zero lost, duplicated, unexpected or misordered messages (issue 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from m2mc.sim import run_scenario
from seed_sweeps import sweep

from .tracecheck import check, load

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "lossy-adhoc.toml"


@pytest.mark.slow
@pytest.mark.parametrize("seed", sweep(1, 20))
def test_lossy_adhoc_is_clean_on_every_seed(seed: int, tmp_path: Path) -> None:
    result = run_scenario(SCENARIO, seed, tmp_path)
    counters = result.counters
    # The faults really happened ...
    assert counters["drops_loss"] > 10_000 and counters["drops_partition"] > 0
    assert counters["duplicated"] > 1_000 and counters["reordered"] > 1_000
    assert counters["crashes"] == 1 and counters["restarts"] == 1
    assert counters["app_sends"] > 1_900  # what n5 would have sent while down is not sent
    # ... and every guarantee held through them.
    rows = load(tmp_path / "trace")
    assert {name: found[:3] for name, found in check(rows).items() if found} == {}
    delivered = sum(1 for r in rows if r["event"] == "deliver")
    assert delivered > 1_900 * 6  # the chat reaches 8 members, ops 6
