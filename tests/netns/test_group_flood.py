"""Group-layer nodes under a full-speed flood of garbage and forged group messages.

Three nodes (three namespaces) share an S_b group; once they see each other, a
fourth namespace floods the group at full speed: garbage, forged M2MP
fragments, and well-formed group messages from invented processes (joins,
status, sync requests and NACKs that ask the members for work, data with absurd
sequence numbers, invented groups on the discovery channel). The members still
deliver every message of each other, and a member's memory stops growing once
its bounded tables are full.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import Lines, stop_nodes, wait_all
from netns_lab import Lab, rss_bytes

pytestmark = pytest.mark.netns

NODE = str(Path(__file__).with_name("adhoc_node.py"))
FLOOD = str(Path(__file__).with_name("flood.py"))
GROUP, PORT = "239.255.90.20", 47020
SEND = 30
RSS_GROWTH_LIMIT = 24 << 20


def test_members_deliver_everything_under_a_forged_group_flood(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    pids = ["a", "b", "c"]
    nodes = {}
    for pid, host in zip(pids, lab.hosts[:3], strict=True):
        url = f"udp-multicast://{GROUP}:{PORT}?iface={host.address}&ttl=1"
        process = lab.spawn(host, [sys.executable, NODE, "--pid", pid, "--channel", url,
                                   "--trace", str(tmp_path), "--peers", ",".join(pids),
                                   "--send", str(SEND), "--orders", "sb",
                                   "--interval", "0.2"], env=child_env)
        nodes[pid] = (process, Lines(process.stdout), Lines(process.stderr))
    progress = {pid: err for pid, (_, _, err) in nodes.items()}
    flooder = lab.hosts[3]
    flood = None
    samples: list[tuple[float, int]] = []
    sampling = threading.Event()
    try:
        wait_all(progress, lambda pid: f"{pid} sees all members", "the members to meet")
        flood = lab.spawn(flooder, [sys.executable, FLOOD, GROUP, str(PORT), flooder.address,
                                    "--forge-group", "netns-sb"], env=child_env)
        started = time.monotonic()
        victim = nodes["a"][0].pid

        def sample() -> None:
            while not sampling.is_set():
                samples.append((time.monotonic() - started, rss_bytes(victim)))
                sampling.wait(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        wait_all(progress, lambda pid: f"{pid} done", "every member to deliver everything")
        assert flood.poll() is None, "the flood stopped before the members were done"
        flooded_for = time.monotonic() - started
    finally:
        sampling.set()
        if flood is not None and flood.poll() is None:
            flood.terminate()
        results = stop_nodes(nodes)
    flood_out, _ = flood.communicate(timeout=10)
    sent = json.loads(flood_out.decode().strip().splitlines()[-1])["sent"]
    for pid, (status, result) in results.items():
        assert status == 0 and result is not None, (pid, status, result)
        assert result["delivered"] == {"sb": len(pids) * SEND}, result
    warm = [rss for t, rss in samples if t <= flooded_for / 3 and rss]
    late = [rss for t, rss in samples if t > flooded_for / 3 and rss]
    report = (f"flood: {sent} datagrams in {flooded_for:.1f}s; member RSS "
              f"{max(warm) >> 20} MiB after warm-up, peak {max(late) >> 20} MiB; "
              f"stats of a: {results['a'][1]['stats'] if results['a'][1] else None}")
    print(report)
    assert sent > 20_000, report
    assert max(late) - max(warm) <= RSS_GROWTH_LIMIT, report
