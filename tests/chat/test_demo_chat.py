"""The demo's threaded-chat part: ``m2mc chat --script`` participants on loopback
multicast whose transcripts must hold the same thread tree (m2mc demo, step chat-bots)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from m2mc.demo.steps import CHATTERS, ROUNDS, chat_scripts, compare_transcripts, step_chat_bots
from m2mc.demo.tour import DemoContext
from m2mc_chat.script import Reply, Send, parse_script


def test_every_participant_script_is_valid_and_writes_its_share() -> None:
    scripts = chat_scripts()
    assert list(scripts) == list(CHATTERS)
    for name, text in scripts.items():
        steps = parse_script(text, name)
        assert sum(isinstance(s, Send | Reply) for s in steps) == ROUNDS


def test_transcripts_that_differ_are_caught(tmp_path: Path) -> None:
    def node(mid: str, children: list[dict[str, object]] | None = None) -> dict[str, object]:
        return {"mid": mid, "parent": "", "author": "a", "nick": "a", "text": "t",
                "children": children or []}

    full = [node(f"a:{i}") for i in range(1, ROUNDS * 2 + 1)]
    for name in ("p", "q"):
        (tmp_path / f"{name}.json").write_text(json.dumps({"tree": full}))
    assert compare_transcripts(tmp_path, ("p", "q")) == (
        True, f"the same thread tree of {ROUNDS * 2} messages (depth 1) in all 2 transcripts")
    (tmp_path / "q.json").write_text(json.dumps({"tree": full[:-1]}))
    assert compare_transcripts(tmp_path, ("p", "q"))[0] is False
    (tmp_path / "q.json").write_text(json.dumps({"tree": full[:-1]}))
    (tmp_path / "p.json").write_text(json.dumps({"tree": full[:-1]}))
    assert compare_transcripts(tmp_path, ("p", "q")) == (
        False, f"the thread tree holds {ROUNDS * 2 - 1} of {ROUNDS * 2} messages")


@pytest.mark.multiprocess
def test_the_demo_chat_step_runs_chat_processes_that_agree(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    env["HOME"] = str(tmp_path)
    result = step_chat_bots(DemoContext(out=tmp_path, rng=random.Random(), env=env))
    assert result.ok, (result.summary, result.details)
    assert (f"4 'm2mc chat --script' participants in an S_b group: the same thread tree of "
            f"{ROUNDS * 4} messages") in result.summary
    transcripts = [json.loads((tmp_path / "real" / "chat" / f"{name}.json").read_text())
                   for name in CHATTERS]
    assert all(t["groups"][0]["left"] for t in transcripts)
    trace = tmp_path / "real" / "trace"
    chat_events = [json.loads(line) for i in range(1, 5)
                   for line in (trace / f"chat{i}.jsonl").read_text().splitlines()]
    assert {e["order"] for e in chat_events if e["event"] == "deliver"} == {"sb"}
    assert sum(e["event"] == "deliver" for e in chat_events) == ROUNDS * 4 * 4
    assert {e["run"] for e in chat_events} == {json.loads(
        (tmp_path / "real" / "run.json").read_text())["run"]}
