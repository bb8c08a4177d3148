"""Infrastructure mode on interfaces named by name whose addresses change under it
(issue 34 item 6; docs/infra.md "Addresses"), on a real kernel in namespaces.

The lab's namespaces get a second network, ``wlan0`` on its own bridge (10.78.0.0/24):
the cells are there, the backbone stays on eth0 (10.77.0.0/24), as a host's wired
backbone and its Wi-Fi cell would. Three ``m2mc host`` processes (h0, h1, h2) name
their cell interface with ``--iface wlan0``, so their uplinks bind on wlan0's address
and their beacons advertise it; four members on the public API, every cell URL with
``iface=wlan0``: m0 beside H0 (cell 0), m1 beside H1 (cell 1), m3 and m4 in h3 (cells
1 and 2). A keyed deployment: the addresses the hosts learn come in sealed frames.

While the members send:

- h3's address is replaced as a DHCP renewal to another address does (the old one
  removed, then the new one added): m3 and m4 must bind their uplinks again and go
  on sending and receiving, and their gateways must answer them at their new
  address;
- h1's address is replaced as a roam that overlaps does (the new one added, then the
  old one removed): H1 must bind its uplink again and advertise it (its cell's
  members, m1 and m3, must follow it), and m1, beside it, moves too.

Every member must end with every message, once, in one total order, and ``m2mc
analyze`` must find the members' traces VALID. Nothing waits on a sleep: each step
waits for what it needs, with generous timeouts.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

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
from test_infra import analyze, make_key

pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nft") is None,
                                 reason="nftables is not installed (apt-get install nftables)")]

NODE = str(Path(__file__).with_name("infra_node.py"))
SEND = 40
MEMBERS = {"m0": (0, 0), "m1": (1, 1), "m3": (3, 1), "m4": (3, 2)}
# pid -> (namespace index, cell index)
CELLS = "10.78.0"
MEMBER_NEW, HOST_NEW = f"{CELLS}.104", f"{CELLS}.102"  # h3's and h1's addresses after


def cell_url(index: int) -> str:
    return f"udp-multicast://239.255.93.{index + 1}:{47111 + index}?iface=wlan0&ttl=1"


def ip(lab: Lab, host: Host, *argv: str) -> None:
    done = lab.exec(host, list(argv))
    assert done.returncode == 0, (argv, done.stderr.decode())


@pytest.mark.timeout(900)  # the run, then a Spark analysis on a shared 2-core machine
def test_hosts_and_members_follow_their_interfaces_address_while_members_send(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    old = lab.add_lan("wlan0", CELLS)
    trace, host_trace = tmp_path / "trace", tmp_path / "hosts"
    trace.mkdir()
    host_trace.mkdir()
    (trace / "run.json").write_text(json.dumps({"run": "netns-iface", "hosts": 3,
                                                "members": len(MEMBERS)}))
    key_file = make_key(tmp_path / "deploy.key", child_env)
    go = tmp_path / "go"
    hosts = lab.hosts[:3]
    processes = {}
    for i, host in enumerate(hosts):
        peers = [f"{h.address}:47201" for h in hosts if h is not host]
        argv = [*M2MC, "host", "--id", f"H{i}", "--listen", f"{host.address}:47201",
                "--peer", ",".join(peers), "--cell", cell_url(i), "--iface", "wlan0",
                "--key-file", str(key_file), "--trace-dir", str(host_trace),
                "--run-id", "netns-iface"]  # the uplink: wlan0's address, any port
        process = lab.spawn(host, argv, env=child_env)
        processes[f"H{i}"] = (process, Lines(process.stdout), Lines(process.stderr))
    for i, (name, (_, _, err)) in enumerate(processes.items()):
        wait_until(err.has(f"{name} up"), f"host {name} to start", 30, err.snapshot)
        assert err.has(f"uplink {old[i]}:")(), err.snapshot()
    wait_until(lambda: active_master(host_trace) is not None, "a master to be elected", 30)

    members = {}
    for pid, (ns, cell) in MEMBERS.items():
        process = lab.spawn(lab.hosts[ns], [
            sys.executable, NODE, "--pid", pid, "--cells", ",".join(map(cell_url, range(3))),
            "--cell", str(cell), "--key-file", str(key_file), "--trace", str(trace),
            "--peers", ",".join(MEMBERS), "--send", str(SEND), "--run", "netns-iface",
            "--go", str(go)], env=child_env)
        members[pid] = (process, Lines(process.stdout), Lines(process.stderr))
    progress = {pid: err for pid, (_, _, err) in members.items()}
    h1, h3 = lab.hosts[1], lab.hosts[3]
    _, _, h1_err = processes["H1"]
    try:
        wait_all(progress, lambda pid: f"{pid} joined", "every member to join", 60)
        go.touch()
        wait_all(progress, lambda pid: f"{pid} sent 8", "the first messages", 60)
        # A DHCP renewal to another address, in the members' namespace: a gap.
        ip(lab, h3, "ip", "addr", "del", f"{old[3]}/24", "dev", "wlan0")
        ip(lab, h3, "ip", "addr", "add", f"{MEMBER_NEW}/24", "dev", "wlan0")
        # A roam that overlaps, in H1's namespace: the new address is secondary until
        # the old one goes (promoted then, rather than removed with it).
        ip(lab, h1, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/conf/wlan0/promote_secondaries")
        ip(lab, h1, "ip", "addr", "add", f"{HOST_NEW}/24", "dev", "wlan0")
        ip(lab, h1, "ip", "addr", "del", f"{old[1]}/24", "dev", "wlan0")
        wait_until(h1_err.has(f"uplink now {HOST_NEW}:"), "H1 to advertise its new uplink",
                   30, h1_err.snapshot)
        wait_all(progress, lambda pid: f"{pid} sent {SEND}", "the last messages", 90)
        wait_all(progress, lambda pid: f"{pid} done", "every member to deliver everything",
                 120)
    finally:
        results = stop_nodes(members)
        stop_processes(processes)
    orders = set()
    for pid, (status, result) in results.items():
        assert status == 0 and result is not None, (pid, status, result and result["state"])
        assert result["delivered"] == len(MEMBERS) * SEND, (pid, result["state"])
        assert len(result["order"]) == len(set(result["order"])), pid  # nothing twice
        assert result["gseqs"] == sorted(result["gseqs"]), pid  # delivered in gseq order
        stats, state = result["stats"], result["state"]
        assert stats["auth_rejected"] == 0 and stats["bad_addresses"] == 0, (pid, stats)
        assert stats["uplink_mismatch"] == 0, (pid, stats)
        ns = MEMBERS[pid][0]
        moved_to = {1: HOST_NEW, 3: MEMBER_NEW}.get(ns)
        assert stats["address_changes"] == int(moved_to is not None), (pid, stats)
        assert state["from"].startswith(f"{moved_to or old[ns]}:"), (pid, state)
        if state["gateway"] == "H1":  # its beacons name the new uplink, and it is used
            assert state["uplink"].startswith(f"{HOST_NEW}:"), (pid, state)
        orders.add(tuple(result["order"]))
    assert len(orders) == 1  # one total order, the same at every member
    for name, (_, _, err) in processes.items():
        last = err.closed()[-1]
        assert f"{name} stopped" in last, last
        for refused in ("auth_rejected", "bad_addresses", "untrusted_addresses",
                        "rate_limited"):
            assert f'"{refused}"' not in last, last
    assert sum(f"uplink now {HOST_NEW}:" in line for line in h1_err.closed()) == 1
    analyze(trace, tmp_path / "analysis", child_env, len(MEMBERS) * SEND,
            nodes=len(MEMBERS))
