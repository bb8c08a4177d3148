"""The group layer's request events carry what the pipeline measures repair by
(docs/group.md section 10, docs/pipeline.md "Repair and catch-up"): a sent ``nack``
names its sender ranges in ``detail``, a NACK that was due but not sent is a ``nack``
with ``{"suppressed": true}``, and MSP's suppressed responses are ``sync_resp`` events
saying so. Checked on a small lossy simulation (deterministic: scenario and seed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from m2mc.sim.runner import run_scenario

SCENARIO: dict[str, Any] = {
    "name": "requests",
    "run": {"chaos": 10.0, "heal": 10.0},
    "stack": {"kind": "group"},
    "nodes": {"count": 6, "domain": "lan"},  # (enough for NACKs of one loss to meet)
    "domains": {"lan": {"delay": {"dist": "uniform", "low": 0.001, "high": 0.005},
                        "loss": 0.15}},
    "groups": [{"name": "g", "order": "sb", "members": "all", "rate": 10.0, "messages": 60,
                "reply": 0.5, "size": {"dist": "uniform", "low": 20.0, "high": 100.0}}],
    "faults": {"crash": [{"node": "n3", "at": 3.0, "restart": 5.0}]},
}


def _events(out: Path) -> list[dict[str, Any]]:
    rows = []
    for f in sorted((out / "trace").glob("*.jsonl")):
        rows.extend(json.loads(line) for line in f.read_text().splitlines())
    return rows


def test_nacks_name_what_they_ask_for_and_suppressions_are_traced(tmp_path: Path) -> None:
    run_scenario(SCENARIO, 1, tmp_path)
    events = _events(tmp_path)
    nacks = [e for e in events if e["event"] == "nack"]
    sent = [e for e in nacks if "suppressed" not in json.loads(e["detail"])]
    suppressed = [e for e in nacks if json.loads(e["detail"]).get("suppressed") is True]
    assert sent and suppressed
    assert all(e["mid"] is None and e["group"] == "g" and e["order"] == "sb" for e in nacks)
    recv = {(e["node"], e["mid"]): e["t"] for e in events if e["event"] == "recv"}
    repaired = 0
    for e in sent:
        d = json.loads(e["detail"])
        assert sorted(d["ranges"]) == d["senders"]
        assert sum(map(len, d["ranges"].values())) == d["intervals"]
        assert d["gseq_ranges"] == [] and d["gseqs"] == 0  # S_b: no gseqs
        for sender, ivs in d["ranges"].items():
            assert sender != e["node"]  # a node never asks for its own messages
            for lo, hi in ivs:
                assert 1 <= lo <= hi
                # Every message asked for was missing then; most arrive afterwards.
                for seq in range(lo, hi + 1):
                    t = recv.get((e["node"], f"{sender}:{seq}"))
                    assert t is None or t > e["t"]
                    repaired += t is not None
    assert repaired > 0
    responses = [e for e in events if e["event"] == "sync_resp"]
    held = [e for e in responses if json.loads(e["detail"]).get("suppressed") is True]
    assert held and all(json.loads(e["detail"])["responses"] >= 1 for e in held)
    assert all(e["peer"] is not None for e in responses if e not in held)
