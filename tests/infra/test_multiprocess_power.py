"""Real processes on loopback: 3 ``m2mc host`` processes and 3 member processes, one
of which has a ``data_dir``. That member is killed with SIGKILL mid-stream and
started again on its ``data_dir`` (in another cell): it resumes its membership,
delivers everything sequenced while it was a member (what it missed while dead
comes by NACK), numbers its new messages after the old ones, and the trace of the
whole run passes the checks of docs/interfaces.md §5 (``m2mc analyze`` when Spark is
installed)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from trace_check import verify

# tests/infra/test_multiprocess.py's process helpers, by path: other folders have a
# test_multiprocess module too, and whichever was imported first would win the name.
_spec = importlib.util.spec_from_file_location(
    "infra_test_multiprocess", Path(__file__).with_name("test_multiprocess.py"))
assert _spec is not None and _spec.loader is not None
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]  # slow: m2mc analyze (Spark)

HERE = Path(__file__).parent
PY = sys.executable
M2MC = [PY, "-m", "m2mc.cli"]
PORTS = 13000 + (os.getpid() % 500) * 2
CELLS = [f"udp-multicast://239.255.{80 + i}.{1 + os.getpid() % 200}:{PORTS + 1 + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(3)]
BACKBONE = [f"127.0.0.1:{PORTS + 10 + i}" for i in range(3)]
COUNT = 60  # messages each of m0 and m1 send
AFTER = 20  # messages m2 sends after its restart


def events(trace: Path) -> list[dict[str, object]]:
    out = []
    for f in sorted(trace.glob("*.jsonl")):
        out.extend(json.loads(line) for line in f.read_text().splitlines() if line)
    return out


def member(pid: str, cell: int, count: int, trace: Path, data: Path | None = None) -> base.Proc:
    cmd = [PY, str(HERE / "infra_member_proc.py"), "--pid", pid, "--cells", ",".join(CELLS),
           "--cell", str(cell), "--count", str(count), "--interval", "0.05", "--expect", "0",
           "--trace-dir", str(trace), "--pad", "3000"]  # kept beside the logs
    if data is not None:
        cmd += ["--data-dir", str(data)]
    return base.Proc(cmd, stdin=True)


@pytest.mark.timeout(1200)  # the processes, then a Spark job
def test_a_member_killed_with_sigkill_resumes_and_misses_nothing(tmp_path: Path) -> None:
    trace, host_trace = tmp_path / "trace", tmp_path / "hosts"  # members' apart: analyzed
    trace.mkdir()
    host_trace.mkdir()
    data = tmp_path / "m2-data"
    hosts: list[base.Proc] = []
    members: dict[str, base.Proc] = {}
    try:
        for i in range(3):
            peers = [a for j, a in enumerate(BACKBONE) if j != i]
            hosts.append(base.Proc(
                [*M2MC, "host", "--id", f"H{i + 1}", "--listen", BACKBONE[i], "--cell", CELLS[i],
                 "--trace-dir", str(host_trace), *[x for p in peers for x in ("--peer", p)]]))
        base.wait_for(lambda: base.active_master(host_trace) is not None, 20,
                      "a first coordinator")
        members = {"m0": member("m0", 0, COUNT, trace), "m1": member("m1", 1, COUNT, trace),
                   "m2": member("m2", 2, COUNT, trace, data)}
        base.wait_for(lambda: all(any("joined" in x for x in m.lines) for m in members.values()),
                      30, "every member to join")
        for m in members.values():
            m.send("go")
        base.wait_for(lambda: len(members["m2"].deliveries()) >= 40, 30, "traffic")
        os.kill(members["m2"].p.pid, signal.SIGKILL)  # mid-stream, while it sends too
        members["m2"].p.wait(10)
        first_life = members.pop("m2")
        time.sleep(1.5)  # m0 and m1 go on sending while m2 is dead
        members["m2"] = member("m2", 1, AFTER, trace, data)  # back, in another cell
        base.wait_for(lambda: any("joined" in x for x in members["m2"].lines), 30, "m2 back")
        joined = next(x for x in members["m2"].lines if "joined" in x)
        assert joined["resumed"] == 1  # the same membership, not a fresh join
        members["m2"].send("go")

        def complete() -> bool:
            rows = events(trace)
            back = max(float(e["t"]) for e in rows  # type: ignore[arg-type]
                       if e["node"] == "m2" and e["event"] == "restart")
            sends = Counter(str(e["node"]) for e in rows if e["event"] == "send"
                            and (e["node"] != "m2" or float(e["t"]) > back))  # type: ignore[arg-type]
            if sends["m0"] < COUNT or sends["m1"] < COUNT or sends["m2"] < AFTER:
                return False
            v = verify(trace)
            return v.ok and v.deliveries == 3 * v.sent
        base.wait_for(complete, 90, "every member to deliver every message")
        for m in members.values():
            m.send("quit")
        for m in members.values():
            m.p.wait(20)
    finally:
        for p in [*members.values(), *hosts]:
            p.stop()
    rows = events(trace)
    m2 = [e for e in rows if e["node"] == "m2"]
    kinds = [e["event"] for e in m2]
    assert kinds.count("join") == 1 and "leave" not in kinds  # one membership throughout
    assert kinds.count("crash") == 1 and kinds.count("restart") == 1
    t_restart = next(float(e["t"]) for e in m2 if e["event"] == "restart")  # type: ignore[arg-type]
    sent = [(float(e["t"]), int(str(e["mid"]).split(":")[1]))  # type: ignore[arg-type]
            for e in m2 if e["event"] == "send"]
    numbers = [n for _, n in sent]
    assert len(numbers) == len(set(numbers))  # no message id used twice
    before = [n for t, n in sent if t < t_restart]
    after = [n for t, n in sent if t > t_restart]
    assert len(after) == AFTER and min(after) > max(before)  # numbering went on
    assert any(e["event"] == "nack" for e in m2 if float(e["t"]) > t_restart)  # type: ignore[arg-type]
    assert first_life.deliveries()  # it did deliver before it was killed
    v = verify(trace)
    assert v.ok, v.problems[:5]
    _analyze(trace, tmp_path / "analysis")


def _analyze(trace: Path, out: Path) -> None:
    """``m2mc analyze`` on the run's trace, when the pipeline's Spark is installed."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return
    done = subprocess.run([*M2MC, "analyze", str(trace), "--out", str(out), "--quiet",
                           "--verify-only", "--master", "local[1]",
                           "--conf", "spark.sql.shuffle.partitions=1"],
                          capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((out / "verify.json").read_text())
    assert report["valid"] is True, report
    assert report["counts"]["nodes"] == 3
