"""A full-speed flood of garbage and forged M2MP packets from one namespace.

Legitimate ``m2mc send``/``m2mc listen`` traffic between two other namespaces
still gets through while the flood runs, and the listener's memory stays
bounded: its reassembly tables fill to their configured bound, then stop growing.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from pathlib import Path

import pytest
from netns_lab import Lab, rss_bytes
from netns_processes import M2MC, Lines, wait_until

pytestmark = pytest.mark.netns

GROUP, PORT = "239.255.90.17", 47017
FLOOD = str(Path(__file__).with_name("flood.py"))
MIN_FLOOD_SECONDS = 8.0
DEADLINE = 120.0
RSS_GROWTH_LIMIT = 16 << 20  # after the bounds have filled


def url(address: str) -> str:
    return f"udp-multicast://{GROUP}:{PORT}?iface={address}&ttl=1"


def test_flood_neither_starves_legitimate_traffic_nor_grows_memory(
        lab: Lab, child_env: dict[str, str], tmp_path: Path) -> None:
    receiver, sender, flooder, second = lab.hosts
    config = tmp_path / "m2mc.toml"
    # Small bounds so the tables fill within the first seconds of the flood.
    config.write_text("[m2mp]\nmax_partial_bytes = 2097152\nmax_partial_messages = 1024\n"
                      "completed_cache = 8192\n")
    marker = b"LEGIT-" + tmp_path.name.encode()[-8:]
    listeners = {}
    for host in (receiver, second):
        process = lab.spawn(host, [*M2MC, "listen", "--channel", url(host.address), "--prefix",
                                   marker.hex(), "--config", str(config)], env=child_env)
        listeners[host.index] = (process, Lines(process.stdout), Lines(process.stderr))
    for _, _, err in listeners.values():
        wait_until(err.has("listening"), "the listeners to start")

    rx_before = lab.counter(receiver, "rx_packets")
    flood = lab.spawn(flooder, [sys.executable, FLOOD, GROUP, str(PORT), flooder.address],
                      env=child_env)
    flood_started = time.monotonic()
    wait_until(lambda: lab.counter(receiver, "rx_packets") - rx_before > 20_000,
               "the flood to reach the receiver")

    listener_pid = listeners[receiver.index][0].pid
    samples: list[tuple[float, int]] = []
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            samples.append((time.monotonic() - flood_started, rss_bytes(listener_pid)))
            sampling.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    payloads = [marker + b"-%d-" % i + bytes([65 + i]) * size
                for i, size in enumerate((40, 700, 1400, 3000, 6000))]
    wanted = {hashlib.sha256(p).hexdigest() for p in payloads}
    sends = 0

    def seen(index: int) -> set[str]:
        return {json.loads(line)["sha256"] for line in listeners[index][1].snapshot()} & wanted

    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        missing = [p for p in payloads
                   if hashlib.sha256(p).hexdigest() not in seen(receiver.index)
                   or hashlib.sha256(p).hexdigest() not in seen(second.index)]
        if not missing:
            break
        for payload in missing:
            out = lab.exec(sender, [*M2MC, "send", "--channel", url(sender.address),
                                    "--redundancy", "2"], input=payload, env=child_env)
            assert out.returncode == 0, out.stderr.decode()
            sends += 1
        round_end = time.monotonic() + 3
        while time.monotonic() < round_end and not all(
                seen(i) == wanted for i in listeners):
            time.sleep(0.05)
    delivered_during_flood = flood.poll() is None
    assert seen(receiver.index) == wanted and seen(second.index) == wanted, (
        f"legitimate messages lost under the flood after {sends} sends")
    assert delivered_during_flood

    # Keep flooding long enough to see whether memory keeps growing.
    while time.monotonic() - flood_started < MIN_FLOOD_SECONDS:
        time.sleep(0.1)
    flooded_for = time.monotonic() - flood_started
    sampling.set()
    sampler.join()
    flood.terminate()
    flood_out, _ = flood.communicate(timeout=10)
    flood_stats = json.loads(flood_out.decode().strip().splitlines()[-1])
    rx_flood = lab.counter(receiver, "rx_packets") - rx_before

    for process, _, err in listeners.values():
        assert process.poll() is None, "a listener died under the flood: " + "\n".join(
            err.snapshot()[-5:])

    warm = [rss for t, rss in samples if t <= flooded_for / 3]
    late = [rss for t, rss in samples if t > flooded_for / 3]
    assert warm and late
    growth = max(late) - max(warm)
    report = (f"flood: {flood_stats['sent']} sent, {rx_flood} received by the listener's host "
              f"in {flooded_for:.1f}s; legit: {sends} sends for {len(payloads)} messages; "
              f"listener RSS {max(warm) >> 20} MiB after warm-up, peak {max(late) >> 20} MiB")
    print(report)
    assert flood_stats["sent"] > 50_000, report
    assert growth <= RSS_GROWTH_LIMIT, report
