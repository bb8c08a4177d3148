"""Scenario files: every wrong key or value is a one-line error naming it, exit status 2."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from m2mc.errors import ConfigError
from m2mc.sim import load_scenario
from m2mc.sim.scenario import CELLS

ROOT = Path(__file__).resolve().parents[2]


def base() -> dict[str, Any]:
    return {
        "name": "t",
        "run": {"chaos": 10.0, "heal": 2.0},
        "stack": {"kind": "flood"},
        "trace": {},
        "nodes": {"count": 3, "domain": "lan"},
        "domains": {"lan": {"delay": 0.001, "loss": 0.1}},
        "groups": [{"name": "g", "order": "sb"}],
        "faults": {"partition": [{"sides": [["n0"]], "at": 1.0, "until": 2.0}],
                   "crash": [{"node": "n1", "at": 1.0, "restart": 3.0}]},
        "schedule": [{"at": 1.0, "node": "n2", "action": "leave", "group": "g"}],
    }


def with_value(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(base())
    node: Any = data
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    node[parts[-1]] = value
    return data


def test_a_scenario_without_a_stack_runs_the_group_layer(tmp_path: Path) -> None:
    import json

    from m2mc.sim import run_scenario

    data = base()
    del data["stack"]
    assert load_scenario(data).stack_kind == "group"
    data["groups"] = [{"name": "g", "order": "total", "rate": 10.0, "messages": 20}]
    result = run_scenario(data, 1, tmp_path)
    assert json.loads((tmp_path / "run.json").read_text())["stack"] == "group"
    rows = [json.loads(line) for f in sorted((tmp_path / "trace").glob("*.jsonl"))
            for line in f.read_text().splitlines()]
    # total order is the group layer's (MOP), and its repair (NACKs) makes up for the loss
    assert {r["order"] for r in rows if r["event"] == "deliver"} == {"total"}
    assert sum(r["event"] == "deliver" for r in rows) >= 2 * result.sent["g"]


def test_base_scenario_is_valid_and_parsed() -> None:
    sc = load_scenario(base())
    assert [n.id for n in sc.nodes] == ["n0", "n1", "n2"]
    assert sc.end == 12.0 and sc.orderings == {"g": "sb"}
    assert sc.domains[0].link.loss == 0.1


@pytest.mark.parametrize(("path", "value", "message"), [
    ("colour", "red", "colour: unknown key"),
    ("run.chaos", 0, "run.chaos: must be > 0"),
    ("run.chaos", "ten", "run.chaos: must be a number, got string 'ten'"),
    ("run.hael", 3, "run.hael: unknown key"),
    ("domains.lan.los", 0.1, "domains.lan.los: unknown key"),
    ("domains.lan.loss", 1.5, "domains.lan.loss: must be in [0, 1], got 1.5"),
    ("domains.lan.loss", True, "domains.lan.loss: must be a number, got boolean true"),
    ("domains.lan.delay", {"dist": "gauss"}, "domains.lan.delay.dist: must be one of"),
    ("domains.lan.delay", {"dist": "uniform", "low": 0.2, "high": 0.1},
     "domains.lan.delay.high: must be >= 0.2"),
    ("domains.lan.delay", -1, "domains.lan.delay: must be >= 0"),
    ("domains.lan.capacity", {"rate": 0}, "domains.lan.capacity.rate: must be > 0"),
    ("domains.lan.reliable", True, "domains.lan.reliable: a reliable domain cannot have loss"),
    ("domains.lan.loss", {"model": "gilbert-elliott", "p_good_bad": 0.1},
     "domains.lan.loss.p_bad_good: missing"),
    ("nodes.count", -1, "nodes.count: must be >= 0"),
    ("nodes.domain", "wan", "nodes.domain: no domain 'wan'"),
    ("nodes.clock_drift", [1, 0], "nodes.clock_drift: range [1, 0] has high < low"),
    ("groups.0.order", "random", "groups[0].order: must be one of sb, causal, fifo, total"),
    ("groups.0.members", ["n9"], "groups[0].members: no node 'n9'"),
    ("groups.0.reply", 2, "groups[0].reply: must be in [0, 1]"),
    ("faults.partition.0.sides", [["n7"]], "faults.partition[0].sides: no node 'n7'"),
    ("faults.partition.0.kind", "diagonal", "faults.partition[0].kind: must be one of"),
    ("faults.partition.0.until", 0.5, "faults.partition[0].until: must be > 1"),
    ("faults.crash.0.node", "zz", "faults.crash[0].node: no node 'zz'"),
    ("faults.crash", [{"node": "n1", "at": 10.0}],
     "faults.crash: at=10.0 is not inside the chaos phase"),
    ("faults.flood", [], "faults.flood: unknown key"),
    ("schedule.0.action", "dance", "schedule[0].action: must be one of join, leave"),
    ("schedule.0.group", "h", "schedule[0].group: no group 'h'"),
    ("stack.kind", "nope", "stack.kind: unknown stack 'nope'"),
    ("trace.packet", True, "trace.packet: unknown key"),
    ("swarm", {"domains.lan.loss": [0.3, 0.1]}, "swarm.domains.lan.loss: high < low"),
    ("swarm", {"x": "y"}, "swarm.x: must be [low, high] or {choices = [...]}"),
    ("links", [{"domain": "lan", "from": "n0", "to": "n5"}], "links[0].to: no node 'n5'"),
    ("cells", [{"domain": "cellx", "x": 0, "y": 0, "radius": 1}],
     "cells[0].domain: no domain 'cellx'"),
])
def test_bad_key_or_value_is_named(path: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_scenario(with_value(path, value))
    text = str(info.value)
    assert text.startswith(message), text
    assert "\n" not in text


def test_fifo_domain_with_reorder_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"^domains\.lan\.fifo: a FIFO domain cannot"):
        load_scenario(with_value("domains.lan", {"fifo": True, "reorder": 0.1}))


def test_generated_ids_are_zero_padded_and_node_tables_override() -> None:
    data = base()
    data["nodes"]["count"] = 12
    del data["faults"], data["schedule"]
    data["node"] = [{"id": "n03", "clock_offset": 0.5}, {"id": "extra"}]
    sc = load_scenario(data)
    ids = [n.id for n in sc.nodes]
    assert ids[:3] == ["n00", "n01", "n02"] and ids[-1] == "extra" and len(ids) == 13
    n03 = next(n for n in sc.nodes if n.id == "n03")
    assert n03.clock_offset == (0.5, 0.5)


def test_a_share_of_generated_nodes_moves_and_the_first_stays() -> None:
    data = base()
    data["nodes"] = {"count": 10, "domain": CELLS, "position": [1.0, 2.0], "mobile": 0.25,
                     "mobility": {"model": "random_waypoint", "speed": [5.0, 9.0]}}
    data["cells"] = [{"domain": "lan", "x": 0, "y": 0, "radius": 10}]
    sc = load_scenario(data)
    moving = [n.id for n in sc.nodes if n.mobility.model == "random_waypoint"]
    assert moving == ["n7", "n8", "n9"]  # 0.25 * 10 = 2.5, rounded half up: the last 3
    assert {n.position for n in sc.nodes} == {(1.0, 2.0)}
    assert sc.nodes[7].mobility.speed == (5.0, 9.0)
    data["nodes"]["mobile"] = 0.0  # none moves; the mobility table is still checked
    assert all(n.mobility.model == "static" for n in load_scenario(data).nodes)
    data["nodes"]["mobility"] = {"model": "fly"}
    with pytest.raises(ConfigError, match=r"^nodes\.mobility\.model: must be one of"):
        load_scenario(data)


@pytest.mark.parametrize("nodes, message", [
    ({"count": 4, "mobile": 0.5}, "nodes.mobile: needs nodes.mobility"),
    ({"count": 4, "mobile": 1.5, "mobility": {"model": "static"}},
     "nodes.mobile: must be in [0, 1]"),
    ({"count": 4, "position": [1.0]}, "nodes.position: must be [x, y]"),
    ({"count": 4, "mobility": {"model": "random_waypoint"}},
     "node 'n0': mobility needs an interface on"),
])
def test_bad_node_mobility_is_named(nodes: dict[str, Any], message: str) -> None:
    data = base()
    data["nodes"] = {"domain": "lan", **nodes}
    with pytest.raises(ConfigError) as info:
        load_scenario(data)
    assert str(info.value).startswith(message), str(info.value)


def test_mobile_interface_needs_cells() -> None:
    data = base()
    data["node"] = [{"id": "m", "ifaces": {"radio": CELLS}}]
    with pytest.raises(ConfigError, match="follows cells, but no"):
        load_scenario(data)


def test_single_interface_stack_refuses_two_interfaces() -> None:
    data = base()
    data["domains"]["wired"] = {}
    data["node"] = [{"id": "h", "ifaces": {"a": "lan", "b": "wired"}}]
    with pytest.raises(ConfigError, match="has one interface"):
        load_scenario(data)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "examples" / "scenarios")
                                        .glob("*.toml")))
def test_shipped_scenarios_load(name: str) -> None:
    load_scenario(ROOT / "examples" / "scenarios" / name)


def test_cli_bad_scenario_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[run]\nchaos = 10\n[domains.lan]\nlos = 0.2\n')
    done = subprocess.run([sys.executable, "-m", "m2mc.cli", "sim", str(bad), "--seed", "1",
                           "--out", str(tmp_path / "o")], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        done.stderr.strip()]  # exactly one line, no traceback
    assert "domains.lan.los: unknown key" in done.stderr
    not_toml = tmp_path / "x.toml"
    not_toml.write_text("[run\n")
    done = subprocess.run([sys.executable, "-m", "m2mc.cli", "sim", str(not_toml), "--seed",
                           "1", "--out", str(tmp_path / "o")], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and "not valid TOML" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
