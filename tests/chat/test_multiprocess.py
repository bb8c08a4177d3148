"""Three chat processes over loopback multicast, driven by scripts (tests/chat/scripts/):
each answers someone else's message, and all three end with the same thread tree."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.multiprocess
SCRIPTS = Path(__file__).parent / "scripts"
WAIT = 60.0  # a bound, not a schedule: the scripts wait for messages, not for time


def loopback_channel() -> str:
    rng = random.Random()
    group = f"239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}"
    return f"udp-multicast://{group}:{rng.randrange(20000, 60000)}?iface=127.0.0.1&ttl=1"


def test_three_processes_reply_to_each_other_and_agree(tmp_path: Path) -> None:
    channel = loopback_channel()
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for name in ("alice", "bob", "carol"):
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "m2mc.cli", "chat", "--nick", name, "--device-id", name,
                 "--data-dir", str(tmp_path / name), "--channel", channel,
                 "--script", str(SCRIPTS / f"{name}.txt"),
                 "--transcript", str(tmp_path / f"{name}.json"), "--step-timeout", "30"],
                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
        results = {name: proc.communicate(timeout=WAIT) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for name, proc in procs.items():
        assert proc.returncode == 0, (name, results[name][1][-2000:])
    transcripts = {name: json.loads((tmp_path / f"{name}.json").read_text())
                   for name in procs}
    trees = [t["tree"] for t in transcripts.values()]
    assert trees[0] == trees[1] == trees[2]

    def shape(nodes: list[dict[str, object]]) -> list[object]:
        return [(n["author"], n["text"], shape(n["children"])) for n in nodes]  # type: ignore[arg-type]

    assert shape(trees[0]) == [
        ("alice", "Where shall we eat today?", [
            ("bob", "Pizza?", [("carol", "Pizza is fine", [("alice", "Then pizza it is", [])])]),
            ("bob", "I will book a table", [])]),
        ("carol", "Anyone for coffee after?", [])]
    assert [n["mid"] for n in trees[0]] == ["alice:1", "carol:2"]
