"""The workload: chat-like reply structure, rates, counts, scheduled membership changes."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from m2mc.sim import run_scenario
from m2mc.sim.workload import make_payload
from m2mc.trace.writer import read_jsonl


def chat(**group: Any) -> dict[str, Any]:
    g = {"name": "g", "rate": 20.0, "messages": 400, "reply": 0.7, "recent": 3.0}
    g.update(group)
    return {"run": {"chaos": 60.0, "heal": 1.0}, "stack": {"kind": "flood"},
            "nodes": {"count": 6}, "domains": {"lan": {"delay": 0.002}}, "groups": [g]}


def test_replies_answer_recent_messages_the_sender_has_seen(tmp_path: Path) -> None:
    result = run_scenario(chat(), 1, tmp_path)
    assert result.sent == {"g": 400}
    seen_by: dict[str, list[str]] = {}
    distances: list[int] = []
    replies = 0
    rows = sorted((r for p in sorted((tmp_path / "trace").glob("*.jsonl"))
                   for r in read_jsonl(p)), key=lambda r: r.t)
    for r in rows:
        if r.event == "deliver":
            seen_by.setdefault(r.node, []).append(r.mid or "")
        if r.event == "send" and r.parent:
            replies += 1
            history = seen_by[r.node]
            assert r.parent in history  # only what this user has on screen
            distances.append(len(history) - 1 - history.index(r.parent))
    assert 0.6 < replies / 400 < 0.8
    assert statistics.median(distances) <= 3  # mostly one of the last few
    assert max(distances) > 3  # ... but older threads get answers too


def test_group_stops_at_its_message_count_or_at_chaos_end(tmp_path: Path) -> None:
    assert run_scenario(chat(messages=50), 1, tmp_path / "a").sent == {"g": 50}
    short = chat(rate=10.0, messages=10_000)
    short["run"]["chaos"] = 5.0
    sent = run_scenario(short, 1, tmp_path / "b").sent["g"]
    assert 25 < sent < 80  # about rate * chaos
    sends = [r.t for p in (tmp_path / "b" / "trace").glob("*.jsonl") for r in read_jsonl(p)
             if r.event == "send"]
    assert max(sends) < 5.0


def test_payload_sizes_follow_the_distribution(tmp_path: Path) -> None:
    run_scenario(chat(size={"dist": "uniform", "low": 100, "high": 300}), 2, tmp_path)
    sizes = [r.bytes or 0 for p in (tmp_path / "trace").glob("*.jsonl") for r in read_jsonl(p)
             if r.event == "send"]
    assert min(sizes) >= 100 and max(sizes) <= 300
    assert 180 < statistics.mean(sizes) < 220
    assert make_payload("g", 12, 3) == b"g#1" and len(make_payload("g", 1, 50)) == 50


def test_crashed_members_do_not_send(tmp_path: Path) -> None:
    spec = chat()
    spec["faults"] = {"crash": [{"node": "n3", "at": 1.0}]}
    run_scenario(spec, 3, tmp_path)
    late = [r for r in read_jsonl(tmp_path / "trace" / "n3.jsonl")
            if r.event == "send" and r.t > 1.0]
    assert late == []


def test_cli_prints_result_json(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text('[run]\nchaos = 2.0\nheal = 0.5\n[stack]\nkind = "flood"\n'
                        '[nodes]\ncount = 2\n[[groups]]\nname = "g"\nrate = 10.0\n')
    done = subprocess.run([sys.executable, "-m", "m2mc.cli", "sim", str(scenario), "--seed",
                           "9", "--out", str(tmp_path / "o"), "--trace-packets"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["run"] == "s-9" and out["seed"] == 9 and out["counters"]["deliveries"] > 0
    events = {r.event for r in read_jsonl(tmp_path / "o" / "trace" / "n0.jsonl")}
    assert {"packet_out", "packet_in", "send", "deliver", "join"} <= events
