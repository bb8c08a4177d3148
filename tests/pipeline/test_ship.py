"""Shipping m2mc to executors (m2mc_pipeline/ship.py), without Spark: a Python that has
only its standard library runs a sweep task, simulator included, from the two zips
the driver builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import tomli_w

from m2mc_pipeline.ship import DEPENDENCIES, OWN, build_zip

SCENARIO = {
    "name": "ship-check", "run": {"chaos": 2.0, "heal": 2.0}, "stack": {"kind": "group"},
    "nodes": {"count": 3, "domain": "lan"}, "domains": {"lan": {"delay": 0.001}},
    "groups": [{"name": "g", "order": "sb", "members": "all", "rate": 5.0, "messages": 5}],
}

TASK = """
import json, sys
from m2mc_pipeline.sweep import SweepTask, run_task, sim_runner
out = run_task(SweepTask("t00000", sys.argv[1], 1, {"groups.0.order": "causal"}),
               sys.argv[2], 120.0, sim_runner)
print(json.dumps({"ok": out.ok, "error": out.error,
                  "m2mc": __import__("m2mc").__file__}))
"""


def test_zips_hold_sources_only_and_are_named_by_content(tmp_path: Path) -> None:
    own = build_zip(OWN, tmp_path, "m2mc")
    again = build_zip(OWN, tmp_path, "m2mc")
    assert own is not None and own == again  # same sources, same name: added once
    names = zipfile.ZipFile(own).namelist()
    assert "m2mc/cli/__init__.py" in names and "m2mc_pipeline/sweep.py" in names
    assert not [n for n in names if n.endswith((".pyc", ".so")) or "__pycache__" in n]
    deps = build_zip(DEPENDENCIES, tmp_path, "m2mc-deps")
    assert deps is not None
    dep_names = zipfile.ZipFile(deps).namelist()
    assert "msgpack/fallback.py" in dep_names and "tomli_w/__init__.py" in dep_names


def test_a_bare_python_runs_a_sweep_task_from_the_shipped_zips(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True, env=env, capture_output=True)
    bare = str(tmp_path / "venv" / "bin" / "python")
    assert subprocess.run([bare, "-c", "import m2mc"], env=env,
                          capture_output=True).returncode != 0
    own = build_zip(OWN, tmp_path / "ship", "m2mc")
    deps = build_zip(DEPENDENCIES, tmp_path / "ship", "m2mc-deps")
    assert own is not None and deps is not None
    (tmp_path / "scenario.toml").write_text(tomli_w.dumps(SCENARIO))
    # As an executor's Python worker sees it after addPyFile: the zips on its path only.
    done = subprocess.run(
        [bare, "-c", TASK, str(tmp_path / "scenario.toml"), str(tmp_path / "runs")],
        env={**env, "PYTHONPATH": os.pathsep.join([str(own), str(deps)])},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["ok"], outcome["error"]
    assert outcome["m2mc"].startswith(str(own))
    meta = json.loads((tmp_path / "runs" / "t00000" / "run.json").read_text())
    assert meta["params"] == {"groups.0.order": "causal"}
    traces = list((tmp_path / "runs" / "t00000").rglob("*.jsonl"))
    assert traces and any(t.stat().st_size for t in traces)  # the child m2mc sim ran
