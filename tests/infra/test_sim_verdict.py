"""``m2mc analyze`` (the Spark pipeline, the project's reference checker) over every
simulated infrastructure run that the tests of this directory check one by one with
the Spark-free check (trace_check.py), all at once: it must exit 0 and say VALID, with
no violation in any run (docs/interfaces.md §5).

One command for all of them rather than one per scenario: each ``m2mc analyze`` starts
a JVM and runs its Spark jobs, about a minute on CI's two busy cores for one run as
for five, and six of them were an eighth of CI's time. The runs are the session's
(tests/sim_cache.py): simulated once, by whichever test wants them first. The module
sorts after the ``test_sim_*`` files whose runs it reads, so that pytest-xdist hands
those out first and this test mostly finds the runs ready.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_sim_groups import SCENARIO as GROUPS
from test_sim_groups import SEEDS as GROUPS_SEEDS
from test_sim_host_restarts import POWER_CUT, RESTARTS
from test_sim_host_restarts import SEEDS as RESTARTS_SEEDS
from test_sim_keyed import SCENARIO as KEYED
from test_sim_keyed import SEEDS as KEYED_SEEDS
from test_sim_nemesis import NAMES as NEMESES
from test_sim_nemesis import SCENARIOS
from test_sim_nemesis import SEEDS as NEMESIS_SEEDS
from test_sim_power import SCENARIO as POWER
from test_sim_power import SEEDS as POWER_SEEDS
from test_sim_retire import SCENARIO as RETIRE
from trace_check import analyze_runs_valid

from sim_cache import SimRuns

# (scenario, seeds): the runs the per-seed tests check (their own SEEDS).
RUNS: tuple[tuple[Path, tuple[int, ...]], ...] = (
    (POWER, POWER_SEEDS),
    (GROUPS, GROUPS_SEEDS),
    (KEYED, KEYED_SEEDS),
    (RESTARTS, RESTARTS_SEEDS),
    (POWER_CUT, RESTARTS_SEEDS),
    (RETIRE, (1,)),  # (its other seeds only by the Spark-free check)
    *((SCENARIOS / f"{name}.toml", NEMESIS_SEEDS[-1:]) for name in NEMESES),
)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(3600)  # the runs not yet simulated, then one Spark job
def test_m2mc_analyze_finds_every_simulated_run_valid(tmp_path: Path, sim_runs: SimRuns
                                                      ) -> None:
    pytest.importorskip("pyspark")
    dirs = [sim_runs.run(scenario, seed).out for scenario, seeds in RUNS for seed in seeds]
    analyze_runs_valid(dirs, tmp_path, timeout=2400)
