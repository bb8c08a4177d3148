"""Infrastructure mode on loopback: throughput and failover time, with a reference.

    .venv/bin/python bench/infra.py [--count 3000] [--quick]

Starts 3 ``m2mc host`` processes (backbone TCP on 127.0.0.1, each cell a multicast
group 239.255.x.y with iface 127.0.0.1 and TTL 1) and 6 member processes that use
the application API (``Node(NodeConfig(mode="infra", ...))``).

* ``throughput``: every member sends ``--count`` messages as fast as the API lets
  it; each member's rate is the messages it delivered (all members' messages, in
  the total order) divided by the time from the first send to its last delivery;
  the slowest member counts. Target: at least 5,000 msg/s.
* ``failover``: while the members send at a moderate rate, the coordinator host
  is killed with SIGKILL; the failover time runs from the kill to the first
  multicast sequenced by the new coordinator (its ``elect`` trace event
  ``first_sequenced``). Target: at most 3 s.
* ``reference``: in the same run, the same members with a single host (no
  election, no replication: the seeds/001 protocol alone), so the cost of the
  replication that makes failover lossless is visible as ``ratio_vs_single_host``.
* ``durable``: the same 3 hosts with ``--data-dir`` (their promise and log written
  before they answer: docs/infra.md "Durable hosts"), with ``--sync full`` (the
  default: the disk waited for at each write) and ``--sync normal``, each as a ratio
  to the memory-only hosts of the same run; and ``power_cut``: every durable host
  killed with SIGKILL while the members send, all started again, the time from the
  restart to the first multicast sequenced, and whether anything was lost.

Prints one JSON object (last line).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
PY = sys.executable
MEMBERS = 6


# ------------------------------------------------------------------ member worker
async def member_main(args: argparse.Namespace) -> None:
    from m2mc.api import Node, NodeConfig

    cells = tuple(args.cells.split(","))
    node = Node(NodeConfig(mode="infra", hosts=cells, infra_cell=cells[args.cell],
                           pid=args.pid))
    await node.start()
    group = await node.join("bench", order="total", timeout=30)
    print(json.dumps({"joined": args.pid}), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.readline()  # "go": every member is in
    t_go = time.time()
    payload = b"x" * args.size

    async def sender() -> None:
        for _ in range(args.count):
            await group.send(payload)
            if args.interval:
                await asyncio.sleep(args.interval)
            elif _ % 64 == 0:
                await asyncio.sleep(0)

    task = loop.create_task(sender())
    expect = args.count * MEMBERS
    got = 0
    last = t_go
    gseqs: list[int] = []
    while got < expect:
        try:
            batch = await group.receive_many(timeout=args.timeout)
        except TimeoutError:
            break
        got += len(batch)
        gseqs.extend(m.gseq or 0 for m in batch)
        last = time.time()
    ordered = all(a < b for a, b in itertools.pairwise(gseqs))
    print(json.dumps({"pid": args.pid, "got": got, "expect": expect, "t_go": t_go,
                      "t_last": last, "ordered": ordered}), flush=True)
    task.cancel()
    await node.close()


# ------------------------------------------------------------------ orchestration
class Deployment:
    def __init__(self, hosts: int, tmp: Path, rng: random.Random,
                 sync: str | None = None) -> None:
        base = rng.randrange(20000, 50000)
        a, b = rng.randrange(1, 250), rng.randrange(1, 250)
        self.cells = [f"udp-multicast://239.255.{a + i}.{b}:{base + i}?iface=127.0.0.1&ttl=1"
                      for i in range(hosts)]
        self.backbone = [f"127.0.0.1:{base + 100 + i}" for i in range(hosts)]
        self.trace = tmp / f"trace-{base}"
        self.trace.mkdir()
        self.data = tmp / f"data-{base}"
        self.sync = sync
        self.hosts: list[subprocess.Popen[str]] = []
        self.members: list[subprocess.Popen[str]] = []
        for i in range(hosts):
            self.hosts.append(self.host(i))

    def host(self, i: int) -> subprocess.Popen[str]:
        peers = [x for j, p in enumerate(self.backbone) if j != i for x in ("--peer", p)]
        durable = [] if self.sync is None else [
            "--data-dir", str(self.data / f"H{i + 1}"), "--sync", self.sync]
        return subprocess.Popen(
            [PY, "-m", "m2mc.cli", "host", "--id", f"H{i + 1}", "--listen",
             self.backbone[i], "--cell", self.cells[i], "--trace-dir", str(self.trace),
             *durable, *peers], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)

    def elect(self) -> list[dict[str, Any]]:
        out = []
        for f in self.trace.glob("*.jsonl"):
            for line in f.read_text().splitlines():
                row = json.loads(line)
                if row["event"] == "elect":
                    out.append({"node": row["node"], "t": row["t"], **json.loads(row["detail"])})
        return sorted(out, key=lambda e: e["t"])

    def master(self) -> str | None:
        act = [e for e in self.elect() if e["phase"] == "active"]
        return str(act[-1]["node"]) if act else None

    def wait_master(self, timeout: float = 30.0) -> str:
        end = time.monotonic() + timeout
        while (m := self.master()) is None:
            if time.monotonic() > end:
                raise RuntimeError("no coordinator elected")
            time.sleep(0.05)
        return m

    def start_members(self, count: int, size: int, interval: float) -> None:
        for k in range(MEMBERS):
            self.members.append(subprocess.Popen(
                [PY, str(HERE), "--worker", "--pid", f"m{k}", "--cells", ",".join(self.cells),
                 "--cell", str(k % len(self.cells)), "--count", str(count), "--size", str(size),
                 "--interval", str(interval)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True))
        for p in self.members:
            assert p.stdout is not None
            line = p.stdout.readline()
            if "joined" not in line:
                raise RuntimeError("a member did not join")

    def go(self) -> None:
        for p in self.members:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()

    def results(self, timeout: float) -> list[dict[str, Any]]:
        out = []
        for p in self.members:
            try:
                stdout, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                stdout, _ = p.communicate()
            lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
            out.extend(x for x in lines if "got" in x)
        return out

    def stop(self) -> None:
        for p in [*self.members, *self.hosts]:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def rate_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["got"] / max(1e-9, r["t_last"] - r["t_go"]) for r in results]
    complete = all(r["got"] == r["expect"] for r in results) and len(results) == MEMBERS
    return {"msgs_per_s_per_member_min": round(min(rates), 1) if rates else 0.0,
            "msgs_per_s_per_member_median": round(statistics.median(rates), 1) if rates else 0.0,
            "complete": complete, "ordered": all(r["ordered"] for r in results)}


def measure_throughput(hosts: int, count: int, tmp: Path, rng: random.Random,
                       sync: str | None = None) -> dict[str, Any]:
    d = Deployment(hosts, tmp, rng, sync)
    try:
        d.wait_master()
        d.start_members(count, 64, 0.0)
        time.sleep(0.5)
        d.go()
        return rate_of(d.results(120))
    finally:
        d.stop()


def measure_failover(tmp: Path, rng: random.Random) -> dict[str, Any]:
    d = Deployment(3, tmp, rng)
    try:
        master = d.wait_master()
        d.start_members(150, 64, 0.02)
        time.sleep(0.5)
        d.go()
        time.sleep(1.5)
        index = int(master[1:]) - 1
        t_kill = time.time()
        os.kill(d.hosts[index].pid, signal.SIGKILL)
        res = d.results(60)
        firsts = [e for e in d.elect() if e["phase"] == "first_sequenced" and e["t"] > t_kill]
        actives = [e for e in d.elect() if e["phase"] == "active" and e["t"] > t_kill]
        return {"killed": master, "new_coordinator": actives[0]["node"] if actives else None,
                "failover_s": round(firsts[0]["t"] - t_kill, 3) if firsts else None,
                "elected_s": round(actives[0]["t"] - t_kill, 3) if actives else None,
                "nothing_lost": all(r["got"] == r["expect"] for r in res) and len(res) == MEMBERS,
                "ordered": all(r["ordered"] for r in res)}
    finally:
        d.stop()


def measure_power_cut(tmp: Path, rng: random.Random) -> dict[str, Any]:
    """Durable hosts, all killed at once while members send, all started again."""
    d = Deployment(3, tmp, rng, "full")
    try:
        d.wait_master()
        d.start_members(150, 64, 0.02)
        time.sleep(0.5)
        d.go()
        time.sleep(1.5)
        for h in d.hosts:
            os.kill(h.pid, signal.SIGKILL)
        for h in d.hosts:
            h.wait(10)
        time.sleep(1.0)
        t_back = time.time()
        d.hosts = [d.host(i) for i in range(3)]
        res = d.results(60)
        firsts = [e for e in d.elect() if e["phase"] == "first_sequenced" and e["t"] > t_back]
        return {"resumed_s": round(firsts[0]["t"] - t_back, 3) if firsts else None,
                "nothing_lost": all(r["got"] == r["expect"] for r in res) and len(res) == MEMBERS,
                "ordered": all(r["ordered"] for r in res)}
    finally:
        d.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=3000, help="messages sent by each member")
    p.add_argument("--quick", action="store_true", help="fewer messages (a smoke run)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--pid", help=argparse.SUPPRESS)
    p.add_argument("--cells", help=argparse.SUPPRESS)
    p.add_argument("--cell", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, default=64, help=argparse.SUPPRESS)
    p.add_argument("--interval", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=10.0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        asyncio.run(member_main(args))
        return 0
    count = 300 if args.quick else args.count
    rng = random.Random()
    tmp = Path(tempfile.mkdtemp(prefix="m2mc-bench-infra-"))
    try:
        three = measure_throughput(3, count, tmp, rng)
        single = measure_throughput(1, count, tmp, rng)
        full = measure_throughput(3, count, tmp, rng, "full")
        normal = measure_throughput(3, count, tmp, rng, "normal")
        failover = measure_failover(tmp, rng)
        power_cut = measure_power_cut(tmp, rng)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratio = (three["msgs_per_s_per_member_min"] / single["msgs_per_s_per_member_min"]
             if single["msgs_per_s_per_member_min"] else None)
    out = {
        "bench": "infra", "members": MEMBERS, "hosts": 3, "messages_per_member": count,
        "throughput": three, "reference_single_host": single,
        "ratio_vs_single_host": round(ratio, 3) if ratio else None,
        "durable": {
            "sync_full": full, "sync_normal": normal,
            "ratio_full_vs_memory": _ratio(full, three),
            "ratio_normal_vs_memory": _ratio(normal, three)},
        "failover": failover,
        "power_cut": power_cut,
        "targets": {"throughput_msgs_per_s": 5000, "failover_s": 3.0},
        "meets_targets": {
            "throughput": three["msgs_per_s_per_member_min"] >= 5000 and three["complete"],
            "failover": failover["failover_s"] is not None and failover["failover_s"] <= 3.0
            and failover["nothing_lost"]},
    }
    print(json.dumps(out))
    return 0


def _ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    key = "msgs_per_s_per_member_min"
    return round(a[key] / b[key], 3) if b[key] else None


if __name__ == "__main__":
    sys.exit(main())
