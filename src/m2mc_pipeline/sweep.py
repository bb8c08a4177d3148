"""Parameter sweeps of the simulator, one Spark task per simulation.

A sweep file (TOML) names scenarios, seeds and a grid of parameters::

    scenarios = ["chat.toml"]          # relative to the sweep file; or scenario = "..."
    seeds = [1, 2, 3]                  # or seeds = 3, meaning 1, 2, 3
    timeout = 600                      # seconds per simulation (default 600)
    command = ["m2mc", "sim"]          # optional: another simulator, same arguments

    [grid]                             # dotted paths into the scenario TOML
    "network.loss" = [0.0, 0.05, 0.1]
    "group.size" = [4, 8]
    "chat.reply_probability" = [0.3]
    "group.ordering" = ["sb", "causal", "total"]

A sweep may hold several grids instead of one: ``[[grid]]`` tables, each its own
product of values, with its own ``seeds`` if it has that key (otherwise the file's)::

    [[grid]]                           # every ordering and loss rate at 1,000 nodes, 2 seeds
    seeds = 2
    "nodes.count" = [1000]
    "groups.0.order" = ["sb", "causal", "total"]

    [[grid]]                           # the full product at 10 nodes, the file's seeds
    "nodes.count" = [10]
    ...

The tasks are the union of the grids' (a point and seed that two grids share runs
once), in the order of the file, each grid's points on its first seed, then on its
second, and so on: the expensive grid first keeps two cores busy to the
end instead of leaving one long run for last.

Every combination (scenario x seed x grid point) is one task. A task writes
the scenario with its parameters applied, runs ``m2mc sim SCENARIO --seed N
--out DIR`` (docs/interfaces.md §3; or ``command``) into ``OUT/runs/<task>/``, and
records the parameters in that run's ``run.json``. Then the whole set is analysed. A failed
simulation is reported with its seed; it does not stop the others.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from m2mc.errors import ConfigError
from m2mc_pipeline.ship import child_pythonpath

# A runner runs one simulation: (scenario file, seed, output dir, timeout) -> None,
# raising on failure. It runs inside a Spark task, so it must be picklable.
Runner = Callable[[Path, int, Path, float], None]

# The child ``m2mc sim``: on a cluster, m2mc and its dependencies may come from the zip
# the driver shipped (ship.py): PYTHONPATH names m2mc's, and M2MC_FALLBACK_PATH the
# dependencies', appended so that the executor's own installed ones win.
_SIM_MAIN = ("import os, sys; sys.path.extend(p for p in os.environ.get("
             "'M2MC_FALLBACK_PATH', '').split(os.pathsep) if p); "
             "from m2mc.cli import main; sys.exit(main(sys.argv[1:]))")


@dataclass(frozen=True, slots=True)
class SweepTask:
    task: str
    scenario: str
    seed: int
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    task: str
    scenario: str
    seed: int
    params: dict[str, Any]
    ok: bool
    seconds: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class GridPart:
    """One ``[[grid]]`` table: a product of parameter values, run on its own seeds."""

    params: dict[str, tuple[Any, ...]]
    seeds: tuple[int, ...]

    def points(self) -> list[dict[str, Any]]:
        keys = sorted(self.params)
        return [dict(zip(keys, point, strict=True))
                for point in itertools.product(*(self.params[k] for k in keys))]


@dataclass(frozen=True, slots=True)
class SweepSpec:
    scenarios: tuple[str, ...]
    seeds: tuple[int, ...]
    grid: dict[str, tuple[Any, ...]]
    timeout: float = 600.0
    command: tuple[str, ...] = ()
    # Several grids (``[[grid]]``); empty: the one ``grid`` on ``seeds``.
    parts: tuple[GridPart, ...] = ()

    def runner(self) -> Runner:
        return CommandRunner(self.command)

    def grids(self) -> tuple[GridPart, ...]:
        return self.parts or (GridPart(self.grid, self.seeds),)

    def tasks(self) -> list[SweepTask]:
        out: list[SweepTask] = []
        seen: set[tuple[str, str, int]] = set()
        for scenario in self.scenarios:
            for part in self.grids():
                # One [grid]: each point on every seed in turn. [[grid]] tables: every
                # point on the first seed, then on the second, ...: a sweep stopped in
                # the middle has every point of a grid on its first seeds.
                pairs = ([(p, s) for p in part.points() for s in part.seeds]
                         if not self.parts else
                         [(p, s) for s in part.seeds for p in part.points()])
                for params, seed in pairs:
                    key = (scenario, json.dumps(params, sort_keys=True), seed)
                    if key in seen:  # two grids share this point and seed
                        continue
                    seen.add(key)
                    out.append(SweepTask(task=f"t{len(out):05d}", scenario=scenario,
                                         seed=seed, params=params))
        return out


def parse_spec(path: str | Path) -> SweepSpec:
    """Read a sweep file; every mistake is a ConfigError naming the field."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"no such sweep file: {p}") from exc
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{p}: {exc}") from exc
    return spec_from_dict(doc, base=p.parent)


