"""A keyed group across real processes over loopback multicast: three members
holding the passphrase deliver each other's messages in S_b order (checked on
their traces) while an outsider without it joins the group by name and talks
into it; none of its messages reaches a member, and the members count them."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from m2mc.demo.tour import Child, random_multicast_url

from .tracecheck import check, load

pytestmark = pytest.mark.multiprocess
PEER = str(Path(__file__).with_name("mp_peer.py"))
WAIT = 60.0


def _spawn(pid: str, url: str, tmp: Path, trace: Path, *extra: str) -> Child:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    return Child(["--pid", pid, "--channel", url, "--data", str(tmp / pid), "--trace",
                  str(trace), *extra], env=env, cwd=tmp, script=PEER)


def test_keyed_group_across_processes_keeps_an_outsider_out(tmp_path: Path) -> None:
    url = random_multicast_url(random.Random())
    members, outsider = tmp_path / "members", tmp_path / "outsider"
    members.mkdir()
    outsider.mkdir()
    common = ["--peers", "a,b,c", "--send", "25", "--wait-members", "3",
              "--passphrase", "loopback secret"]
    # The outsider talks slowly from before the members start until after they are done.
    children = {"eve": _spawn("eve", url, tmp_path, outsider, "--peers", "eve", "--send", "14",
                              "--interval", "0.3", "--linger", "0.2")}
    try:
        children["eve"].wait_stderr("eve ready", WAIT)
        for pid in "abc":
            children[pid] = _spawn(pid, url, tmp_path, members, *common)
        for pid, child in children.items():
            assert child.finish(WAIT) == 0, (pid, child.stdout[-3:], child.stderr[-5:])
    finally:
        for child in children.values():
            if child.proc.poll() is None:
                child.proc.kill()
    rows = load(members)
    result = check(rows)
    assert {k: v[:3] for k, v in result.items() if v} == {}
    for pid in "abc":
        delivered = {r["mid"] for r in rows if r["event"] == "deliver" and r["node"] == pid}
        assert len(delivered) == 75 and not any(m.startswith("eve:") for m in delivered)
        stats = json.loads(children[pid].stdout[-1])["stats"]
        assert stats["auth_failed"] > 0 and stats["sender_mismatch"] == 0
    eve_stats = json.loads(children["eve"].stdout[-1])["stats"]
    assert eve_stats["sealed_refused"] > 0
    eve_delivered = {r["mid"] for r in load(outsider) if r["event"] == "deliver"}
    assert eve_delivered and all(m.startswith("eve:") for m in eve_delivered)
