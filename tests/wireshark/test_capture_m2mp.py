"""Plain M2MP in a real run: ``m2mc send`` to ``m2mc listen`` across two namespaces,
captured on the switch and decoded by tshark with the dissector.

A one-packet and a ten-packet message: every datagram is an M2MP packet with no fault;
the message ids, lengths and SHA-256 the dissector reassembles are the ones send and
listen printed; each packet went out twice (redundancy 2). The sender's kernel joins
runs of full packets (UDP segmentation offload) and the bridge forwards them joined,
so a frame may hold several packets: the dissector takes them apart.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
from capture import M2MC, Capture, Child, child_env, wait_until
from dissection import dissect, needs_dumpcap, needs_tshark, undecoded_frames
from netns_lab import Lab

pytestmark = [pytest.mark.netns, pytest.mark.slow, needs_tshark, needs_dumpcap]

GROUP, PORT = "239.255.93.1", 47611  # a port no other dissector claims


def test_send_and_listen_captured_and_decoded(lab: Lab, tmp_path: Path) -> None:
    env = child_env(tmp_path)
    sender, receiver = lab.hosts[0], lab.hosts[1]

    def url(address: str) -> str:
        return f"udp-multicast://{GROUP}:{PORT}?iface={address}&ttl=1"

    payloads = [b"one packet " * 9, bytes(range(256)) * 19 + b"tail"]  # 99 and 4868 bytes
    pcap = tmp_path / "m2mp.pcapng"
    sent = []
    with Capture(lab, pcap) as capture:
        listen = Child(lab, receiver, [*M2MC, "listen", "--channel", url(receiver.address),
                                       "--count", str(len(payloads)), "--timeout", "30"], env)
        wait_until(listen.err.has("listening on"), "listen to join", 30, listen.err.snapshot)
        for payload in payloads:
            done = lab.exec(sender, [*M2MC, "send", "--channel", url(sender.address)],
                            input=payload, env=env)
            assert done.returncode == 0, done.stderr
            sent.append(json.loads(done.stdout))
        assert listen.finish() == 0, listen.err.snapshot()
    assert capture.stats.get("dropped") == 0, capture.stats
    heard = [json.loads(line) for line in listen.out.snapshot()]
    assert [m["id"] for m in heard] == [m["id"] for m in sent]

    packets = dissect(pcap, options=[f"m2mp.udp_ports:{PORT}"])
    assert [(p.number, p.problems) for p in packets if p.problems] == []
    assert undecoded_frames(packets) == []
    copies: Counter[tuple[int, int]] = Counter()
    messages = {}
    for p in packets:
        for m2mp in p.protos("m2mp"):
            msgid = int(m2mp.value("m2mp.msgid") or "", 16)
            copies[msgid, int(m2mp.value("m2mp.fragment") or -1)] += 1
            if m2mp.value("m2mp.message_len") and not m2mp.first("m2mp.copy_of"):
                whole = m2mp.first("m2mp.message") or m2mp.first("m2mp.payload")
                assert whole is not None
                messages[msgid] = bytes.fromhex(whole.value_hex)
    for info, payload in zip(sent, payloads, strict=True):
        assert hashlib.sha256(messages[info["id"]]).hexdigest() == info["sha256"]
        assert len(messages[info["id"]]) == info["len"] == len(payload)
        fragments = -(-len(payload) // 500)
        assert [copies[info["id"], f] for f in range(fragments)] == [2] * fragments
    assert sum(copies.values()) == 2 * (1 + 10)
    assert len(packets) <= 2 * (1 + 10)
    print(json.dumps({"frames": len(packets), "packets": sum(copies.values()),
                      "messages": {m["id"]: m["len"] for m in sent}}))