def spec_from_dict(doc: Mapping[str, Any], base: Path = Path(".")) -> SweepSpec:
    scen = doc.get("scenarios", doc.get("scenario"))
    if isinstance(scen, str):
        scen = [scen]
    if not isinstance(scen, list) or not scen or not all(isinstance(s, str) for s in scen):
        raise ConfigError("sweep: 'scenarios' must be a non-empty list of scenario files")
    scenarios = []
    for s in scen:
        sp = (base / s) if not Path(s).is_absolute() else Path(s)
        if not sp.is_file():
            raise ConfigError(f"sweep: no such scenario file: {sp}")
        scenarios.append(str(sp.resolve()))
    seeds = _seeds(doc.get("seeds", 1), "seeds")
    grid_raw = doc.get("grid", {})
    parts: tuple[GridPart, ...] = ()
    if isinstance(grid_raw, list):
        if not grid_raw or not all(isinstance(g, dict) for g in grid_raw):
            raise ConfigError("sweep: [[grid]] must be tables of parameter = [values]")
        parts = tuple(GridPart(_grid({k: v for k, v in g.items() if k != "seeds"},
                                     f"grid[{i}]"),
                               _seeds(g["seeds"], f"grid[{i}].seeds") if "seeds" in g
                               else seeds)
                      for i, g in enumerate(grid_raw))
        grid: dict[str, tuple[Any, ...]] = {}
    elif isinstance(grid_raw, dict):
        grid = _grid(grid_raw, "grid")
    else:
        raise ConfigError("sweep: [grid] must be a table of parameter = [values]")
    timeout = doc.get("timeout", 600)
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError("sweep: 'timeout' must be a positive number of seconds")
    command = doc.get("command", [])
    if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
        raise ConfigError("sweep: 'command' must be a list of strings")
    unknown = set(doc) - {"scenarios", "scenario", "seeds", "grid", "timeout", "command"}
    if unknown:
        raise ConfigError(f"sweep: unknown field(s): {', '.join(sorted(unknown))}")
    return SweepSpec(scenarios=tuple(scenarios), seeds=seeds, grid=grid, timeout=float(timeout),
                     command=tuple(command), parts=parts)


def _seeds(raw: Any, where: str) -> tuple[int, ...]:
    """``3`` means seeds 1, 2, 3; a list names them."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return tuple(range(1, raw + 1))
    if (isinstance(raw, list) and raw
            and all(isinstance(x, int) and not isinstance(x, bool) for x in raw)):
        return tuple(raw)
    raise ConfigError(f"sweep: {where!r} must be a positive integer or a list of integers")


def _grid(table: Mapping[str, Any], where: str) -> dict[str, tuple[Any, ...]]:
    grid: dict[str, tuple[Any, ...]] = {}
    for k, v in _flatten(table).items():
        values = v if isinstance(v, list) else [v]
        if not values:
            raise ConfigError(f"sweep: {where} parameter {k!r} has no value")
        grid[k] = tuple(values)
    return grid


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"network": {"loss": [..]}}`` and ``{"network.loss": [..]}`` mean the same."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def apply_params(scenario: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``scenario`` with each dotted-path parameter set.

    ``network.loss`` sets a key of a table (tables are created as needed);
    ``groups.0.order`` indexes an array of tables (``[[groups]]``) from 0.
    """
    doc: dict[str, Any] = json.loads(json.dumps(scenario))
    for path, value in params.items():
        node: Any = doc
        parts = path.split(".")
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            where = ".".join(parts[:depth + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ConfigError(f"sweep: {path!r}: {where!r} is not an index of the "
                                      f"array (0..{len(node) - 1})")
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    node = node.setdefault(part, {})
            else:
                raise ConfigError(f"sweep: {path!r}: {'.'.join(parts[:depth])!r} is not a "
                                  "table in the scenario")
    return doc


@dataclass(frozen=True, slots=True)
class CommandRunner:
    """Runs ``COMMAND SCENARIO --seed N --out DIR`` in a child process.

    The default command is ``m2mc sim`` run by the Python of the Spark worker.
    A sweep file may name another (``command = ["python3", "mysim.py"]``).
    """

    command: tuple[str, ...] = ()

    def __call__(self, scenario: Path, seed: int, out: Path, timeout: float) -> None:
        base = list(self.command) or [sys.executable, "-c", _SIM_MAIN, "sim"]
        cmd = [*base, str(scenario), "--seed", str(seed), "--out", str(out)]
        _run(cmd, timeout, None if self.command else child_pythonpath(dict(os.environ)))


def sim_runner(scenario: Path, seed: int, out: Path, timeout: float) -> None:
    """Run ``m2mc sim`` in a child process (the Python of this Spark worker)."""
    CommandRunner()(scenario, seed, out, timeout)


def _run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              check=False, env=env)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"timed out after {timeout:g}s") from exc
    if done.returncode != 0:
        lines = (done.stderr or done.stdout or "").strip().splitlines()
        raise RuntimeError(f"{Path(cmd[0]).name} exited {done.returncode}: "
                           f"{lines[-1] if lines else 'no output'}")


