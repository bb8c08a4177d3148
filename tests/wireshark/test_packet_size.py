"""m2mc.lua and packets larger than 508 bytes (``packet=``, docs/m2mp.md): a packet of
up to 65,507 bytes is one packet, reassembled with the others of its message; a frame
of 508-byte packets joined by the sender's kernel is still taken apart."""

from __future__ import annotations

import random
from pathlib import Path

from dissection import dissect, info_columns, needs_tshark
from pcapgen import PcapWriter

from m2mc.group import codec
from m2mc.wire.packet import MAX_DATAGRAM, fragments

pytestmark = needs_tshark

SENDER = ("10.77.0.1", 40001)
CELL = ("239.255.77.1", 47017)
OPTIONS = ["m2mp.udp_ports:47017"]


def test_large_packets_decode_and_reassemble(tmp_path: Path) -> None:
    rng = random.Random(3)
    at_1472 = rng.randbytes(4000)  # 1464 + 1464 + 1072
    at_max = rng.randbytes(150_000)  # 65,499 + 65,499 + 19,002
    group = codec.encode(codec.group_tag("g1"), codec.Leave("alice" * 300, 1))  # > 1464 bytes
    zeros = bytes(3000)  # zeros where a joined frame's next header would be: still one packet
    path = tmp_path / "large.pcap"
    with PcapWriter(path) as pcap:
        small = [pcap.udp(SENDER, CELL, bytes(p)) for p in fragments(0x1472, at_1472, 1472)]
        large = [pcap.udp(SENDER, CELL, bytes(p))
                 for p in fragments(0xFFFF, at_max, MAX_DATAGRAM)]
        [heuristic] = [pcap.udp(SENDER, ("239.255.9.9", 41000), bytes(p))
                       for p in fragments(0x6, group, 9000)]
        [zero] = [pcap.udp(SENDER, CELL, bytes(p)) for p in fragments(0x2E, zeros, 9000)]
    frames = {p.number: p for p in dissect(path, options=OPTIONS)}
    assert [(n, p.problems) for n, p in frames.items() if p.problems] == []
    for numbers, payload in ((small, at_1472), (large, at_max)):
        [(done, _)] = frames[numbers[-1]].m2mp_packets()
        assert done.value("m2mp.message_len") == str(len(payload))
        assert done.value("m2mp.fragments") == "3"
        whole = done.first("m2mp.message")
        assert whole is not None and bytes.fromhex(whole.value_hex) == payload
        for number in numbers[:-1]:
            [(part, _)] = frames[number].m2mp_packets()
            assert part.value("m2mp.reassembled_in") == str(numbers[-1])
    [(_, decoded)] = frames[heuristic].m2mp_packets()  # found by the group heuristic
    assert [p.name for p in decoded] == ["m2mc"]
    assert decoded[0].value("m2mc.kind") == str(int(codec.Kind.LEAVE))
    [(one, _)] = frames[zero].m2mp_packets()
    assert one.value("m2mp.message_len") == "3000"
    info = info_columns(path, options=OPTIONS)
    assert not any(info[n].startswith("[") for n in [*small, *large, heuristic, zero])



def test_a_joined_frame_of_two_messages_is_still_taken_apart(tmp_path: Path) -> None:
    """Redundancy 1: a message of exactly 500 bytes (one full, last packet) joined with
    the next message's first packets: the header at byte 508 starts another message."""
    first = [bytes(p) for p in fragments(0xA, b"a" * 500)]
    second = [bytes(p) for p in fragments(0xB, b"b" * 1200)]
    path = tmp_path / "joined.pcap"
    with PcapWriter(path) as pcap:
        joined = pcap.udp(SENDER, CELL, b"".join(first + second))
    frames = {p.number: p for p in dissect(path, options=OPTIONS)}
    got = [(m.value("m2mp.msgid"), m.value("m2mp.fragment"))
           for m, _ in frames[joined].m2mp_packets()]
    assert got == [("0x0000000a", "0"), ("0x0000000b", "0"), ("0x0000000b", "1"),
                   ("0x0000000b", "2")]
    assert info_columns(path, options=OPTIONS)[joined].startswith("[4 packets, segmented]")


def test_a_joined_frame_of_larger_packets_is_cut_at_their_size(tmp_path: Path) -> None:
    """A sender at packet=1472 joins its full packets as one at 508 does (offload.py):
    the dissector finds the size from the second packet's header, with copies
    (redundancy 2) or without."""
    rng = random.Random(5)
    payload = rng.randbytes(5000)  # 1464 x 3 + 608
    packets = [bytes(p) for p in fragments(0xC0DE, payload, 1472)]
    path = tmp_path / "joined1472.pcap"
    with PcapWriter(path) as pcap:
        # redundancy 2, joined as the channel joins (the full packets and the one
        # after them): the last packet's second copy goes alone
        run = [p for p in packets for _ in range(2)]
        twice = pcap.udp(SENDER, CELL, b"".join(run[:7]))
        pcap.udp(SENDER, CELL, run[7])
        once = pcap.udp(SENDER, ("239.255.77.1", 47017), b"".join(packets[:3]))
    frames = {p.number: p for p in dissect(path, options=OPTIONS)}
    assert [(n, p.problems) for n, p in frames.items() if p.problems] == []
    got = [(m.value("m2mp.fragment"), bool(m.first("m2mp.copy_of")))
           for m, _ in frames[twice].m2mp_packets()]
    assert got == [(str(f), copy) for f in range(4) for copy in (False, True)][:7]
    done = frames[twice].m2mp_packets()[6][0]
    whole = done.first("m2mp.message")
    assert whole is not None and bytes.fromhex(whole.value_hex) == payload
    assert [m.value("m2mp.fragment") for m, _ in frames[once].m2mp_packets()] == ["0", "1", "2"]
    info = info_columns(path, options=OPTIONS)
    assert info[twice].startswith("[7 packets, segmented]")
