"""Bad input never breaks the dissector: thousands of mutated samples (every group kind,
plain and sealed, every infrastructure frame over UDP and on a backbone stream, with
M2MP headers of any shape) come out as decoded or flagged packets, never as a Lua
error or a fault of the script (which it would report as "m2mc dissector fault")."""

from __future__ import annotations

import random
from pathlib import Path

from dissection import dissect, needs_tshark
from pcapgen import PcapWriter
from samples import group_bodies, infra_messages

from m2mc.group import codec
from m2mc.group.groupwire import seal_frame
from m2mc.infra import codec as infra_codec
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
from m2mc.security.auth import AuthConfig, GroupAuth
from m2mc.wire.packet import fragments

pytestmark = needs_tshark

M2MP_PORT, CELL_PORT, BACKBONE_PORT = 47561, 47562, 47563
KEY = bytes(range(32))


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        at = rng.randrange(len(out) + 1)
        if choice < 0.4 and out:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        elif choice < 0.6:
            del out[at:at + rng.randint(1, 16)]
        elif choice < 0.8:
            out[at:at] = rng.randbytes(rng.randint(1, 8))
        else:  # a msgpack header that claims a lot
            out[at:at] = bytes([rng.choice([0xdc, 0xdd, 0xde, 0xdf, 0xc6, 0xdb, 0xcf])]) + (
                b"\xff" * rng.randint(1, 4))
    return bytes(out)


def test_mutated_messages_are_flagged_never_a_script_fault(tmp_path: Path) -> None:
    rng = random.Random(2024)
    tag = codec.group_tag("fuzz")
    frames = []
    for _, body in group_bodies():
        plain = codec.encode(tag, body)
        frames += [plain, seal_frame(GroupAuth("fuzz", KEY, "alice",
                                               config=AuthConfig(suite="hmac-sha256")), plain)]
    infra = []
    for _, msg in infra_messages():
        infra += [infra_codec.encode(msg), InfraWire(GroupAuth(
            INFRA_KEY_CONTEXT, KEY, "H1", config=AuthConfig(suite="hmac-sha256"))).encode(msg)]
    path = tmp_path / "fuzz.pcap"
    src, m2mp_dst = ("10.77.0.9", 40009), ("239.255.77.9", M2MP_PORT)
    with PcapWriter(path) as pcap:
        for _ in range(30):
            for frame in frames:
                message = mutate(frame, rng) if rng.random() < 0.9 else frame
                for packet in fragments(rng.getrandbits(32), message):
                    packet = bytes(packet)
                    if rng.random() < 0.1:
                        packet = mutate(packet[:8], rng) + packet[8:]  # the M2MP header too
                    pcap.udp(src, m2mp_dst, packet)
        for _ in range(20):
            for frame in infra:
                pcap.udp(src, ("10.77.0.8", CELL_PORT), mutate(frame, rng))
        stream = pcap.tcp_stream(src, ("10.77.0.8", BACKBONE_PORT))
        data = bytearray(b"\x00\x00\x00\x02H1")
        for frame in infra * 5:
            bad = mutate(frame, rng)
            size = len(bad) if rng.random() < 0.97 else rng.randrange(1 << 16)
            data += size.to_bytes(4, "big") + bad
        stream.send(bytes(data), segment=700)
    packets = dissect(path, options=[f"m2mp.udp_ports:{M2MP_PORT}",
                                     f"m2mc_infra.udp_ports:{CELL_PORT}",
                                     f"m2mc_backbone.tcp_ports:{BACKBONE_PORT}"])
    faults = [(p.number, f.showname) for p in packets for f in p.tree.walk()
              if f.name == "_ws.lua.error" or "dissector fault" in f.showname]
    assert faults == []
    flagged = sum(1 for p in packets if p.problems)
    decoded = sum(1 for p in packets if p.protos("m2mc") or p.protos("m2mc_infra"))
    print(f"{len(packets)} packets, {flagged} flagged malformed, {decoded} decoded")
    assert len(packets) > 2000 and flagged > 1000 and decoded > 1000
