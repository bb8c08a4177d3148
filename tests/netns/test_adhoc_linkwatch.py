"""The interface watcher on a real kernel (m2mc.transport.linkwatch): a channel in a
lab namespace hears its interface come back after ``ip link set eth0 down``/``up``
and after its address is removed and added again, and receives multicast on it
afterwards (it joined the group again). Nothing at all while the interface stays up."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from netns_lab import Lab
from netns_processes import Lines, wait_until

pytestmark = pytest.mark.netns

PROBE = str(Path(__file__).with_name("linkwatch_probe.py"))
GROUP, PORT = "239.255.90.24", 47024


def test_the_channel_hears_its_interface_come_back(lab: Lab, child_env: dict[str, str]) -> None:
    watched, other = lab.hosts[0], lab.hosts[1]
    url = f"udp-multicast://{GROUP}:{PORT}?iface={watched.address}&ttl=1"
    process = lab.spawn(watched, [sys.executable, PROBE, url], env=child_env)
    out = Lines(process.stdout)
    wait_until(out.has("watching"), "the probe to watch its interface")

    def backs() -> int:
        return sum(line == "back" for line in out.snapshot())

    def ip(*args: str) -> None:
        done = lab.exec(watched, ["ip", *args])
        assert done.returncode == 0, done.stderr

    def say(text: str) -> None:  # from the other host, until the probe hears it
        script = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                  f"s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, "
                  f"socket.inet_aton('{other.address}')); "
                  f"s.sendto(b'{text}', ('{GROUP}', {PORT}))")
        wait_until(lambda: lab.exec(other, [sys.executable, "-c", script]).returncode == 0
                   and out.has(f"got {text}")(), f"the probe to receive {text!r}")

    say("before")
    ip("link", "set", "eth0", "down")
    ip("link", "set", "eth0", "up")
    wait_until(lambda: backs() == 1, "the link to be reported back", detail=out.snapshot)
    say("after the link came back")
    ip("addr", "del", f"{watched.address}/24", "dev", "eth0")
    ip("addr", "add", f"{watched.address}/24", "dev", "eth0")
    wait_until(lambda: backs() == 2, "the address to be reported back", detail=out.snapshot)
    say("after the address came back")
    assert backs() == 2  # nothing said while it stayed up
