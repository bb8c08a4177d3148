"""Run one scenario with one seed: the trace directory, run.json and the result.

Layout under ``out``: ``run.json`` and ``trace/<node>.jsonl`` (plus
``trace/<node>.parquet`` when asked for and pyarrow is importable). Nodes'
durable state lives in a private temporary directory, never under ``out``,
so the files under ``out`` depend on nothing but scenario and seed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from m2mc import __version__
from m2mc.sim.chaos import expand_chaos
from m2mc.sim.engine import Simulator
from m2mc.sim.rng import RngStreams
from m2mc.sim.scenario import Scenario, parse_scenario, read_toml
from m2mc.sim.swarm import draw
from m2mc.sim.workload import Workload
from m2mc.trace.writer import TraceDirectory, write_run_json


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: str
    seed: int
    out: Path
    scenario: str
    drawn: Mapping[str, Any]  # swarm mode: path -> drawn value (empty otherwise)
    counters: Mapping[str, int]  # events, deliveries, drops, drops_<reason>, crashes, ...
    sent: Mapping[str, int]  # application messages sent, per group
    wall_seconds: float
    chaos: tuple[Mapping[str, Any], ...] = ()  # the faults [[chaos]] drew, in time order

    @property
    def events(self) -> int:
        return self.counters["events"]

    @property
    def drops(self) -> int:
        return self.counters["drops"]

    @property
    def deliveries(self) -> int:
        return self.counters["deliveries"]


def resolve(scenario: Path | str | Mapping[str, Any], seed: int, swarm: bool
            ) -> tuple[Scenario, dict[str, Any]]:
    """The checked scenario, after drawing swarm parameters from ``seed`` if asked."""
    if isinstance(scenario, Mapping):
        raw, name = dict(scenario), "scenario"
    else:
        raw, name = read_toml(Path(scenario)), Path(scenario).stem
    spec = parse_scenario(raw, name)
    drawn: dict[str, Any] = {}
    if swarm:
        raw, drawn = draw(raw, spec.swarm, RngStreams(seed).get("swarm"))
        spec = parse_scenario(raw, name)
    if spec.chaos_faults:  # the faults [[chaos]] draws from this seed, written in
        raw, episodes = expand_chaos(raw, spec.chaos_faults, RngStreams(seed), spec.chaos,
                                     {n.id: n.position for n in spec.nodes}, _away(spec))
        spec = replace(parse_scenario(raw, name), chaos_faults=spec.chaos_faults,
                       episodes=tuple(episodes))
    return spec, drawn


def _away(spec: Scenario) -> tuple[float, float]:
    """A point no cell covers (where a sleeping node goes)."""
    far = max((c.x + c.radius for c in spec.cells), default=spec.area[2])
    return far + 10.0, spec.area[1]


def run_scenario(scenario: Path | str | Mapping[str, Any], seed: int, out: Path, *,
                 swarm: bool = False, trace_packets: bool | None = None,
                 parquet: bool | None = None, trace: bool | None = None) -> RunResult:
    """Simulate ``scenario`` with ``seed``; write the trace and run.json under ``out``.

    ``trace_packets``/``parquet``/``trace`` override the scenario's ``[trace]``
    settings when not None. Raises ConfigError for a bad scenario.
    """
    with ScenarioRun(scenario, seed, out, swarm=swarm, trace_packets=trace_packets,
                     parquet=parquet, trace=trace) as run:
        run.run()
        return run.finish()


class ScenarioRun:
    """One run of a scenario, in steps, for a caller that looks inside meanwhile (a
    test adding an outsider node, or checking the nodes' state at the end)::

        with ScenarioRun(path, seed, out) as run:   # built and started at t=0
            run.run(10.0)                          # up to t=10
            ...                                    # run.sim, run.workload
            run.run()                              # to the end
            result = run.finish()                  # run.json written; state removed

    Leaving the block without :meth:`finish` removes the nodes' state and closes the
    trace files, writing no run.json.
    """

    def __init__(self, scenario: Path | str | Mapping[str, Any], seed: int, out: Path, *,
                 swarm: bool = False, trace_packets: bool | None = None,
                 parquet: bool | None = None, trace: bool | None = None) -> None:
        self._wall = time.perf_counter()
        self.spec, self.drawn = resolve(scenario, seed, swarm)
        spec = self.spec
        self.seed = seed
        self.swarm = swarm
        self.out = Path(out)
        self.run_id = f"{spec.run_name or spec.name}-{seed}" + ("-swarm" if swarm else "")
        trace_dir = self.out / "trace"
        _clear_old_traces(trace_dir)
        self.tracing = spec.trace.enabled if trace is None else trace
        self.traces = TraceDirectory(trace_dir, self.run_id, enabled=self.tracing,
                                     parquet=spec.trace.parquet if parquet is None else parquet,
                                     flush_every=spec.trace.flush_every, flush_interval=None)
        self.packets = spec.trace.packets if trace_packets is None else trace_packets
        streams = RngStreams(seed)
        self.state_dir = Path(tempfile.mkdtemp(prefix="m2mc-sim-state-", dir=_fast_tmp()))
        self._closed = False
        try:
            self.sim = Simulator(spec, streams, self.run_id, self.traces, self.state_dir,
                                 trace_packets=self.packets)
            self.workload = Workload(self.sim, streams.get("workload"))
            self.sim.start()
            self.workload.start()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> ScenarioRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, until: float | None = None) -> None:
        """Simulate up to virtual time ``until`` (by default the end of the run)."""
        self.sim.run(self.spec.end if until is None else min(until, self.spec.end))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.traces.close()
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def finish(self) -> RunResult:
        """Close the trace, remove the nodes' state, write run.json; the result."""
        self.close()
        spec, sim = self.spec, self.sim
        counters = sim.summary()
        sent = self.workload.summary()
        write_run_json(self.out / "run.json", {
            "run": self.run_id, "scenario": spec.name, "description": spec.description,
            "seed": self.seed, "version": __version__, "driver": "sim", "clock": "virtual",
            "start": 0.0, "end": spec.end,
            "phases": {"chaos": [0.0, spec.chaos], "heal": [spec.chaos, spec.end]},
            "orderings": spec.orderings, "stack": spec.stack_kind, "swarm": self.swarm,
            "drawn": self.drawn, "chaos": list(spec.episodes),
            "nodes": [n.id for n in spec.nodes],
            "groups": {g.group.name: {"order": g.group.order, "members": list(g.members)}
                       for g in spec.groups},
            "trace": {"enabled": self.tracing, "packets": self.packets,
                      "parquet": self.traces.parquet},
            "counters": counters, "sent": sent, "config": _jsonable(spec.raw),
        })
        return RunResult(self.run_id, self.seed, self.out, spec.name, self.drawn, counters,
                         sent, time.perf_counter() - self._wall, spec.episodes)


def _fast_tmp() -> str | None:
    """A RAM-backed temporary directory when there is one: nodes write durable state often."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def _clear_old_traces(trace_dir: Path) -> None:
    """A new run replaces the trace files of an earlier run in the same directory."""
    if trace_dir.is_dir():
        for old in sorted(trace_dir.iterdir()):
            if old.is_file() and old.suffix in (".jsonl", ".parquet"):
                old.unlink()


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
