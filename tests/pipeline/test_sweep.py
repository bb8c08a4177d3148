"""Sweeps: the grid, its file format, one real simulation task, and ``m2mc sweep`` end to end."""

from __future__ import annotations

import json
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from m2mc.cli import main
from m2mc.errors import ConfigError
from m2mc_pipeline.sweep import (
    SweepTask,
    apply_params,
    run_task,
    sim_runner,
    spec_from_dict,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "lossy-adhoc.toml"

# A stand-in simulator with m2mc sim's arguments: writes a tiny clean trace whose
# order and loss come from the scenario; seed 2 fails.
FAKE_SIM = textwrap.dedent('''
    import json, sys, tomllib
    from pathlib import Path
    scenario, seed, out = sys.argv[1], int(sys.argv[3]), Path(sys.argv[5])
    if seed == 2:
        print("fake sim: cannot simulate seed 2", file=sys.stderr)
        sys.exit(3)
    sc = tomllib.loads(Path(scenario).read_text())
    order, loss = sc["group"]["order"], sc["network"]["loss"]
    run = f"{order}-{loss}-{seed}"
    (out / "trace").mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps({"run": run, "scenario": sc["name"], "seed": seed}))
    rows = []
    def ev(node, t, event, mid=None, parent=None):
        rows.append({"run": run, "node": node, "t": t, "event": event, "group": "g",
                     "mid": mid, "parent": parent, "order": order})
    for n in "AB":
        ev(n, 0.0, "join")
    for i in range(1, 4):
        t = float(i)
        for e in ("send", "recv", "deliver"):
            ev("A", t, e, f"A:{i}", "")
        ev("B", t + loss, "recv", f"A:{i}")
        ev("B", t + loss, "deliver", f"A:{i}")
    by_node = {}
    for r in rows:
        by_node.setdefault(r["node"], []).append(json.dumps(r))
    for n, lines in by_node.items():
        (out / "trace" / f"{n}.jsonl").write_text("\\n".join(lines) + "\\n")
''')


def test_grid_is_scenarios_times_points_times_seeds(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('name = "a"\n')
    spec = spec_from_dict({"scenarios": ["a.toml"], "seeds": 3,
                           "grid": {"network": {"loss": [0.0, 0.1]}, "group.order": ["sb"]}},
                          base=tmp_path)
    tasks = spec.tasks()
    assert len(tasks) == 6
    assert [t.seed for t in tasks[:3]] == [1, 2, 3]
    assert tasks[0].params == {"group.order": "sb", "network.loss": 0.0}
    assert len({t.task for t in tasks}) == 6


def test_several_grids_each_on_its_seeds_and_shared_points_run_once(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('name = "a"\n')
    doc = tomllib.loads(textwrap.dedent("""
        scenarios = ["a.toml"]
        seeds = 2
        [[grid]]
        seeds = [7]
        "nodes.count" = [1000]
        "order" = ["sb", "causal"]
        [[grid]]
        "nodes.count" = [10, 1000]
        "order" = ["sb"]
    """))
    spec = spec_from_dict(doc, base=tmp_path)
    got = [(t.params["nodes.count"], t.params["order"], t.seed) for t in spec.tasks()]
    # The first grid's tasks first (the file's order), then the second's on the file's
    # seeds, every point on seed 1 before seed 2 (a stopped sweep covers every point);
    # (1000, sb) on seed 7 is not repeated, on seeds 1 and 2 it is new.
    assert got == [(1000, "sb", 7), (1000, "causal", 7), (10, "sb", 1), (1000, "sb", 1),
                   (10, "sb", 2), (1000, "sb", 2)]
    assert [t.task for t in spec.tasks()] == [f"t{i:05d}" for i in range(6)]
    doc["grid"].append(doc["grid"][0])  # the same grid twice adds nothing
    assert len(spec_from_dict(doc, base=tmp_path).tasks()) == 6
    with pytest.raises(ConfigError, match=r"grid\[0\]\.seeds"):
        spec_from_dict({**doc, "grid": [{"seeds": 0, "x": [1]}]}, base=tmp_path)
    with pytest.raises(ConfigError, match=r"grid\[1\] parameter 'x' has no value"):
        spec_from_dict({**doc, "grid": [{"x": [1]}, {"x": []}]}, base=tmp_path)


@pytest.mark.parametrize("doc, message", [
    ({"scenarios": []}, "scenarios"),
    ({"scenarios": ["missing.toml"]}, "no such scenario file"),
    ({"scenarios": ["a.toml"], "seeds": 0}, "seeds"),
    ({"scenarios": ["a.toml"], "grid": {"x": []}}, "no value"),
    ({"scenarios": ["a.toml"], "colour": "red"}, "unknown field"),
])
def test_bad_sweep_files_name_the_field(tmp_path: Path, doc: dict[str, Any],
                                        message: str) -> None:
    (tmp_path / "a.toml").write_text('name = "a"\n')
    with pytest.raises(ConfigError, match=message):
        spec_from_dict(doc, base=tmp_path)


def test_bad_sweep_file_exits_2_before_spark_starts(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "sweep.toml"
    bad.write_text('scenarios = ["nope.toml"]\n')
    assert main(["sweep", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert "no such scenario file" in capsys.readouterr().err


def test_apply_params_sets_dotted_paths() -> None:
    doc = {"network": {"loss": 0.0, "delay": 1}, "name": "x"}
    assert apply_params(doc, {"network.loss": 0.2, "group.order": "total"}) == {
        "network": {"loss": 0.2, "delay": 1}, "name": "x", "group": {"order": "total"}}
    assert doc["network"]["loss"] == 0.0  # the original is not modified
    with pytest.raises(ConfigError, match="not a table"):
        apply_params(doc, {"name.sub": 1})
    groups = {"groups": [{"order": "sb"}, {"order": "sb"}]}
    assert apply_params(groups, {"groups.1.order": "total"})["groups"][1] == {"order": "total"}
    with pytest.raises(ConfigError, match="not an index"):
        apply_params(groups, {"groups.2.order": "total"})


def test_a_task_runs_the_real_simulator_and_records_its_parameters(tmp_path: Path) -> None:
    task = SweepTask("t00000", str(EXAMPLE), 3, {"domains.lan.loss": 0.05})
    outcome = run_task(task, str(tmp_path), 120.0, sim_runner)
    assert outcome.ok, outcome.error
    meta = json.loads((tmp_path / "t00000" / "run.json").read_text())
    assert meta["seed"] == 3 and meta["loss"] == 0.05
    assert meta["params"] == {"domains.lan.loss": 0.05}
    scenario = tomllib.loads((tmp_path / "t00000" / "scenario.toml").read_text())
    assert scenario["domains"]["lan"]["loss"] == 0.05
    assert list((tmp_path / "t00000" / "trace").glob("*.jsonl"))


def test_a_failing_simulation_is_an_outcome_not_an_exception(tmp_path: Path) -> None:
    task = SweepTask("t00001", str(EXAMPLE), 1, {"run.chaos": 1.0})  # faults lie outside
    outcome = run_task(task, str(tmp_path), 120.0, sim_runner)
    assert not outcome.ok
    assert outcome.seed == 1 and "exited 2" in (outcome.error or "")


@pytest.mark.spark
def test_m2mc_sweep_runs_tasks_reports_failures_and_analyses(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "fake_sim.py").write_text(FAKE_SIM)
    (tmp_path / "base.toml").write_text(
        'name = "tiny"\n[group]\norder = "sb"\n[network]\nloss = 0.0\n')
    (tmp_path / "sweep.toml").write_text(
        f'scenarios = ["base.toml"]\nseeds = [1, 2]\n'
        f'command = [{json.dumps(sys.executable)}, {json.dumps(str(tmp_path / "fake_sim.py"))}]\n'
        '[grid]\n"group.order" = ["sb", "causal"]\n"network.loss" = [0.0, 0.25]\n')
    out = tmp_path / "out"
    status = main(["sweep", str(tmp_path / "sweep.toml"), "--out", str(out)])
    err = capsys.readouterr().err

    assert status == 1  # seed 2 failed in every grid point
    doc = json.loads((out / "sweep.json").read_text())
    assert (doc["tasks"], doc["failed"]) == (8, 4)
    failed = [o for o in doc["outcomes"] if not o["ok"]]
    assert {o["seed"] for o in failed} == {2}
    assert all("cannot simulate seed 2" in o["error"] for o in failed)
    assert "seed 2" in err and "4/8 simulations ran" in err
    assert "[sweep: 8 simulations] [" in err  # the progress bar

    verify = json.loads((out / "verify.json").read_text())
    assert verify["valid"] is True and verify["counts"]["runs"] == 4
    metrics = json.loads((out / "metrics.json").read_text())
    assert {(r["loss"], r["seed"]) for r in metrics["runs"]} == {(0.0, 1), (0.25, 1)}
    latency = {(r["order"], r["loss"]): r["max"]
               for r in metrics["comparison"]["latency_vs_loss"]}
    assert latency == {("sb", 0.0): 0.0, ("sb", 0.25): 0.25,
                       ("causal", 0.0): 0.0, ("causal", 0.25): 0.25}
    # Orderings side by side per loss level (the swept parameter), never pooled.
    side = metrics["comparison"]["delay_side_by_side"]
    assert set(side) == {"tiny [network.loss=0.0]", "tiny [network.loss=0.25]"}
    assert all(set(per) == {"sb", "causal"} and per["sb"]["count"] == 6
               for per in side.values())
    assert (out / "report.html").is_file()


@pytest.mark.spark
def test_a_resumed_sweep_runs_only_what_an_earlier_one_did_not_finish(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls = tmp_path / "calls.txt"
    # The fake simulator, noting each call (its output directory) before it runs.
    (tmp_path / "fake_sim.py").write_text(
        f"import sys\nopen({str(calls)!r}, 'a').write(sys.argv[5] + '\\n')\n" + FAKE_SIM)
    (tmp_path / "base.toml").write_text(
        'name = "tiny"\n[group]\norder = "sb"\n[network]\nloss = 0.0\n')
    (tmp_path / "sweep.toml").write_text(
        f'scenarios = ["base.toml"]\nseeds = [1, 2]\n'
        f'command = [{json.dumps(sys.executable)}, {json.dumps(str(tmp_path / "fake_sim.py"))}]\n'
        '[grid]\n"group.order" = ["sb", "causal"]\n')
    out = tmp_path / "out"
    assert main(["sweep", str(tmp_path / "sweep.toml"), "--out", str(out), "--quiet"]) == 1
    first = json.loads((out / "sweep.json").read_text())["outcomes"]
    assert [o["ok"] for o in first] == [True, False, True, False]  # seed 2 fails
    assert len(calls.read_text().splitlines()) == 4
    # A task whose run was finished is kept; one that failed, or whose run.json is gone
    # (a sweep stopped in the middle of it), runs again.
    (out / "runs" / "t00002" / "run.json").unlink()
    calls.write_text("")
    assert main(["sweep", str(tmp_path / "sweep.toml"), "--out", str(out), "--quiet",
                 "--resume"]) == 1
    capsys.readouterr()
    again = sorted(Path(p).name for p in calls.read_text().splitlines())
    assert again == ["t00001", "t00002", "t00003"]
    second = json.loads((out / "sweep.json").read_text())["outcomes"]
    assert [(o["task"], o["ok"]) for o in second] == [(o["task"], o["ok"]) for o in first]
    assert second[0]["seconds"] >= 0 and second[0]["params"] == first[0]["params"]
    verify = json.loads((out / "verify.json").read_text())
    assert verify["valid"] and verify["counts"]["runs"] == 2  # the two seed-1 runs
