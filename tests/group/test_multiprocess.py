"""Four real processes over loopback multicast: one leaves and rejoins, one is
killed with SIGKILL and restarted from its SQLite log. Every node delivers every
message, once, in S_b order (checked on the trace files they write)."""

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


def _spawn(pid: str, url: str, tmp: Path, *extra: str) -> Child:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    return Child(["--pid", pid, "--channel", url, "--data", str(tmp / pid), "--trace",
                  str(tmp / "trace"), "--peers", "a,b,c,d", "--send", "40",
                  "--wait-members", "4", *extra], env=env, cwd=tmp, script=PEER)


def test_four_processes_leave_rejoin_and_kill_9(tmp_path: Path) -> None:
    url = random_multicast_url(random.Random())
    (tmp_path / "trace").mkdir()
    children = {pid: _spawn(pid, url, tmp_path) for pid in ("a", "b", "d")}
    children["c"] = _spawn("c", url, tmp_path, "--leave-at", "12", "--away", "1.0")
    try:
        children["d"].wait_stderr("d sent 15", WAIT)
        children["d"].proc.kill()  # SIGKILL: no clean-up of any kind
        children["d"].proc.wait(WAIT)
        children["d"] = _spawn("d", url, tmp_path)
        for pid, child in children.items():
            assert child.finish(WAIT) == 0, (pid, child.stdout[-3:], child.stderr[-5:])
        assert any("c rejoined" in line for line in children["c"].stderr)
    finally:
        for child in children.values():
            if child.proc.poll() is None:
                child.proc.kill()
    result = check(load(tmp_path / "trace"))
    assert {k: v[:3] for k, v in result.items() if v} == {}
    rows = load(tmp_path / "trace")
    # The restarted node says itself that its last incarnation crashed.
    assert [r["event"] for r in rows if r["node"] == "d" and r["event"] in (
        "crash", "restart")] == ["crash", "restart"]
    sends = [r for r in rows if r["event"] == "send"]
    assert len(sends) == 160 and len({r["mid"] for r in sends}) == 160  # no identity reused
    for pid in "abcd":
        delivered = {r["mid"] for r in rows if r["event"] == "deliver" and r["node"] == pid}
        assert len(delivered) == 160


def test_bench_throughput_prints_the_contract_json(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    child = Child(["bench", "throughput", "--receivers", "2", "--count", "300", "--size", "50"],
                  env=env, cwd=tmp_path)
    assert child.finish(WAIT) == 0, child.stderr[-5:]
    last = json.loads(child.stdout[-1])
    assert set(last) == {"sent", "received_min", "msgs_per_s", "seconds"}
    assert last["sent"] == 300 and last["received_min"] == 300 and last["msgs_per_s"] > 0
