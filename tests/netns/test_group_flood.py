"""Group-layer nodes under a full-speed flood of garbage and forged group messages.

Three nodes (three namespaces) share an S_b group; once they see each other, a
fourth namespace floods the group at full speed. The members still deliver every
message of each other, and a member's memory stops growing once its bounded
tables are full.

* Open group: garbage, forged M2MP fragments, and well-formed group messages
  from invented processes (joins, status, sync requests and NACKs that ask the
  members for work, data with absurd sequence numbers, invented groups on the
  discovery channel).
* Keyed group: garbage, sealed messages of every kind under a wrong key
  (claiming the members and invented processes), and the group's own traffic,
  recorded by the flooder before it starts: replayed as is, replayed under fresh
  M2MP message ids (so that they reach the replay windows) and with a flipped
  tag byte. The members count bad tags and replays and change nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from netns_lab import Lab, rss_bytes
from netns_processes import M2MC, Lines, stop_nodes, wait_all, wait_until

pytestmark = pytest.mark.netns

NODE = str(Path(__file__).with_name("adhoc_node.py"))
FLOOD = str(Path(__file__).with_name("flood.py"))
GROUP, PORT = "239.255.90.20", 47020
SEND = 30
RSS_GROWTH_LIMIT = 24 << 20


def run_flood(lab: Lab, child_env: dict[str, str], tmp_path: Path, *, send: int,
              flood_args: list[str], node_args: list[str] | None = None,
              capture: Path | None = None, flood_after: str = "sees all members",
              ) -> tuple[dict[str, Any], int, float, list[tuple[float, int]]]:
    """Members a, b, c in h0-h2 send ``send`` messages each; h3 floods from the moment
    every member printed ``flood_after`` (with ``capture``: it records until then).
    Returns the members' results, datagrams flooded, seconds flooded, RSS samples of a."""
    pids = ["a", "b", "c"]
    nodes = {}
    flooder = lab.hosts[3]
    flood = None
    if capture is not None:  # recording from before the members start
        flood = lab.spawn(flooder, [sys.executable, FLOOD, GROUP, str(PORT), flooder.address,
                                    "--capture-until", str(capture), *flood_args],
                          env=child_env)
        err = Lines(flood.stderr)
        wait_until(err.has("capturing"), "the flooder to listen", 30, err.snapshot)
    for pid, host in zip(pids, lab.hosts[:3], strict=True):
        url = f"udp-multicast://{GROUP}:{PORT}?iface={host.address}&ttl=1"
        process = lab.spawn(host, [sys.executable, NODE, "--pid", pid, "--channel", url,
                                   "--trace", str(tmp_path), "--peers", ",".join(pids),
                                   "--send", str(send), "--orders", "sb",
                                   "--interval", "0.2", *(node_args or [])], env=child_env)
        nodes[pid] = (process, Lines(process.stdout), Lines(process.stderr))
    progress = {pid: err for pid, (_, _, err) in nodes.items()}
    samples: list[tuple[float, int]] = []
    sampling = threading.Event()
    try:
        wait_all(progress, lambda pid: f"{pid} {flood_after}", "the members to get going")
        if capture is not None:
            capture.touch()
        else:
            flood = lab.spawn(flooder, [sys.executable, FLOOD, GROUP, str(PORT),
                                        flooder.address, *flood_args], env=child_env)
        started = time.monotonic()
        victim = nodes["a"][0].pid

        def sample() -> None:
            while not sampling.is_set():
                samples.append((time.monotonic() - started, rss_bytes(victim)))
                sampling.wait(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        wait_all(progress, lambda pid: f"{pid} done", "every member to deliver everything")
        assert flood is not None and flood.poll() is None, "the flood stopped too early"
        flooded_for = time.monotonic() - started
    finally:
        sampling.set()
        if flood is not None and flood.poll() is None:
            flood.terminate()
        results = stop_nodes(nodes)
    assert flood is not None and flood.stdout is not None
    flood.wait(timeout=10)
    sent = json.loads(flood.stdout.read().decode().strip().splitlines()[-1])["sent"]
    for pid, (status, result) in results.items():
        assert status == 0 and result is not None, (pid, status, result)
        assert result["delivered"] == {"sb": len(pids) * send}, result
        assert result["missing"] == {"sb": []}, result
    return {pid: r for pid, (_, r) in results.items()}, sent, flooded_for, samples


def rss_report(samples: list[tuple[float, int]], flooded_for: float) -> tuple[int, int]:
    """Peak RSS in the first third of the flood (warm-up) and after it."""
    warm = [rss for t, rss in samples if t <= flooded_for / 3 and rss]
    late = [rss for t, rss in samples if t > flooded_for / 3 and rss]
    return max(warm), max(late)


def test_members_deliver_everything_under_a_forged_group_flood(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    results, sent, flooded_for, samples = run_flood(
        lab, child_env, tmp_path, send=SEND, flood_args=["--forge-group", "netns-sb"])
    warm, late = rss_report(samples, flooded_for)
    report = (f"flood: {sent} datagrams in {flooded_for:.1f}s; member RSS "
              f"{warm >> 20} MiB after warm-up, peak {late >> 20} MiB; "
              f"stats of a: {results['a']['stats']}")
    print(report)
    assert sent > 20_000, report
    assert late - warm <= RSS_GROWTH_LIMIT, report


def test_keyed_group_members_deliver_everything_under_forged_and_replayed_frames(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    key_file = tmp_path / "group.key"
    key_file.write_text(subprocess.run([*M2MC[:1], "-c", "from m2mc.security import "
                                        "generate_key; print(generate_key())"],
                                       capture_output=True, text=True, check=True,
                                       env=child_env).stdout)
    key_file.chmod(0o600)
    send = 45  # 9 s of sending: the replays outlive M2MP's 5 s memory of message ids
    results, sent, flooded_for, samples = run_flood(
        lab, child_env, tmp_path, send=send,
        flood_args=["--forge-keyed", "netns-sb", "--claim", "a,b,c"],
        node_args=["--key-file", str(key_file)], capture=tmp_path / "go",
        flood_after="sent 4")
    warm, late = rss_report(samples, flooded_for)
    report = (f"keyed flood: {sent} datagrams in {flooded_for:.1f}s; member RSS "
              f"{warm >> 20} MiB after warm-up, peak {late >> 20} MiB; "
              f"stats of a: {results['a']['stats']}; group: {results['a']['groups']['sb']}")
    print(report)
    assert sent > 20_000, report
    assert late - warm <= RSS_GROWTH_LIMIT, report
    for pid, result in results.items():
        group = result["groups"]["sb"]
        assert group["auth_bad_tag"] > 0, (pid, group)  # forged under a wrong key, tampered
        assert group["auth_replayed"] + group["auth_stale"] > 0, (pid, group)  # replays
        assert group["members_refused"] == 0 and result["stats"]["sender_mismatch"] == 0
