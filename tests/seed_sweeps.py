"""The seeds of the suite's seed sweeps: every one, or CI's share.

A sweep test runs one simulated scenario on every seed of a range (most name 1 to 20),
each seed its own drawing of loss, delays and fault timelines. On CI's two cores the
sweeps took a quarter of ``make test``'s time and pushed it past its 40 minutes, so the
suite runs the first ``CI_SEEDS`` of each range unless ``M2MC_SEEDS=all`` asks for
every seed the test names (ten until CI's whole run reached 2,382 of its 2,400 s).
The sample guards against regressions; a change to ordering, replication or election
code is judged by the nemesis benches over hundreds of seeds (docs/simulator.md,
"Seeds in the test suite").
"""

from __future__ import annotations

import os

CI_SEEDS = 5  # a sweep's seeds 1..CI_SEEDS, unless M2MC_SEEDS=all

MODES = ("ci", "all")
MODE = os.environ.get("M2MC_SEEDS", "ci")  # another value: tests/conftest.py stops the run
ALL = MODE == "all"


def sweep(first: int, last: int) -> range:
    """The seeds ``first`` to ``last`` (inclusive) with ``M2MC_SEEDS=all``; else those of
    them up to ``CI_SEEDS``."""
    return range(first, (last if ALL else min(last, CI_SEEDS)) + 1)
