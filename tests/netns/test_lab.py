"""The lab itself: it skips cleanly where it cannot run, and its faults do what they say."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from netns_lab import Host, Lab, LabUnavailable
from netns_processes import Lines, wait_until

pytestmark = pytest.mark.netns

PROBE = str(Path(__file__).with_name("probe.py"))
GROUP, PORT = "239.255.90.18", 47018
needs_nft = pytest.mark.skipif(shutil.which("nft") is None,
                               reason="nftables is not installed (apt-get install nftables)")


def test_without_root_the_lab_is_unavailable_with_a_clear_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    lab = Lab()
    with pytest.raises(LabUnavailable, match="needs root"):
        lab.create()
    assert lab.hosts == []


def test_hosts_reach_each_other_and_have_no_way_out(lab: Lab) -> None:
    for host in lab.hosts:
        routes = lab.exec(host, ["ip", "route", "show"]).stdout.decode()
        assert "default" not in routes and "via" not in routes, routes
    counts = exchange(lab, lab.hosts[0], lab.hosts[1:], 200)
    assert counts == {h.index: 200 for h in lab.hosts[1:]}


@needs_nft
def test_loss_drops_about_the_share_asked_towards_the_hosts_asked(lab: Lab) -> None:
    h0, h1, h2, h3 = lab.hosts
    lab.set_loss(30, towards=[h1, h2])
    counts = exchange(lab, h0, [h1, h2, h3], 400)
    # Binomial(400, 0.7): mean 280, standard deviation 9; these bounds are > 8 sd away.
    assert 200 < counts[h1.index] < 360 and 200 < counts[h2.index] < 360, counts
    assert counts[h3.index] == 400
    lab.heal()
    assert exchange(lab, h0, [h1, h2], 100) == {h1.index: 100, h2.index: 100}


@needs_nft
def test_partition_then_heal(lab: Lab) -> None:
    h0, h1, h2, h3 = lab.hosts
    lab.partition([h0, h1], [h2, h3])
    counts = exchange(lab, h0, [h1, h2, h3], 300, sync=h1)
    assert counts == {h1.index: 300, h2.index: 0, h3.index: 0}
    counts = exchange(lab, h3, [h2, h0], 300, sync=h2)
    assert counts == {h2.index: 300, h0.index: 0}
    lab.heal()
    assert exchange(lab, h0, [h2, h3], 300) == {h2.index: 300, h3.index: 300}


def exchange(lab: Lab, sender: Host, receivers: list[Host], count: int,
             sync: Host | None = None) -> dict[int, int]:
    """Datagrams each receiver got of ``count`` multicast by ``sender``.

    A receiver reports when the sender's END marker reaches it. Receivers cut off
    by a partition never see it: they are asked once ``sync`` (on the sender's
    side) has seen it, since by then the frames they would have got are past.
    """
    probes = {}
    for host in receivers:
        process = lab.spawn(host, [sys.executable, PROBE, "recv", GROUP, str(PORT),
                                   host.address])
        probes[host.index] = (process, Lines(process.stdout))
    for _, lines in probes.values():
        wait_until(lines.has("ready"), "a probe to start")
    sent = lab.exec(sender, [sys.executable, PROBE, "send", GROUP, str(PORT), sender.address,
                             str(count)])
    assert sent.returncode == 0, sent.stderr.decode()
    waiting_for = [sync.index] if sync is not None else list(probes)
    for index in waiting_for:
        wait_until(probes[index][1].has('"end"'), "the END marker")
    counts = {}
    for index, (process, lines) in probes.items():
        ended = [line for line in lines.snapshot() if '"end"' in line]
        if ended:
            counts[index] = json.loads(ended[0])["data"]
            process.kill()
        else:
            process.terminate()
            process.wait(timeout=10)
            counts[index] = json.loads(lines.closed()[-1])["data"]
    return counts


def test_stale_labs_of_dead_processes_are_removed() -> None:
    if shutil.which("ip") is None:
        pytest.skip("iproute2 is not installed")
    lab = Lab(size=1, name="m2mclab999999999xdead")
    try:
        lab.create()
    except LabUnavailable as exc:
        pytest.skip(str(exc))
    # create() only cleans labs of dead pids: this one's "pid" does not exist, so a second
    # lab's creation removes it.
    other = Lab(size=1)
    try:
        other.create()
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                 check=False).stdout
        assert "m2mclab999999999xdead" not in listing
    finally:
        other.destroy()
        lab.destroy()


GSO_SEND = """
import socket, sys
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(sys.argv[1]))
sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
sock.setsockopt(socket.IPPROTO_UDP, 103, 508)  # UDP_SEGMENT: the kernel cuts 508-byte datagrams
sock.sendto(bytes(508 * 10), (sys.argv[2], int(sys.argv[3])))
"""


@needs_nft
@pytest.mark.parametrize("one_frame", [True, False])
def test_the_bridge_counts_udp_frames_and_can_cut_gso_runs_into_datagrams(
        one_frame: bool) -> None:
    lab = Lab(size=2, one_frame_per_datagram=one_frame)
    try:
        lab.create()
    except LabUnavailable as exc:
        lab.destroy()
        pytest.skip(f"network namespace tests skipped: {exc}")
    try:
        lab.count_udp()
        sender = lab.exec(lab.hosts[0], [sys.executable, "-c", GSO_SEND, lab.hosts[0].address,
                                         GROUP, str(PORT)])
        assert sender.returncode == 0, sender.stderr
        counters = lab.udp_counters()
    finally:
        lab.destroy()
    frames, size = counters["sent"]
    # ten datagrams of 508 bytes (536 with the IP and UDP headers), or one run of them
    assert (frames, size) == ((10, 5360) if one_frame else (1, 5080 + 28)), counters
    assert counters["delivered"] == counters["sent"]  # one receiving port, no loss