def run_task(task: SweepTask, runs_dir: str, timeout: float, runner: Runner) -> TaskOutcome:
    """One sweep task (runs inside a Spark task). Never raises: failures are outcomes."""
    import tomli_w

    started = time.monotonic()
    where = Path(runs_dir) / task.task
    try:
        where.mkdir(parents=True, exist_ok=True)
        base = tomllib.loads(Path(task.scenario).read_text())
        doc = apply_params(base, task.params)
        # One run id per task: every task of a scenario would otherwise be "<name>-<seed>",
        # and the pipeline would take six runs for one and count their deliveries together.
        doc.setdefault("run", {})["id"] = f"{doc.get('name', Path(task.scenario).stem)}-{task.task}"
        scenario_file = where / "scenario.toml"
        scenario_file.write_text(tomli_w.dumps(doc))
        runner(scenario_file, task.seed, where, timeout)
        _annotate(where, task)
        return TaskOutcome(task.task, task.scenario, task.seed, task.params, True,
                           round(time.monotonic() - started, 3))
    except Exception as exc:  # a failed simulation is reported, not fatal to the sweep
        return TaskOutcome(task.task, task.scenario, task.seed, task.params, False,
                           round(time.monotonic() - started, 3),
                           f"{type(exc).__name__}: {exc}")


def finished(runs_dir: Path, task: SweepTask) -> TaskOutcome | None:
    """The outcome of ``task`` if an earlier sweep into the same directory finished it:
    its run.json names the task, its seed and its parameters (``_annotate`` writes them
    last), and its trace is there. Its seconds are the time from the task's scenario file
    to that run.json (both written by the task)."""
    where = runs_dir / task.task
    found = sorted(where.rglob("run.json")) if where.is_dir() else []
    if not found or not (where / "scenario.toml").is_file():
        return None
    try:
        meta = json.loads(found[0].read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(meta, dict) and meta.get("sweep_task") == task.task
            and meta.get("seed") == task.seed and meta.get("params") == task.params
            and any(p.suffix in (".jsonl", ".parquet") for p in where.rglob("*"))):
        return None
    seconds = found[0].stat().st_mtime - (where / "scenario.toml").stat().st_mtime
    return TaskOutcome(task.task, task.scenario, task.seed, task.params, True,
                       round(max(seconds, 0.0), 3))


def _annotate(where: Path, task: SweepTask) -> None:
    """Record the task's parameters in the run.json that describes its trace."""
    found = sorted(where.rglob("run.json"))
    target = found[0] if found else where / "run.json"
    meta: dict[str, Any] = {}
    if target.is_file():
        try:
            loaded = json.loads(target.read_text())
            meta = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            meta = {}
    meta.setdefault("scenario", Path(task.scenario).stem)
    meta.setdefault("seed", task.seed)
    meta["params"] = dict(task.params)
    meta["sweep_task"] = task.task
    for key, value in task.params.items():
        short = key.rsplit(".", 1)[-1]
        if short in ("loss", "ordering"):
            meta[short] = value
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def outcomes_document(spec: SweepSpec, outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "tasks": len(outcomes), "failed": sum(not o.ok for o in outcomes),
        "scenarios": list(spec.scenarios), "seeds": list(spec.seeds),
        "grid": {k: list(v) for k, v in spec.grid.items()}}
    if spec.parts:
        doc["grids"] = [{"params": {k: list(v) for k, v in part.params.items()},
                         "seeds": list(part.seeds)} for part in spec.parts]
    doc["outcomes"] = [asdict(o) for o in outcomes]
    return doc
