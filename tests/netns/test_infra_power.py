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

import shutil
from pathlib import Path

import pytest
from infra_deployment import Deployment, back, check_deliveries, check_hosts
from netns_lab import Lab
from netns_processes import active_master, stop_nodes, stop_processes, wait_all, wait_until
from test_infra import MEMBERS, analyze, make_key

pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nft") is None,
                                 reason="nftables is not installed (apt-get install nftables)")]

SEND = 120  # messages per member, one every 0.15 s: about 18 s of traffic
LOSS = 15
PAD = 3000  # bytes of each message: two Ethernet frames, so a cell frame goes in pieces
RUN = "netns-infra-power"


@pytest.mark.timeout(1200)  # the run, then a Spark analysis on a shared 2-core machine
def test_kill_9_of_every_host_at_once_then_a_rolling_restart_loses_nothing(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    d = Deployment(lab, make_key(tmp_path / "deploy.key", child_env), tmp_path, child_env, RUN,
                   member_flags=("--pad", str(PAD)))
    trace, host_trace = d.trace, d.host_trace
    for i in range(3):
        d.start_host(i)
    wait_until(lambda: active_master(host_trace) is not None, "a master to be elected", 30)
    for pid, (ns, cell) in MEMBERS.items():
        d.start_member(pid, ns, cell, list(MEMBERS), SEND)
    d.write_run(LOSS)
    progress = d.progress()
    try:
        d.go_under_loss(LOSS)
        for i in range(3):  # the power cut: every host at once, while the members send
            d.hosts[f"H{i}"][0].kill()
        for i in range(3):
            d.hosts[f"H{i}"][0].wait(timeout=10)
        before = min(d.deliveries().values())
        wait_all(progress, lambda pid: f"{pid} sent 30", "the members to send on", 60)
        for i in range(3):
            d.start_host(i)
        wait_until(lambda: min(d.deliveries().values()) >= before + 60,
                   "sequencing to resume after the power cut", 120,
                   lambda: (d.deliveries(), active_master(host_trace)))
        for i in range(3):  # a rolling restart: each host back before the next goes
            was = d.view(f"H{i}").get("commit", 0)
            d.kill_host(f"H{i}")
            d.start_host(i)
            wait_until(lambda i=i, was=was: back(d.view(f"H{i}"), was),
                       f"H{i} to be back (a master named, its commit at {was} or past)", 120,
                       lambda i=i: d.view(f"H{i}"))
        d.finish(SEND)
    finally:
        results = stop_nodes(d.members)
        stop_processes(d.hosts)
    check_deliveries(results, len(MEMBERS) * SEND)
    check_hosts(d, restored=6)  # every host took its log up, twice
    analyze(trace, tmp_path / "analysis", child_env, len(MEMBERS) * SEND)
