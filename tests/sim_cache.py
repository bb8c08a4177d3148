"""Simulated runs shared by the tests of one pytest session (``sim_runs`` fixture).

A scenario and a seed give the same trace to the byte (docs/simulator.md), so a run
that several tests read (a per-seed check, then ``m2mc analyze`` over the same seeds)
is simulated once per session, not once per test: the Spark tests used to simulate
again every seed that the per-seed tests had just checked, the largest single share of
CI's time. The runs live under the session's base temporary directory, which every
pytest-xdist worker of the session shares; a lock file per run makes the second
worker to want it wait for the first one's, rather than simulate it too.

A test that looks inside the nodes while they run (``ScenarioRun``) simulates on its
own, and may leave its run for the others (``keep``). A cached run is read-only: a
test that would change its files copies them first.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import pickle
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from m2mc.sim import run_scenario
from m2mc.sim.runner import RunResult


class SimRuns:
    """``run(scenario, seed)``: the run's directory (``trace/``, ``run.json``) and its
    :class:`RunResult`, simulated by the first caller of the session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def run(self, scenario: Path | Mapping[str, Any], seed: int) -> RunResult:
        key = _key(scenario, seed)
        done, building = self.root / key, self.root / f"{key}.building"
        result_file = done / "result.pickle"
        with (self.root / f"{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not result_file.exists():
                shutil.rmtree(building, ignore_errors=True)  # a worker that died midway
                built = run_scenario(scenario, seed, building)
                with (building / "result.pickle").open("wb") as f:
                    pickle.dump(built, f)
                building.rename(done)  # whole, or not there at all
        with result_file.open("rb") as f:
            result: RunResult = pickle.load(f)
        return replace(result, out=done)  # (it was simulated under `building`)

    def keep(self, scenario: Path | Mapping[str, Any], seed: int, result: RunResult) -> None:
        """A test that ran ``scenario`` on ``seed`` itself (to look inside the nodes:
        the same trace as :meth:`run`'s) leaves a copy for later :meth:`run` calls."""
        key = _key(scenario, seed)
        done, building = self.root / key, self.root / f"{key}.building"
        with (self.root / f"{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (done / "result.pickle").exists():
                return
            shutil.rmtree(building, ignore_errors=True)
            shutil.copytree(result.out, building)
            with (building / "result.pickle").open("wb") as f:
                pickle.dump(result, f)
            building.rename(done)


def _key(scenario: Path | Mapping[str, Any], seed: int) -> str:
    """What the run depends on: the scenario's content (a file's path and text, or a
    mapping's canonical JSON) and the seed."""
    if isinstance(scenario, Path):
        text = scenario.resolve().read_bytes()
        tomllib.loads(text.decode())  # a bad scenario fails here, as run_scenario would
        ident = b"file:" + str(scenario.resolve()).encode() + b"\0" + text
        name = scenario.stem
    else:
        ident = b"spec:" + json.dumps(scenario, sort_keys=True, default=str).encode()
        name = "spec"
    return f"{name}-s{seed}-{hashlib.sha256(ident).hexdigest()[:16]}"
