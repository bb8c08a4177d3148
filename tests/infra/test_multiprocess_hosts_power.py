"""Real processes on loopback: 3 ``m2mc host --data-dir`` processes and 3 member
processes sending every 0.1 s. Every host is killed with SIGKILL at once (a power
cut) and started again 2 s later with the same command line; then a rolling
restart (one host at a time). Every member delivers every message exactly once,
all in one order, and the trace passes the checks of docs/interfaces.md §5. Messages
are 3 KB, so their records are kept beside the logs (docs/infra.md, "Durable hosts").

Before hosts kept their log (issue 34) the same run lost two thirds of the
messages: the restarted hosts elected a master that committed nothing, and the
members resent their pending messages for ever."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from trace_check import verify

_spec = importlib.util.spec_from_file_location(
    "infra_test_multiprocess", Path(__file__).with_name("test_multiprocess.py"))
assert _spec is not None and _spec.loader is not None
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)

pytestmark = [pytest.mark.multiprocess]

HERE = Path(__file__).parent
PY = sys.executable
M2MC = [PY, "-m", "m2mc.cli"]
PORTS = 14000 + (os.getpid() % 500) * 2
CELLS = [f"udp-multicast://239.255.{90 + i}.{1 + os.getpid() % 200}:{PORTS + 1 + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(3)]
BACKBONE = [f"127.0.0.1:{PORTS + 10 + i}" for i in range(3)]
COUNT = 120  # messages per member
# Bytes after each message's name: its record is kept beside the hosts' logs and its
# pending copy beside the member's, so the kills land on those writes too.
PAD = 3000


def host(i: int, data: Path, trace: Path, log: Path) -> base.Proc:
    peers = [a for j, a in enumerate(BACKBONE) if j != i]
    err = log.open("a")
    return base.Proc([*M2MC, "host", "--id", f"H{i + 1}", "--listen", BACKBONE[i],
                      "--cell", CELLS[i], "--data-dir", str(data / f"H{i + 1}"),
                      "--trace-dir", str(trace), *[x for p in peers for x in ("--peer", p)]],
                     stderr=err)


def member(pid: str, cell: int, trace: Path, data: Path) -> base.Proc:
    return base.Proc([PY, str(HERE / "infra_member_proc.py"), "--pid", pid,
                      "--cells", ",".join(CELLS), "--cell", str(cell), "--count", str(COUNT),
                      "--interval", "0.1", "--expect", str(3 * COUNT), "--trace-dir", str(trace),
                      "--data-dir", str(data / pid), "--pad", str(PAD)], stdin=True)


@pytest.mark.timeout(600)
def test_kill_every_host_at_once_then_a_rolling_restart(tmp_path: Path) -> None:
    trace, host_trace, data = tmp_path / "trace", tmp_path / "hosts", tmp_path / "data"
    for d in (trace, host_trace, data):
        d.mkdir()
    log = tmp_path / "hosts.log"
    hosts: list[base.Proc] = []
    members: list[base.Proc] = []
    try:
        hosts = [host(i, data, host_trace, log) for i in range(3)]
        base.wait_for(lambda: base.active_master(host_trace) is not None, 20,
                      "a first coordinator")
        members = [member(f"m{k}", k, trace, data) for k in range(3)]
        base.wait_for(lambda: all(any("joined" in x for x in m.lines) for m in members), 30,
                      "every member to join")
        for m in members:
            m.send("go")
        base.wait_for(lambda: min(len(m.deliveries()) for m in members) >= 60, 60, "traffic")
        for h in hosts:  # the power cut
            os.kill(h.p.pid, signal.SIGKILL)
        for h in hosts:
            h.p.wait(10)
        cut = min(len(m.deliveries()) for m in members)
        time.sleep(2.0)  # the hosts stay down while the members go on sending
        hosts = [host(i, data, host_trace, log) for i in range(3)]
        base.wait_for(lambda: min(len(m.deliveries()) for m in members) >= cut + 90, 90,
                      "sequencing to resume after the power cut")
        for i in range(3):  # a rolling restart: each host back before the next goes
            os.kill(hosts[i].p.pid, signal.SIGKILL)
            hosts[i].p.wait(10)
            hosts[i] = host(i, data, host_trace, log)
            before = min(len(m.deliveries()) for m in members)
            base.wait_for(lambda b=before: min(len(m.deliveries()) for m in members) >= b + 3
                          or all(any("done" in x for x in m.lines) for m in members),
                          60, f"traffic after H{i + 1} restarted")
        base.wait_for(lambda: all(any("done" in x for x in m.lines) for m in members), 120,
                      "every member to deliver every message")
        seqs = [m.deliveries() for m in members]
        assert all(s == seqs[0] for s in seqs), "members disagree on the total order"
        mids = [mid for _, mid in seqs[0]]
        assert len(mids) == len(set(mids)) == 3 * COUNT  # nothing lost or duplicated
        assert set(mids) == {f"m{k}:{i + 1}" for k in range(3) for i in range(COUNT)}
        restored = [json.loads(line) for f in host_trace.glob("*.jsonl")
                    for line in f.read_text().splitlines()]
        phases = Counter(json.loads(r["detail"]).get("phase") for r in restored
                         if r["event"] == "elect")
        assert phases["restored"] >= 6  # every host took its log up, twice
    finally:
        for p in [*members, *hosts]:
            p.stop()
    v = verify(trace)
    assert v.ok, v.problems[:5]
