"""[[chaos]]: fault timelines drawn from the run's seed (docs/simulator.md, "[[chaos]]")."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from m2mc.errors import ConfigError
from m2mc.sim import load_scenario, run_scenario
from m2mc.sim.runner import resolve

HOSTS = ["h1", "h2", "h3"]


def scenario(*chaos: dict[str, Any], chaos_len: float = 60.0) -> dict[str, Any]:
    """Three nodes on a wired domain, three that sleep in two cells (probe stacks)."""
    nodes = [{"id": h, "ifaces": {"wired": "lan"}} for h in HOSTS]
    nodes += [{"id": f"m{i}", "ifaces": {"radio": "@cells"}, "position": [10.0 * i, 0.0]}
              for i in range(3)]
    nodes.append({"id": "walker", "ifaces": {"radio": "@cells"},
                  "mobility": {"model": "random_waypoint", "speed": [1.0, 2.0]}})
    return {"run": {"chaos": chaos_len, "heal": 5.0}, "stack": {"kind": "addr-probe"},
            "domains": {"lan": {"delay": 0.001}, "air": {"delay": 0.001},
                        "air2": {"delay": 0.001}},
            "cells": [{"domain": "air", "x": 0.0, "y": 0.0, "radius": 15.0},
                      {"domain": "air2", "x": 30.0, "y": 0.0, "radius": 15.0}],
            "node": nodes, "chaos": list(chaos)}


CRASH = {"fault": "crash", "nodes": HOSTS, "every": [1.0, 4.0], "length": [0.5, 3.0],
         "pattern": {"one": 1, "some": 1, "all": 1, "rolling": 1}}
CUT = {"fault": "partition", "nodes": HOSTS, "domains": ["lan"], "every": [2.0, 6.0],
       "length": [0.5, 4.0]}
SLEEP = {"fault": "sleep", "nodes": ["m0", "m1", "m2"], "every": [1.0, 5.0],
         "length": [2.0, 8.0], "from": 3.0, "until": 50.0}


def drawn(raw: dict[str, Any], seed: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    spec, _ = resolve(raw, seed, swarm=False)
    return dict(spec.raw), [dict(e) for e in spec.episodes]


def test_each_seed_draws_its_own_timeline_and_a_seed_always_the_same() -> None:
    raw = scenario(CRASH, CUT, SLEEP)
    one, again = drawn(raw, 1), drawn(raw, 1)
    assert one == again
    assert raw["chaos"] == [CRASH, CUT, SLEEP] and "faults" not in raw  # input untouched
    timelines = {json.dumps(drawn(raw, s)[1]) for s in range(1, 21)}
    assert len(timelines) == 20
    patterns = {e.get("pattern") for s in range(1, 21) for e in drawn(raw, s)[1]
                if e["fault"] == "crash"}
    assert patterns == {"one", "some", "all", "rolling"}


def test_an_entry_draws_from_its_own_stream() -> None:
    """Adding an entry never changes what the others draw (streams chaos:<index>)."""
    alone = [e for e in drawn(scenario(CRASH), 3)[1]]
    with_more = [e for e in drawn(scenario(CRASH, CUT), 3)[1] if e["entry"] == 0]
    assert alone == with_more


def test_the_written_faults_follow_each_pattern() -> None:
    for seed in range(1, 30):
        raw, episodes = drawn(scenario(CRASH), seed)
        assert "chaos" not in raw  # a plain scenario: its faults are written in
        crashes = raw["faults"]["crash"]
        for ep in episodes:
            assert 0.0 <= ep["at"] < 60.0 and ep["end"] > ep["at"]
            mine = [c for c in crashes if ep["at"] <= c["at"] <= ep["end"]]
            if ep["pattern"] == "one":
                assert len(ep["nodes"]) == 1
            elif ep["pattern"] == "some":
                assert len(ep["nodes"]) == 2
            elif ep["pattern"] == "all":
                assert sorted(ep["nodes"]) == HOSTS
                assert {c["at"] for c in mine} == {ep["at"]}  # at one instant
            else:  # rolling: each node back before the next one goes down
                ordered = sorted(mine, key=lambda c: c["at"])
                assert [c["node"] for c in ordered] == ep["nodes"]
                for a, b in itertools.pairwise(ordered):
                    assert b["at"] >= a["restart"]
        for a, b in itertools.pairwise(episodes):
            assert b["at"] >= a["end"] + 1.0  # one entry's episodes follow one another
        for c in crashes:
            assert c["restart"] > c["at"]


def test_down_intervals_of_one_node_from_two_entries_are_merged() -> None:
    busy = {**CRASH, "every": [0.0, 0.5], "length": [2.0, 6.0], "pattern": {"one": 1}}
    raw, _ = drawn(scenario(busy, {**busy, "nodes": ["h1"]}), 2)
    by_node: dict[str, list[tuple[float, float]]] = {}
    for c in raw["faults"]["crash"]:
        by_node.setdefault(c["node"], []).append((c["at"], c["restart"]))
    for spans in by_node.values():
        spans.sort()
        for (_, up), (down, _) in itertools.pairwise(spans):
            assert down > up  # never a crash while down (its restart would be lost)


def test_partitions_cut_some_nodes_off_the_others_on_the_domains_named() -> None:
    raw, episodes = drawn(scenario(CUT), 4)
    cuts = raw["faults"]["partition"]
    assert len(cuts) == len(episodes) > 3
    for cut, ep in zip(cuts, episodes, strict=True):
        assert cut["domains"] == ["lan"] and cut["kind"] == "symmetric"
        side = cut["sides"][0]
        assert len(cut["sides"]) == 1 and 1 <= len(side) <= 2 and set(side) <= set(HOSTS)
        assert cut["at"] == ep["at"] and cut.get("until", 60.0) == min(ep["end"], 60.0)


def test_some_partitions_are_one_way() -> None:
    """``one_way``: that share of the cuts drop only what the cut-off side sends."""
    raw, episodes = drawn(scenario({**CUT, "one_way": 0.5, "every": [0.5, 2.0]}), 7)
    kinds = [c["kind"] for c in raw["faults"]["partition"]]
    assert set(kinds) == {"symmetric", "one-way"}
    for cut, ep in zip(raw["faults"]["partition"], episodes, strict=True):
        assert cut["kind"] == ep["kind"]
        if cut["kind"] == "one-way":
            assert cut["from"] == ep["nodes"] and "sides" not in cut
            assert sorted(cut["to"] + cut["from"]) == sorted(n["id"] for n in raw["node"])
    load_scenario(raw)  # a plain scenario the simulator takes as it is


def test_a_run_crashes_and_restarts_as_drawn(tmp_path: Path) -> None:
    raw = scenario(CRASH, CUT)
    result = run_scenario(raw, 5, tmp_path / "a")
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["chaos"] == [dict(e) for e in result.chaos] and len(result.chaos) > 5
    crashes = run["config"]["faults"]["crash"]
    assert result.counters["crashes"] == result.counters["restarts"] == len(crashes)
    assert result.counters["partitions"] == len(run["config"]["faults"]["partition"])
    rows = [json.loads(line) for f in sorted((tmp_path / "a" / "trace").glob("h*.jsonl"))
            for line in f.read_text().splitlines()]
    downs = sorted((r["t"], r["node"]) for r in rows if r["event"] == "crash")
    assert downs == sorted((c["at"], c["node"]) for c in crashes)
    # The same scenario and seed: byte-identical files; the written-out scenario alone
    # (run.json's config, no [[chaos]] left) runs the very same faults on any seed.
    run_scenario(raw, 5, tmp_path / "b")
    run_scenario(run["config"], 99, tmp_path / "c")
    digest = [{p.name: hashlib.sha256(p.read_bytes()).hexdigest()
               for p in sorted((tmp_path / d / "trace").iterdir())} for d in "ab"]
    assert digest[0] == digest[1]
    rows_c = [json.loads(line) for f in sorted((tmp_path / "c" / "trace").glob("h*.jsonl"))
              for line in f.read_text().splitlines()]
    assert sorted((r["t"], r["node"]) for r in rows_c if r["event"] == "crash") == downs


def test_a_sleep_takes_a_node_out_of_coverage_and_back(kit: Any, tmp_path: Path) -> None:
    result = run_scenario(scenario(SLEEP), 6, tmp_path)
    sleeps = [e for e in result.chaos if e["fault"] == "sleep"]
    assert sleeps
    for node in ("m0", "m1", "m2"):
        mine = [e for e in sleeps if node in e["nodes"]]
        attach = kit.probes[node].attach  # (iface, domain, virtual time)
        lost = [t for _, d, t in attach if d is None]
        back = [t for _, d, t in attach[1:] if d is not None]
        assert len(lost) == len(back) == len(_merged(mine)), (node, attach, mine)
        for (a, b), t_lost, t_back in zip(_merged(mine), lost, back, strict=True):
            assert a <= t_lost <= a + 0.1 + 1e-9  # the next mobility tick
            assert b <= t_back <= b + 0.1 + 1e-9 or b >= 60.0
        home = attach[0][1]
        assert all(d == home for _, d, _ in attach if d is not None)  # back where it was


def _merged(episodes: list[Any]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted((e["at"], e["end"]) for e in episodes):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


@pytest.mark.parametrize(("change", "message"), [
    ({"fault": "flood"}, "chaos\\[0\\].fault: must be one of"),
    ({"nodes": ["h9"]}, "chaos\\[0\\].nodes: no node 'h9'"),
    ({"nodes": []}, "chaos\\[0\\].nodes: must name at least one node"),
    ({"until": 61.0}, "chaos\\[0\\].until: must be inside the chaos phase"),
    ({"every": 0.0}, "chaos\\[0\\].every: episodes would never end"),
    ({"length": [3.0, 1.0]}, "chaos\\[0\\].length: range .* has high < low"),
    ({"pattern": {"one": 0}}, "chaos\\[0\\].pattern: needs a weight > 0"),
    ({"pattern": {"twice": 1}}, "chaos\\[0\\].pattern.twice: unknown key"),
    ({"fault": "sleep", "nodes": ["walker"]}, "node 'walker' cannot sleep"),
    ({"fault": "sleep", "nodes": ["h1"]}, "node 'h1' cannot sleep"),
    ({"fault": "sleep", "pattern": {"rolling": 1}}, "pattern.rolling: unknown key"),
    ({"fault": "partition", "domains": ["nowhere"]}, "chaos\\[0\\].domains: no domain"),
    ({"fault": "partition", "one_way": 2}, "chaos\\[0\\].one_way: must be in \\[0, 1\\]"),
    ({"one_way": 0.5}, "chaos\\[0\\].one_way: unknown key"),
    ({"colour": "red"}, "chaos\\[0\\].colour: unknown key"),
])
def test_bad_entries_are_refused_naming_the_key(change: dict[str, Any], message: str) -> None:
    entry = copy.deepcopy(CRASH)
    entry.update(change)
    if entry["fault"] == "sleep" and "nodes" not in change:
        entry["nodes"] = ["m0"]
    if entry["fault"] == "partition":
        entry.pop("pattern")
    with pytest.raises(ConfigError, match=message):
        load_scenario(scenario(entry))
