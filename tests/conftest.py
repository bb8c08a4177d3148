"""Settings for the whole suite.

Hypothesis's default 200 ms deadline per example is a timing assertion: on a shared,
loaded machine an example that takes 1 ms can take 250 ms once, and the test fails
for nothing it checks. The suite asserts behaviour, never speed, so no example has a
deadline (bench/ measures speed).

``sim_runs``: simulated runs shared by the tests of one session (tests/sim_cache.py).
``M2MC_SEEDS``: ``all`` runs every seed of the seed sweeps, not CI's share
(tests/seed_sweeps.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

_TESTS = str(Path(__file__).parent)
if _TESTS not in sys.path:  # (--import-mode=importlib: the suite's helpers, by name)
    sys.path.insert(0, _TESTS)

import seed_sweeps  # noqa: E402  (found through the line above)
from sim_cache import SimRuns  # noqa: E402

settings.register_profile("m2mc", deadline=None)
settings.load_profile("m2mc")


def pytest_configure(config: pytest.Config) -> None:
    if seed_sweeps.MODE not in seed_sweeps.MODES:  # a typo must not quietly run the sample
        raise pytest.UsageError(f"M2MC_SEEDS must be one of {', '.join(seed_sweeps.MODES)}, "
                                f"not {seed_sweeps.MODE!r}")


@pytest.fixture(scope="session")
def sim_runs(tmp_path_factory: pytest.TempPathFactory) -> SimRuns:
    """Simulated runs shared by the session's tests, on every worker."""
    base = tmp_path_factory.getbasetemp()
    # pytest-xdist gives each worker a base of its own under the session's: share that
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return SimRuns(shared / "sim-runs")
