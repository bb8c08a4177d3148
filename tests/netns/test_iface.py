"""Interfaces by name on a real network of namespaces (tests/netns/netns_lab.py): every
host's interface is ``eth0``, so ``--iface eth0`` is what a user on a LAN types.

- A sender and ``m2mc listen`` in two namespaces talk over ``iface=eth0``, and keep
  talking after both interfaces changed address under their open channels (a DHCP
  renewal): a name joins and sends by interface index. By address, the same sender
  is cut off by the renewal.
- Two ``m2mc chat`` participants (the README's LAN case: ``m2mc chat --iface eth0`` on
  the default channel) answer each other and end with the same thread tree.
- An interface that is down with no address when the channel opens is accepted with a
  warning, and the listener receives once it is up with an address; ``m2mc send`` on
  it says nothing could be sent (exit 1); ``m2mc host`` refuses it (exit 2), and on a
  ready interface binds its uplink on the interface's address.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from netns_lab import Host, Lab, host_address
from netns_processes import M2MC, Lines, wait_until

pytestmark = pytest.mark.netns

WAIT = 60.0
SENDER = str(Path(__file__).with_name("iface_sender.py"))


def channel(index: int) -> str:
    """A group of this test module only; its iface is loopback until --iface says eth0."""
    return f"udp-multicast://239.255.92.{index}:{47400 + index}?iface=127.0.0.1&ttl=1"


def named(index: int) -> str:
    return channel(index).replace("iface=127.0.0.1", "iface=eth0")


def readdress(lab: Lab, host: Host, address: str) -> None:
    """What a DHCP renewal to another address does: the old address goes, a new one comes."""
    for argv in (["ip", "addr", "flush", "dev", "eth0"],
                 ["ip", "addr", "add", f"{address}/24", "dev", "eth0"]):
        done = lab.exec(host, argv)
        assert done.returncode == 0, done.stderr.decode()
    host.address = address


def send(lab: Lab, host: Host, url: str, payload: bytes,
         env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return lab.exec(host, [*M2MC, "send", "--channel", url], input=payload, env=env)


def test_two_namespaces_talk_over_eth0_by_name_across_an_address_change(
        lab: Lab, child_env: dict[str, str]) -> None:
    h0, h1 = lab.hosts[:2]
    listener = lab.spawn(h1, [*M2MC, "listen", "--channel", channel(1), "--iface", "eth0",
                              "--count", "2", "--timeout", str(WAIT)], env=child_env)
    out, err = Lines(listener.stdout), Lines(listener.stderr)
    wait_until(err.has(f"listening on {named(1)}"), "the listener", WAIT, err.snapshot)
    sender = Sender(lab, h0, named(1), child_env)
    rx_before = lab.counter(h1, "rx_packets")
    first = sender.send("before the renewal")
    wait_until(lambda: len(out.snapshot()) == 1, "the first message", WAIT, err.snapshot)
    assert lab.counter(h1, "rx_packets") > rx_before  # it came in by eth0

    readdress(lab, h0, host_address(40))  # both ends, while their channels stay open
    readdress(lab, h1, host_address(41))
    second = sender.send("after the renewal")
    assert second["send_errors"] == 0, second
    assert listener.wait(timeout=WAIT) == 0, err.snapshot()
    rows = [json.loads(line) for line in out.closed()]
    assert [bytes.fromhex(r["head"]) for r in rows] == [b"before the renewal"[:16],
                                                       b"after the renewal"[:16]]
    assert [r["id"] for r in rows] == [first["id"], second["id"]]
    assert not [line for line in err.snapshot() if "WARNING" in line]


def test_by_address_a_renewal_would_cut_the_sender_off(lab: Lab,
                                                       child_env: dict[str, str]) -> None:
    """Why names join by index: a socket that sends by the interface's *address* (what a
    name means where ip_mreqn is missing, and what iface=ADDRESS always means) fails
    once that address is gone."""
    h0 = lab.hosts[0]
    sender = Sender(lab, h0, named(5), child_env, "--by-address")
    assert sender.send("before")["send_errors"] == 0
    readdress(lab, h0, host_address(42))
    after = sender.send("after")
    assert after["send_errors"] > 0 and after["datagrams_out"] == sender.first_out


class Sender:
    """tests/netns/iface_sender.py in a namespace: one channel, a message per call."""

    def __init__(self, lab: Lab, host: Host, url: str, env: dict[str, str],
                 *flags: str) -> None:
        self.process = lab.spawn(host, [sys.executable, SENDER, url, *flags], env=env,
                                 stdin=subprocess.PIPE)
        self.out, self.err = Lines(self.process.stdout), Lines(self.process.stderr)
        wait_until(self.out.has("ready"), "the sender", WAIT, self.err.snapshot)
        self.first_out = -1

    def send(self, text: str) -> dict[str, int]:
        stdin = self.process.stdin
        assert stdin is not None
        count = len(self.out.snapshot())
        stdin.write(text.encode() + b"\n")
        stdin.flush()
        wait_until(lambda: len(self.out.snapshot()) > count, f"{text!r} to be sent", WAIT,
                   self.err.snapshot)
        row: dict[str, int] = json.loads(self.out.snapshot()[count])
        if self.first_out < 0:
            self.first_out = row["datagrams_out"]
        return row


def test_two_chats_on_the_lan_with_iface_eth0(lab: Lab, child_env: dict[str, str],
                                              tmp_path: Path) -> None:
    scripts = {
        "alice": "create lunch\nwait_members 2\nsend Where shall we eat?\nwait_for 2\nleave\n",
        "bob": "join lunch\nwait_for 1\nreply 1 Pizza?\nwait_for 2\nleave\n",
    }
    chats = {}
    for host, (nick, steps) in zip(lab.hosts[:2], scripts.items(), strict=True):
        (tmp_path / f"{nick}.txt").write_text(steps)
        chats[nick] = lab.spawn(host, [
            *M2MC, "chat", "--iface", "eth0", "--nick", nick, "--device-id", nick,
            "--data-dir", str(tmp_path / nick), "--script", str(tmp_path / f"{nick}.txt"),
            "--transcript", str(tmp_path / f"{nick}.json"), "--step-timeout", str(WAIT)],
            env=child_env)
    for nick, chat in chats.items():
        _, err = chat.communicate(timeout=2 * WAIT)
        assert chat.returncode == 0, (nick, err.decode()[-2000:])
    trees = [json.loads((tmp_path / f"{nick}.json").read_text())["tree"] for nick in chats]
    assert trees[0] == trees[1]
    [question] = trees[0]
    assert (question["author"], question["text"]) == ("alice", "Where shall we eat?")
    assert [(c["author"], c["text"]) for c in question["children"]] == [("bob", "Pizza?")]
    # the first run remembers the channel --iface made, as it would a --channel
    saved = (tmp_path / "alice" / "chat.toml").read_text()
    assert 'channel = "udp-multicast://239.255.77.77:7777?iface=eth0&ttl=1"' in saved


def test_an_interface_not_ready_yet_is_waited_for(lab: Lab, child_env: dict[str, str]) -> None:
    h0, h2, h3 = lab.hosts[0], lab.hosts[2], lab.hosts[3]
    for host in (h2, h3):
        for argv in (["ip", "addr", "flush", "dev", "eth0"],
                     ["ip", "link", "set", "eth0", "down"]):
            assert lab.exec(host, argv).returncode == 0

    listener = lab.spawn(h2, [*M2MC, "listen", "--channel", named(2), "--count", "1",
                              "--timeout", str(3 * WAIT)], env=child_env)
    out, err = Lines(listener.stdout), Lines(listener.stderr)
    wait_until(err.has("listening on"), "the listener", WAIT, err.snapshot)
    assert err.has("interface eth0 is down: nothing is sent or received on")()

    refused = send(lab, h3, named(2), b"into the void", child_env)
    assert refused.returncode == 1
    assert "refused all 2 datagrams" in refused.stderr.decode()
    host = lab.exec(h3, [*M2MC, "host", "--listen", "127.0.0.1:47501", "--cell", channel(3),
                         "--iface", "eth0", "--run-for", "1"], env=child_env)
    assert host.returncode == 2
    [line] = host.stderr.decode().splitlines()
    assert line == ("m2mc host: error: interface eth0 is down; infrastructure mode needs its "
                    "address (connect it, or give iface=ADDRESS)")

    # The interface comes up and gets its address: the same listener now receives.
    assert lab.exec(h2, ["ip", "link", "set", "eth0", "up"]).returncode == 0
    assert lab.exec(h2, ["ip", "addr", "add", f"{h2.address}/24", "dev", "eth0"]).returncode == 0
    deadline = time.monotonic() + WAIT
    while listener.poll() is None and time.monotonic() < deadline:  # until the link is up
        assert send(lab, h0, named(2), b"hello again", child_env).returncode == 0
        with contextlib.suppress(subprocess.TimeoutExpired):
            listener.wait(timeout=1)
    assert listener.wait(timeout=WAIT) == 0, err.snapshot()
    [row] = [json.loads(line) for line in out.closed()]
    assert bytes.fromhex(row["head"]) == b"hello again"


def test_host_with_iface_eth0_binds_its_uplink_on_the_interface_address(
        lab: Lab, child_env: dict[str, str]) -> None:
    h0 = lab.hosts[0]
    host = lab.spawn(h0, [*M2MC, "host", "--listen", f"{h0.address}:47502", "--cell",
                          channel(4), "--iface", "eth0", "--run-for", "1"], env=child_env)
    _, err = host.communicate(timeout=WAIT)
    assert host.returncode == 0, err.decode()
    up = next(line for line in err.decode().splitlines() if " up, " in line)
    assert f"cell {named(4)}, uplink {h0.address}:" in up
