"""Reproducibility: one scenario and seed give byte-identical files, in any process."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from m2mc.sim import run_scenario
from m2mc.sim.runner import resolve
from m2mc.trace.writer import parquet_available

ROOT = Path(__file__).resolve().parents[2]
LOSSY = ROOT / "examples" / "scenarios" / "lossy-adhoc.toml"


def short_lossy(tmp_path: Path) -> Path:
    """lossy-adhoc with 70 s of chaos and half the messages: same faults, faster test."""
    import tomllib

    import tomli_w

    data = tomllib.loads(LOSSY.read_text())
    data["run"] = {"chaos": 70.0, "heal": 15.0}
    for group in data["groups"]:
        group["messages"] //= 2
    path = tmp_path / "lossy-short.toml"
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


def digests(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


def cli(*args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    return subprocess.run([sys.executable, "-m", "m2mc.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def test_same_seed_gives_byte_identical_files_across_processes(tmp_path: Path) -> None:
    parquet = parquet_available()
    scenario = short_lossy(tmp_path)
    first = run_scenario(scenario, 7, tmp_path / "a", parquet=parquet)
    # A second interpreter with another string-hash seed: set iteration order differs,
    # so any dependence on it would show here.
    args = ["sim", str(scenario), "--seed", "7", "--out", str(tmp_path / "b")]
    done = cli(*(args + (["--parquet"] if parquet else [])), hash_seed="12345")
    assert done.returncode == 0, done.stderr
    a, b = digests(tmp_path / "a"), digests(tmp_path / "b")
    assert a == b
    names = set(a)
    assert "run.json" in names
    assert {f"trace/n{i}.jsonl" for i in range(8)} <= names
    if parquet:
        assert {f"trace/n{i}.parquet" for i in range(8)} <= names
    assert json.loads(done.stdout)["counters"] == dict(first.counters)


def test_lossy_adhoc_exercises_every_fault_it_configures(tmp_path: Path) -> None:
    result = run_scenario(LOSSY, 1, tmp_path)
    c = result.counters
    assert 1900 <= sum(result.sent.values()) <= 2100  # "about 2,000 messages"
    for key in ("drops_loss", "drops_partition", "drops_crashed", "duplicated", "reordered",
                "crashes", "restarts"):
        assert c[key] > 0, key
    events: dict[str, int] = {}
    for path in (tmp_path / "trace").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            name = json.loads(line)["event"]
            events[name] = events.get(name, 0) + 1
    assert events["drop"] == c["drops"]
    assert events["crash"] == 1 and events["restart"] == 1
    assert events["send"] == sum(result.sent.values())
    assert events["leave"] == 1 and events["join"] >= 8 + 6 + 1
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["orderings"] == {"chat": "sb", "ops": "causal"}
    assert run["seed"] == 1 and run["start"] == 0.0 and run["scenario"] == "lossy-adhoc"


def test_another_seed_gives_another_run(tmp_path: Path) -> None:
    spec = {"run": {"chaos": 5.0, "heal": 1.0}, "stack": {"kind": "flood"},
            "nodes": {"count": 3}, "domains": {"lan": {"loss": 0.3}},
            "groups": [{"name": "g", "rate": 20.0, "messages": 50}]}
    a = run_scenario(spec, 1, tmp_path / "a")
    b = run_scenario(spec, 2, tmp_path / "b")
    again = run_scenario(spec, 1, tmp_path / "c")
    assert digests(tmp_path / "a") != digests(tmp_path / "b")
    assert digests(tmp_path / "a") == digests(tmp_path / "c")
    assert a.counters == again.counters and a.counters != b.counters


def test_rerun_into_the_same_directory_replaces_old_traces(tmp_path: Path) -> None:
    small = {"run": {"chaos": 1.0, "heal": 0.0}, "stack": {"kind": "flood"},
             "nodes": {"count": 2}}
    big = dict(small, nodes={"count": 4})
    run_scenario(big, 1, tmp_path)
    run_scenario(small, 1, tmp_path)
    assert sorted(p.name for p in (tmp_path / "trace").iterdir()) == ["n0.jsonl", "n1.jsonl"]


def test_trace_switched_off_writes_only_run_json(tmp_path: Path) -> None:
    spec = {"run": {"chaos": 2.0, "heal": 0.0}, "stack": {"kind": "flood"},
            "trace": {"enabled": False}, "nodes": {"count": 2},
            "groups": [{"name": "g", "rate": 10.0, "messages": 5}]}
    result = run_scenario(spec, 1, tmp_path)
    assert result.deliveries > 0
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["run.json"]


@pytest.mark.parametrize("seed", [3])
def test_swarm_draws_from_the_seed_and_reports_it(tmp_path: Path, seed: int) -> None:
    scenario = short_lossy(tmp_path)
    done = cli("sim", str(scenario), "--seed", str(seed), "--out", str(tmp_path / "a"),
               "--swarm", "--no-trace")
    assert done.returncode == 0, done.stderr
    drawn = json.loads(done.stdout)["drawn"]
    assert set(drawn) == {"domains.lan.loss", "domains.lan.duplicate", "domains.lan.reorder",
                          "faults.crash[0].at"}
    assert f"swarm seed {seed}" in done.stderr
    for path, value in drawn.items():
        assert f"swarm {path} = {value!r}" in done.stderr
    _, again = resolve(scenario, seed, swarm=True)  # the same draws in this process
    assert again == drawn
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["drawn"] == drawn and run["config"]["domains"]["lan"]["loss"] == drawn[
        "domains.lan.loss"]
