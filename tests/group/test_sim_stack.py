"""The ``group`` simulator stack: a hostile network (loss, duplication,
reordering, a partition, a crash and restart, a leave and rejoin) ends with no
lost, duplicated, unexpected or misordered message, and runs are reproducible."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from m2mc.errors import ConfigError
from m2mc.sim import load_scenario, run_scenario

from .tracecheck import check, load


def scenario() -> dict[str, Any]:
    return {
        "run": {"chaos": 20.0, "heal": 15.0},
        "stack": {"kind": "group"},
        "nodes": {"count": 5},
        "domains": {"lan": {"delay": {"dist": "uniform", "low": 0.001, "high": 0.02},
                            "loss": 0.2, "duplicate": 0.1, "reorder": 0.2}},
        "groups": [
            {"name": "chat", "order": "sb", "rate": 10.0, "messages": 150, "reply": 0.7,
             "size": {"dist": "uniform", "low": 10, "high": 1400}},
            {"name": "ops", "order": "causal", "members": ["n0", "n1", "n2"], "rate": 4.0,
             "messages": 50},
            {"name": "seq", "order": "total", "members": ["n1", "n2", "n3"], "rate": 4.0,
             "messages": 50},
            # FIFO orders each sender's messages only; replies across senders could
            # pass their parents, which the sb_order check would flag: no replies here.
            {"name": "log", "order": "fifo", "rate": 4.0, "messages": 50, "reply": 0.0},
        ],
        "faults": {"crash": [{"node": "n1", "at": 6.0, "restart": 9.0}],
                   "partition": [{"kind": "symmetric", "sides": [["n0", "n1"],
                                                                 ["n2", "n3", "n4"]],
                                  "at": 11.0, "until": 14.0}]},
        "schedule": [{"at": 4.0, "node": "n4", "action": "leave", "group": "chat"},
                     {"at": 8.0, "node": "n4", "action": "join", "group": "chat"}],
    }


def test_hostile_network_ends_clean(tmp_path: Path) -> None:
    result = run_scenario(scenario(), 3, tmp_path)
    assert result.counters["crashes"] == 1 and result.counters["drops_loss"] > 0
    violations = check(load(tmp_path / "trace"))
    assert {k: v[:3] for k, v in violations.items() if v} == {}


def test_same_seed_gives_identical_traces(tmp_path: Path) -> None:
    spec = scenario()
    spec["run"] = {"chaos": 15.0, "heal": 4.0}
    for g in spec["groups"]:
        g["messages"] = 20
    digests = []
    for i in range(2):
        run_scenario(spec, 7, tmp_path / str(i))
        digests.append({p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                        for p in sorted((tmp_path / str(i) / "trace").glob("*.jsonl"))})
    assert digests[0] == digests[1]


def test_stack_parameters_are_checked() -> None:
    spec = scenario()
    spec["stack"] = {"kind": "group", "nack_backoff": 0.01, "redundancy": 2}
    load_scenario(spec)
    spec["stack"] = {"kind": "group", "no_such_key": 1}
    with pytest.raises(ConfigError, match="no_such_key"):
        load_scenario(spec)
    spec["stack"] = {"kind": "group", "nack_backoff": "soon"}
    with pytest.raises(ConfigError, match="nack_backoff"):
        load_scenario(spec)
