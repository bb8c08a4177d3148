"""Infrastructure mode under a full-speed flood at the hosts' cells.

A keyed deployment of three ``m2mc host`` processes (namespaces h0-h2, one cell
each) and three members on the public API, one in each cell. Once the members
send, the fourth namespace floods every cell (its multicast group, which the
members hear) and every host's uplink (its unicast socket, which the gateway
hears) at full speed: garbage, infrastructure frames of every kind from invented
members and hosts and claiming the real ones, plain (valid checksum) and sealed
under a wrong key, and the cells' own traffic, recorded by the flooder before the
flood and replayed (to the cells and to every uplink) as is and with a flipped
tag byte. Every member still delivers every message, in one total order; the
hosts and members count what they refused; a host's and a member's memory stay
flat.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from netns_lab import Lab, rss_bytes
from netns_processes import (
    M2MC,
    Lines,
    active_master,
    stop_nodes,
    stop_processes,
    wait_all,
    wait_until,
)

pytestmark = [pytest.mark.netns, pytest.mark.slow]

NODE = str(Path(__file__).with_name("infra_node.py"))
FLOOD = str(Path(__file__).with_name("flood.py"))
SEND = 60
RSS_GROWTH_LIMIT = 24 << 20
MEMBERS = {"m0": 0, "m1": 1, "m2": 2}  # pid -> namespace and cell


def cell(index: int) -> tuple[str, int]:
    return f"239.255.92.{index + 1}", 47401 + index


def cell_url(index: int, iface: str) -> str:
    group, port = cell(index)
    return f"udp-multicast://{group}:{port}?iface={iface}&ttl=1"


def test_infra_members_deliver_everything_under_a_flood_at_the_cells(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    key_file = tmp_path / "deploy.key"
    key_file.write_text(subprocess.run([*M2MC[:1], "-c", "from m2mc.security import "
                                        "generate_key; print(generate_key())"],
                                       capture_output=True, text=True, check=True,
                                       env=child_env).stdout)
    key_file.chmod(0o600)
    hosts = lab.hosts[:3]
    flooder = lab.hosts[3]
    uplinks = [f"{h.address}:47501" for h in hosts]
    go, flood_go = tmp_path / "go", tmp_path / "flood"
    first = cell(0)
    also = [f"{g}:{p}" for g, p in map(cell, (1, 2))] + uplinks
    flood = lab.spawn(flooder, [sys.executable, FLOOD, first[0], str(first[1]),
                                flooder.address, "--forge-infra", "--claim",
                                ",".join([*MEMBERS, "H0", "H1", "H2"]),
                                *[arg for a in also for arg in ("--also", a)],
                                "--capture-until", str(flood_go)], env=child_env)
    flood_err = Lines(flood.stderr)
    wait_until(flood_err.has("capturing"), "the flooder to listen", 30, flood_err.snapshot)
    processes = {}
    for i, host in enumerate(hosts):
        peers = [f"{h.address}:47201" for h in hosts if h is not host]
        argv = [*M2MC, "host", "--id", f"H{i}", "--listen", f"{host.address}:47201",
                "--peer", ",".join(peers), "--cell", cell_url(i, host.address),
                "--uplink", uplinks[i], "--key-file", str(key_file),
                "--trace-dir", str(trace), "--run-id", "netns-infra-flood"]
        process = lab.spawn(host, argv, env=child_env)
        processes[f"H{i}"] = (process, Lines(process.stdout), Lines(process.stderr))
    for name, (_, _, err) in processes.items():
        wait_until(err.has(f"{name} up"), f"host {name} to start", 30, err.snapshot)
    wait_until(lambda: active_master(trace) is not None, "a master to be elected", 30)
    members = {}
    for pid, index in MEMBERS.items():
        me = lab.hosts[index]
        cells = ",".join(cell_url(i, me.address) for i in range(3))
        process = lab.spawn(me, [sys.executable, NODE, "--pid", pid, "--cells", cells,
                                 "--cell", str(index), "--key-file", str(key_file),
                                 "--trace", str(trace), "--peers", ",".join(MEMBERS),
                                 "--send", str(SEND), "--go", str(go)], env=child_env)
        members[pid] = (process, Lines(process.stdout), Lines(process.stderr))
    progress = {pid: err for pid, (_, _, err) in members.items()}
    samples: list[tuple[float, int, int]] = []
    sampling = threading.Event()
    flooded_for = 0.0
    try:
        wait_all(progress, lambda pid: f"{pid} joined", "every member to join", 60)
        go.touch()
        wait_all(progress, lambda pid: f"{pid} sent 4", "the members to send", 60)
        flood_go.touch()
        wait_until(flood_err.has("flooding"), "the flood to start", 30, flood_err.snapshot)
        started = time.monotonic()
        host_pid, member_pid = processes["H0"][0].pid, members["m0"][0].pid

        def sample() -> None:
            while not sampling.is_set():
                samples.append((time.monotonic() - started, rss_bytes(host_pid),
                                rss_bytes(member_pid)))
                sampling.wait(0.1)

        threading.Thread(target=sample, daemon=True).start()
        wait_all(progress, lambda pid: f"{pid} done", "every member to deliver everything",
                 120)
        assert flood.poll() is None, "the flood stopped too early"
        flooded_for = time.monotonic() - started
    finally:
        sampling.set()
        if flood.poll() is None:
            flood.terminate()
        results = stop_nodes(members)
        stop_processes(processes)
    assert flood.stdout is not None
    flood.wait(timeout=10)
    summary = json.loads(flood.stdout.read().decode().strip().splitlines()[-1])
    orders = set()
    for pid, (status, result) in results.items():
        assert status == 0 and result is not None, (pid, status, result and result["state"])
        assert result["delivered"] == len(MEMBERS) * SEND, (pid, result["state"])
        assert result["gseqs"] == sorted(result["gseqs"]), pid  # delivered in gseq order
        orders.add(tuple(result["order"][-len(MEMBERS) * SEND:]))
        stats = result["stats"]
        # The flood reached it and was refused: no tag, a bad tag, a replay.
        assert stats["auth_rejected"] > 0, (pid, stats)
        assert stats["malformed_bodies"] == 0, (pid, stats)
    assert len(orders) == 1  # one total order, the same at every member
    refused = {}
    for name, (_, _, err) in processes.items():
        last = err.closed()[-1]
        assert f"{name} stopped" in last, last
        counters = json.loads(re.sub(r"^.*counters ", "", last))
        refused[name] = counters
        assert counters.get("auth_rejected", 0) > 0, (name, counters)
    warm_host = max(h for t, h, _ in samples if t <= flooded_for / 3)
    late_host = max(h for t, h, _ in samples if t > flooded_for / 3)
    warm_member = max(m for t, _, m in samples if t <= flooded_for / 3)
    late_member = max(m for t, _, m in samples if t > flooded_for / 3)
    report = (f"infra flood: {summary['sent']} datagrams ({summary['captured']} recorded) in "
              f"{flooded_for:.1f}s; RSS of H0 {warm_host >> 20} -> {late_host >> 20} MiB, "
              f"of m0 {warm_member >> 20} -> {late_member >> 20} MiB; hosts refused {refused}; "
              f"m0: {results['m0'][1]['stats']}")
    print(report)
    assert summary["sent"] > 20_000 and summary["captured"] > 0, report
    assert late_host - warm_host <= RSS_GROWTH_LIMIT, report
    assert late_member - warm_member <= RSS_GROWTH_LIMIT, report
