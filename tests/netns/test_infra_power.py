"""Durable hosts in four namespaces (issue 34, item 7): a power cut of every host while
the members send, then a rolling restart, under loss; judged by the pipeline.

Three ``m2mc host --data-dir`` processes (namespaces h0, h1, h2), each the gateway of
its own cell, sealed with one deployment key; six members on the public API with a
``data_dir`` (one beside each host, three in h3). The switch drops 15% of the UDP
frames towards every namespace. While the members send, all three hosts are killed
with SIGKILL at once; the members go on sending into the silence; the hosts are
started again with the same command lines (each takes its log up from its data dir).
Then a rolling restart: each host in turn killed with SIGKILL and started again, the
next one only once it is back (it names the master, and its commit point has reached
the one it had when it went down). Every member must deliver every message exactly
once, all in one order, and ``m2mc analyze`` must find the members' trace VALID."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from netns_lab import Host, Lab
from netns_processes import (
    M2MC,
    Lines,
    active_master,
    stop_nodes,
    stop_processes,
    wait_all,
    wait_until,
)
from test_infra import MEMBERS, analyze, cell_url, make_key

pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nft") is None,
                                 reason="nftables is not installed (apt-get install nftables)")]

NODE = str(Path(__file__).with_name("infra_node.py"))
SEND = 120  # messages per member, one every 0.15 s: about 18 s of traffic
LOSS = 15
RUN = "netns-infra-power"
Child = tuple["subprocess.Popen[bytes]", Lines, Lines]


def deliveries(trace: Path) -> dict[str, int]:
    """How many deliveries each member's trace shows so far."""
    counts = dict.fromkeys(MEMBERS, 0)
    for path in trace.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            if '"deliver"' in line:
                row = json.loads(line)
                if row["event"] == "deliver" and row["node"] in counts:
                    counts[row["node"]] += 1
    return counts


def view(lab: Lab, host: Host, key: Path, env: dict[str, str]) -> dict[str, Any]:
    """``m2mc host show`` of one host, run in its own namespace ({} if no answer)."""
    done = lab.exec(host, [*M2MC, "host", "show", "--via", f"{host.address}:47201",
                           "--key-file", str(key), "--timeout", "3"], env=env, timeout=30)
    try:
        return dict(json.loads(done.stdout)) if done.returncode == 0 else {}
    except ValueError:
        return {}


def back(seen: dict[str, Any], was: int) -> bool:
    """A restarted host is back: it names a master and that master's commit point has
    reached ``was``, the one it had when it went down (a restarted host's commit point is
    0 until a master syncs it; ``>=``: once the members are done, nothing commits more)."""
    return bool(seen.get("master")) and int(seen.get("commit", 0)) >= max(was, 1)


