"""Simulator: a node joins a group after its members' logs evicted the start of the
history (``retention_age``), over a lossy LAN. The documented outcome
(docs/group.md section 8): it catches up what is still held, gives up the rest
(one ``skip`` per message, none twice, each also a ``MessagesSkipped``), delivers
every message sent once it joined, and nobody hangs: the run ends clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from m2mc.sim import run_scenario

from .tracecheck import check, load


def scenario(age: float) -> dict[str, Any]:
    return {
        "run": {"chaos": 24.0, "heal": 12.0},
        "stack": {"kind": "group", "retention_age": age},
        "nodes": {"count": 4},
        "domains": {"lan": {"delay": {"dist": "uniform", "low": 0.001, "high": 0.01},
                            "loss": 0.05, "duplicate": 0.02, "reorder": 0.05}},
        "groups": [{"name": "chat", "order": "sb", "members": ["n0", "n1", "n2"],
                    "rate": 8.0, "messages": 170, "reply": 0.7}],
        "schedule": [{"at": 14.0, "node": "n3", "action": "join", "group": "chat"}],
    }


@pytest.mark.parametrize("seed", [1, 2])
def test_a_late_joiner_after_eviction_skips_the_gone_part_and_goes_on(
        tmp_path: Path, seed: int) -> None:
    result = run_scenario(scenario(age=5.0), seed, tmp_path)
    rows = load(tmp_path / "trace")
    violations = check(rows)
    # n3 was no member while the evicted part was sent, and is one for everything
    # after: nothing lost, duplicated or out of S_b order (a skipped parent is the
    # place of its replies).
    assert {k: v[:3] for k, v in violations.items() if v} == {}
    sent = {r["mid"] for r in rows if r["event"] == "send"}
    at_joiner = [r for r in rows if r["node"] == "n3"]
    delivered = [r["mid"] for r in at_joiner if r["event"] == "deliver"]
    skipped = [r["mid"] for r in at_joiner if r["event"] == "skip" and r["mid"]]
    joined = min(r["t"] for r in at_joiner if r["event"] == "join")
    # Every message is delivered or skipped at n3, exactly once, never both ...
    assert sorted(delivered + skipped) == sorted(sent)
    # ... what was evicted before n3 joined is skipped (the oldest part, at least all
    # that is more than twice the age old), the rest delivered.
    early = {r["mid"] for r in rows if r["event"] == "send" and r["t"] < joined - 2 * 5.0}
    assert early and early <= set(skipped)
    assert len(skipped) < len(sent) - 40
    assert result.sent["chat"] == len(sent)


def test_without_retention_the_late_joiner_gets_the_whole_history(tmp_path: Path) -> None:
    spec = scenario(age=0.0)  # no age bound: nothing is evicted
    run_scenario(spec, 1, tmp_path)
    rows = load(tmp_path / "trace")
    assert {k: v[:3] for k, v in check(rows).items() if v} == {}
    sent = {r["mid"] for r in rows if r["event"] == "send"}
    at_joiner = [r for r in rows if r["node"] == "n3"]
    assert not any(r["event"] == "skip" for r in at_joiner)
    assert {r["mid"] for r in at_joiner if r["event"] == "deliver"} == sent
