"""The M2MP packet is bit-exact to docs/interfaces.md §1 / seeds/002 section 5."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import DecodeError
from m2mc.wire.packet import (
    MAX_DATA,
    MAX_DATAGRAM,
    MAX_FRAGMENT,
    MAX_FRAGMENT_NUMBER,
    MAX_PACKET,
    Packet,
    decode,
    encode,
    fragment_count,
    fragment_list,
    fragments,
)

packets = st.builds(
    Packet,
    message_id=st.integers(0, 0xFFFF_FFFF),
    fragment=st.integers(0, MAX_FRAGMENT_NUMBER),
    last=st.booleans(),
    data=st.binary(max_size=MAX_FRAGMENT),
)


def test_layout_is_big_endian_id_then_last_flag_and_fragment_number() -> None:
    wire = encode(Packet(0x01020304, 5, True, b"ab"))
    assert wire == bytes([1, 2, 3, 4, 0x80, 0, 0, 5]) + b"ab"
    wire = encode(Packet(0xFFFF_FFFF, MAX_FRAGMENT_NUMBER, False, b""))
    assert wire == b"\xff\xff\xff\xff\x7f\xff\xff\xff"


def test_decode_reads_the_same_fields() -> None:
    assert decode(bytes([0, 0, 0, 9, 0x80, 0, 1, 0]) + b"xyz") == Packet(9, 256, True, b"xyz")
    assert decode(bytes([0, 0, 0, 9, 0, 0, 0, 0])) == Packet(9, 0, False, b"")


@settings(deadline=None)  # shared 2-core CI machines: no per-example deadline
@given(packets)
def test_encode_decode_round_trip(packet: Packet) -> None:
    wire = encode(packet)
    assert 8 <= len(wire) <= MAX_PACKET
    assert decode(wire) == packet


@settings(deadline=None)  # shared 2-core CI machines: no per-example deadline
@given(st.binary(min_size=8, max_size=MAX_PACKET))
def test_every_datagram_of_legal_size_decodes_and_re_encodes_identically(wire: bytes) -> None:
    assert encode(decode(wire)) == wire


@pytest.mark.parametrize("size", [0, 1, 7, MAX_DATAGRAM + 1, 70_000])
def test_datagrams_of_illegal_size_raise_decode_error(size: int) -> None:
    with pytest.raises(DecodeError):
        decode(bytes(size))


@pytest.mark.parametrize("packet", [
    Packet(-1, 0, True, b""), Packet(1 << 32, 0, True, b""),
    Packet(0, MAX_FRAGMENT_NUMBER + 1, True, b""), Packet(0, 0, True, bytes(MAX_DATA + 1)),
])
def test_encode_refuses_fields_out_of_range(packet: Packet) -> None:
    with pytest.raises(ValueError):
        encode(packet)


@pytest.mark.parametrize(("size", "count"), [
    (0, 1), (1, 1), (499, 1), (500, 1), (501, 2), (1000, 2), (1001, 3), (65536, 132),
])
def test_fragment_count_is_q_plus_one_if_remainder(size: int, count: int) -> None:
    assert fragment_count(size) == count


@settings(deadline=None)  # shared 2-core CI machines: no per-example deadline
@given(st.integers(0, 0xFFFF_FFFF), st.binary(max_size=5 * MAX_FRAGMENT + 3))
def test_fragments_split_as_the_seed_says(message_id: int, payload: bytes) -> None:
    wires = list(fragments(message_id, payload))
    decoded = [decode(w) for w in wires]
    q, r = divmod(len(payload), MAX_FRAGMENT)
    assert len(wires) == max(1, q + (r > 0))
    assert all(len(w) <= MAX_PACKET for w in wires)
    assert [p.fragment for p in decoded] == list(range(len(wires)))
    assert [p.last for p in decoded] == [False] * (len(wires) - 1) + [True]
    assert all(p.message_id == message_id for p in decoded)
    assert all(len(p.data) == MAX_FRAGMENT for p in decoded[:q])
    assert b"".join(p.data for p in decoded) == payload


@settings(deadline=None, max_examples=200)
@given(st.integers(0, 0xFFFF_FFFF), st.integers(0, 200 * MAX_FRAGMENT + 3), st.randoms())
def test_a_large_message_is_the_packets_each_fragment_encodes_to(
        message_id: int, size: int, rng: random.Random) -> None:
    # (fragment_list takes 64 fragments' data per struct call: sizes across its runs)
    payload = rng.randbytes(size)
    count = fragment_count(size)
    expected = [encode(Packet(message_id, i, i == count - 1,
                              payload[i * MAX_FRAGMENT:(i + 1) * MAX_FRAGMENT]))
                for i in range(count)]
    assert fragment_list(message_id, payload) == expected == list(fragments(message_id, payload))


def test_empty_message_is_one_packet_with_last_flag() -> None:
    assert list(fragments(7, b"")) == [encode(Packet(7, 0, True, b""))]