@pytest.mark.timeout(1200)  # the run, then a Spark analysis on a shared 2-core machine
def test_kill_9_of_every_host_at_once_then_a_rolling_restart_loses_nothing(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    trace, host_trace, data = tmp_path / "trace", tmp_path / "hosts", tmp_path / "data"
    for d in (trace, host_trace, data):
        d.mkdir()
    (trace / "run.json").write_text(json.dumps({"run": RUN, "loss": LOSS, "hosts": 3,
                                                "members": len(MEMBERS)}))
    key = make_key(tmp_path / "deploy.key", child_env)
    go = tmp_path / "go"
    hosts = lab.hosts[:3]
    processes: dict[str, Child] = {}

    def start_host(i: int) -> None:
        host = hosts[i]
        peers = [f"{h.address}:47201" for h in hosts if h is not host]
        argv = [*M2MC, "host", "--id", f"H{i}", "--listen", f"{host.address}:47201",
                "--peer", ",".join(peers), "--cell", cell_url(i, host.address),
                "--uplink", f"{host.address}:47301", "--key-file", str(key),
                "--data-dir", str(data / f"H{i}"), "--trace-dir", str(host_trace),
                "--run-id", RUN]
        process = lab.spawn(host, argv, env=child_env)
        processes[f"H{i}"] = (process, Lines(process.stdout), Lines(process.stderr))
        err = processes[f"H{i}"][2]
        wait_until(err.has(f"H{i} up"), f"host H{i} to start", 30, err.snapshot)

    def kill_host(i: int) -> None:
        process = processes[f"H{i}"][0]
        process.kill()  # SIGKILL: nothing it has not written survives
        process.wait(timeout=10)

    for i in range(3):
        start_host(i)
    wait_until(lambda: active_master(host_trace) is not None, "a master to be elected", 30)
    members: dict[str, Child] = {}
    for pid, (ns, cell) in MEMBERS.items():
        me = lab.hosts[ns]
        cells = ",".join(cell_url(i, me.address) for i in range(3))
        process = lab.spawn(me, [sys.executable, NODE, "--pid", pid, "--cells", cells,
                                 "--cell", str(cell), "--key-file", str(key),
                                 "--trace", str(trace), "--peers", ",".join(MEMBERS),
                                 "--send", str(SEND), "--run", RUN, "--go", str(go),
                                 "--data-dir", str(data / pid)], env=child_env)
        members[pid] = (process, Lines(process.stdout), Lines(process.stderr))
    progress = {pid: err for pid, (_, _, err) in members.items()}
    try:
        wait_all(progress, lambda pid: f"{pid} joined", "every member to join", 60)
        lab.set_loss(LOSS)
        go.touch()
        wait_all(progress, lambda pid: f"{pid} sent 20", "the first messages", 60)
        for i in range(3):  # the power cut: every host at once, while the members send
            processes[f"H{i}"][0].kill()
        for i in range(3):
            processes[f"H{i}"][0].wait(timeout=10)
        before = min(deliveries(trace).values())
        wait_all(progress, lambda pid: f"{pid} sent 30", "the members to send on", 60)
        for i in range(3):
            start_host(i)
        wait_until(lambda: min(deliveries(trace).values()) >= before + 60,
                   "sequencing to resume after the power cut", 120,
                   lambda: (deliveries(trace), active_master(host_trace)))
        for i in range(3):  # a rolling restart: each host back before the next goes
            was = view(lab, hosts[i], key, child_env).get("commit", 0)
            kill_host(i)
            start_host(i)
            wait_until(lambda i=i, was=was: back(view(lab, hosts[i], key, child_env), was),
                       f"H{i} to be back (a master named, its commit at {was} or past)", 120,
                       lambda i=i: view(lab, hosts[i], key, child_env))
        wait_all(progress, lambda pid: f"{pid} sent {SEND}", "the last messages", 120)
        wait_all(progress, lambda pid: f"{pid} done", "every member to deliver everything",
                 180)
    finally:
        results = stop_nodes(members)
        stop_processes(processes)
    orders = set()
    for pid, (status, result) in results.items():
        assert status == 0 and result is not None, (pid, status, result and result["state"])
        order = result["order"]
        assert len(order) == len(set(order)) == len(MEMBERS) * SEND, (pid, len(order))
        assert result["delivered"] == len(MEMBERS) * SEND, (pid, result["state"])
        assert result["gseqs"] == sorted(result["gseqs"]), pid  # delivered in gseq order
        orders.add(tuple(order))
    assert len(orders) == 1  # one total order, the same at every member
    restored = [json.loads(line) for f in host_trace.glob("*.jsonl")
                for line in f.read_text().splitlines()]
    phases = [json.loads(r["detail"]).get("phase") for r in restored if r["event"] == "elect"]
    assert phases.count("restored") >= 6  # every host took its log up, twice
    for name, (_, _, err) in processes.items():
        last = err.closed()[-1]
        assert f"{name} stopped" in last and '"auth_rejected"' not in last, last
    analyze(trace, tmp_path / "analysis", child_env, len(MEMBERS) * SEND)
