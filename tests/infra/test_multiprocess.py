"""Real processes on loopback: 3 ``m2mc host`` processes and 6 member processes. The
coordinator is killed with ``kill -9`` mid-stream and a member moves to another cell;
every member ends with the same total order and nothing lost."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.multiprocess

HERE = Path(__file__).parent
PY = sys.executable
M2MC = [PY, "-m", "m2mc.cli"]
BASE = 7000 + (os.getpid() % 500) * 2  # ports and groups apart from parallel runs
CELLS = [f"udp-multicast://239.255.{43 + i}.{1 + os.getpid() % 200}:{BASE + 1 + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(3)]
BACKBONE = [f"127.0.0.1:{BASE + 10 + i}" for i in range(3)]
COUNT = 100  # messages per member
MEMBERS = 6


class Proc:
    def __init__(self, cmd: list[str], stdin: bool = False, stderr: object = None) -> None:
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr or subprocess.DEVNULL,
                                  stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                  text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: list[dict[str, object]] = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            with contextlib.suppress(ValueError):
                self.lines.append(json.loads(line))

    def send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)

    def deliveries(self) -> list[tuple[int, str]]:
        return [(int(x["gseq"]), str(x["mid"])) for x in list(self.lines) if "gseq" in x]


def wait_for(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def elect_events(trace: Path) -> list[dict[str, object]]:
    out = []
    for f in trace.glob("*.jsonl"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            if row["event"] == "elect":
                out.append({"node": row["node"], "t": row["t"], **json.loads(row["detail"])})
    return sorted(out, key=lambda e: e["t"])  # type: ignore[arg-type, return-value]


def active_master(trace: Path) -> str | None:
    act = [e for e in elect_events(trace) if e["phase"] == "active"]
    return str(act[-1]["node"]) if act else None


def test_kill_the_coordinator_and_move_a_member(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    hosts: dict[str, Proc] = {}
    members: list[Proc] = []
    try:
        for i in range(3):
            peers = [a for j, a in enumerate(BACKBONE) if j != i]
            hosts[f"H{i + 1}"] = Proc(
                [*M2MC, "host", "--id", f"H{i + 1}", "--listen", BACKBONE[i], "--cell", CELLS[i],
                 "--trace-dir", str(trace), *[x for p in peers for x in ("--peer", p)]])
        wait_for(lambda: active_master(trace) is not None, 20, "a first coordinator")
        for k in range(MEMBERS):
            members.append(Proc(
                [PY, str(HERE / "infra_member_proc.py"), "--pid", f"m{k}",
                 "--cells", ",".join(CELLS), "--cell", str(k % 3), "--count", str(COUNT),
                 "--interval", "0.03", "--expect", str(COUNT * MEMBERS)], stdin=True))
        wait_for(lambda: all(any("joined" in x for x in m.lines) for m in members), 30,
                 "every member to join")
        for m in members:
            m.send("go")
        wait_for(lambda: min(len(m.deliveries()) for m in members) > 100, 30, "traffic")
        master = active_master(trace)
        assert master is not None
        os.kill(hosts[master].p.pid, signal.SIGKILL)  # kill -9 the coordinator mid-stream
        t_kill = time.time()
        dead = int(master[1:]) - 1
        # a member of a live cell walks to the other live cell
        live = [i for i in range(3) if i != dead]
        mover = next(k for k in range(MEMBERS) if k % 3 == live[0])
        members[mover].send(f"move {CELLS[live[1]]}")
        wait_for(lambda: all(any("done" in x for x in m.lines) for m in members), 90,
                 "every member to deliver every message")
        new = active_master(trace)
        assert new is not None and new != master
        firsts = [e for e in elect_events(trace)
                  if e["phase"] == "first_sequenced" and e["node"] == new]
        assert firsts and float(firsts[-1]["t"]) - t_kill < 10.0  # type: ignore[arg-type]
        assert any("moved" in x for x in members[mover].lines)
        seqs = [m.deliveries() for m in members]
        assert all(s == seqs[0] for s in seqs), "members disagree on the total order"
        mids = [mid for _, mid in seqs[0]]
        assert len(mids) == len(set(mids)) == COUNT * MEMBERS  # nothing lost or duplicated
        assert [g for g, _ in seqs[0]] == sorted(g for g, _ in seqs[0])
        assert set(mids) == {f"m{k}:{i + 1}" for k in range(MEMBERS) for i in range(COUNT)}
    finally:
        for p in [*members, *hosts.values()]:
            p.stop()
