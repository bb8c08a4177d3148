"""Packets larger than 508 bytes (M2MPConfig.packet_size, ``packet=`` on a channel URL):
fragmenting at the size a sender names, receiving any size up to MAX_DATAGRAM whatever
the receiver's own, and every byte bound holding when fragments are larger."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import ConfigError
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageAbandoned, MessageReceived
from m2mc.wire.m2mp_types import packet_size_for
from m2mc.wire.packet import (
    HEADER_SIZE,
    LAST_FLAG,
    MAX_DATAGRAM,
    MAX_FRAGMENT,
    MAX_PACKET,
    check_packet_size,
    decode,
    fragment_count,
    fragment_packets,
    fragments,
)
from m2mc.wire.streams import IncomingStreams, OutgoingFragments, StreamLimits

SIZES = st.sampled_from([MAX_PACKET, MAX_PACKET + 1, 1472, 9000, 65_000, MAX_DATAGRAM])


def layer(seed: int = 1, **config: object) -> M2MPLayer:
    return M2MPLayer(M2MPConfig(**config), random.Random(seed))  # type: ignore[arg-type]


def header(message_id: int, word: int) -> bytes:
    return message_id.to_bytes(4, "big") + word.to_bytes(4, "big")


@given(st.integers(0, 0xFFFF_FFFF), st.integers(MAX_PACKET, MAX_DATAGRAM),
       st.integers(0, 3 * 65_536))
@settings(max_examples=60)
def test_a_message_is_cut_into_fragments_of_the_packet_size_less_8(
        message_id: int, packet_size: int, length: int) -> None:
    payload = random.Random(length).randbytes(length)
    wires = fragment_packets(message_id, payload, packet_size)
    step = packet_size - HEADER_SIZE
    q, r = divmod(length, step)
    assert len(wires) == fragment_count(length, packet_size) == max(1, q + (r > 0))
    packets = [decode(w) for w in wires]
    assert all(len(w) == packet_size for w in wires[:-1]) and len(wires[-1]) <= packet_size
    assert [p.fragment for p in packets] == list(range(len(wires)))
    assert [p.last for p in packets] == [False] * (len(wires) - 1) + [True]
    assert {p.message_id for p in packets} == {message_id}
    assert b"".join(p.data for p in packets) == payload
    assert list(fragments(message_id, payload, packet_size)) == wires


def test_the_default_size_cuts_as_before() -> None:
    payload = bytes(range(256)) * 300
    assert fragment_packets(7, payload) == list(fragments(7, payload))
    assert all(len(w) == MAX_PACKET for w in fragment_packets(7, payload)[:-1])
    assert len(fragment_packets(7, payload)) == -(-len(payload) // MAX_FRAGMENT)


@pytest.mark.parametrize("size", [0, 8, 507, MAX_DATAGRAM + 1, 1 << 20, True, 1472.0, "1472"])
def test_a_packet_size_out_of_range_is_a_config_error(size: object) -> None:
    with pytest.raises(ConfigError, match=r"packet size must be an integer in 508\.\.65507"):
        check_packet_size(size)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        layer(packet_size=size)


def test_the_channel_url_or_the_configuration_names_the_size_not_both_differently() -> None:
    assert packet_size_for(MAX_PACKET, MAX_PACKET) == MAX_PACKET
    assert packet_size_for(1472, MAX_PACKET) == 1472
    assert packet_size_for(MAX_PACKET, 9000) == 9000
    assert packet_size_for(9000, 9000) == 9000
    with pytest.raises(ConfigError, match="name it in one place"):
        packet_size_for(1472, 9000)


@given(sender_size=SIZES, receiver_size=SIZES, seed=st.integers(0, 1 << 30),
       lengths=st.lists(st.integers(0, 200_000), min_size=1, max_size=4))
@settings(max_examples=40, deadline=None)
def test_nodes_of_any_two_packet_sizes_understand_each_other(
        sender_size: int, receiver_size: int, seed: int, lengths: list[int]) -> None:
    """In shuffled order, with copies: each node's messages arrive whole at the other."""
    rng = random.Random(seed)
    a = layer(seed, packet_size=sender_size, flow_control=False, redundancy=2)
    b = layer(seed + 1, packet_size=receiver_size, flow_control=False, redundancy=1)
    for node in (a, b):
        node.add_filter(b"")
    for sender, receiver, size in ((a, b, sender_size), (b, a, receiver_size)):
        sent = {}
        for length in lengths:
            payload = rng.randbytes(length)
            sent[sender.send(payload, 0.0)] = payload
        out = sender.datagrams_to_send(0.0)
        assert max(map(len, out)) <= size
        rng.shuffle(out)
        for start in range(0, len(out), 7):  # batches, as a channel hands them over
            receiver.receive_datagrams(out[start:start + 7], 0.0)
        got = {e.message_id: e.payload for e in receiver.events()
               if isinstance(e, MessageReceived)}
        assert got == sent
        assert receiver.stats.malformed == 0


def test_large_packets_mixed_into_a_run_of_small_ones_complete_the_message() -> None:
    """A message whose fragments come in both sizes (no sender does that; an outsider
    may): the run of 508-byte packets ends where a larger one comes, the rest go
    through reassembly, and the message is their bytes in order."""
    receiver = layer(flow_control=False)
    receiver.add_filter(b"")
    parts = [bytes([i]) * (MAX_FRAGMENT if i % 3 else 3000) for i in range(9)]
    datagrams = [header(5, i | (LAST_FLAG if i == 8 else 0)) + part
                 for i, part in enumerate(parts)]
    receiver.receive_datagrams(datagrams, 0.0)
    assert receiver.events() == [MessageReceived(5, b"".join(parts))]


def test_the_largest_packet_is_taken_and_one_byte_more_is_malformed() -> None:
    receiver = layer(flow_control=False)
    receiver.add_filter(b"")
    body = b"z" * (MAX_DATAGRAM - HEADER_SIZE)
    receiver.receive_datagrams([header(1, LAST_FLAG) + body, header(2, LAST_FLAG) + body + b"!"],
                               0.0)
    assert receiver.events() == [MessageReceived(1, body)]
    assert receiver.stats.malformed == 1


def test_a_message_of_large_fragments_past_max_message_bytes_is_abandoned() -> None:
    """The bound on a message counted fragment numbers times 500; with larger fragments
    it counts the bytes held: an outsider cannot hold max_message_bytes x 130."""
    receiver = layer(flow_control=False, max_message_bytes=20_000, max_partial_bytes=1 << 22)
    receiver.add_filter(b"")
    chunk = b"x" * 9000
    datagrams = [header(9, i) + chunk for i in range(10)]
    receiver.receive_datagrams(datagrams, 0.0)
    assert receiver.partial_bytes <= 20_000 + MAX_FRAGMENT
    events = receiver.events()
    assert [(type(e), getattr(e, "reason", None)) for e in events] == [
        (MessageAbandoned, "too_large")]
    assert receiver.stats.abandoned == {"too_large": 1}
    # A message of exactly max_message_bytes in large fragments still arrives.
    honest = layer(seed=3, packet_size=9000, flow_control=False, redundancy=1)
    payload = random.Random(1).randbytes(20_000)
    mid = honest.send(payload, 0.0)
    receiver.receive_datagrams(honest.datagrams_to_send(0.0), 0.0)
    assert receiver.events() == [MessageReceived(mid, payload)]


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 39), st.booleans(),
                          st.integers(0, MAX_DATAGRAM - HEADER_SIZE)), max_size=60),
       st.integers(0, 1 << 30))
@settings(max_examples=60, deadline=None)
def test_hostile_large_fragments_never_pass_a_byte_bound(
        fragments_in: list[tuple[int, int, bool, int]], seed: int) -> None:
    bound_bytes, bound_messages, max_message = 200_000, 4, 100_000
    receiver = layer(flow_control=False, max_partial_bytes=bound_bytes,
                     max_partial_messages=bound_messages, max_message_bytes=max_message,
                     message_timeout=1.0)
    receiver.add_filter(b"")
    rng = random.Random(seed)
    now = 0.0
    for message_id, number, last, size in fragments_in:
        word = number | (LAST_FLAG if last else 0)
        receiver.receive_datagram(header(message_id, word) + rng.randbytes(size), now)
        now += 0.01
        assert receiver.partial_bytes <= bound_bytes
        assert receiver.partial_messages <= bound_messages
        for partial in receiver._reassembler._partial.values():
            assert partial.size <= max_message + MAX_FRAGMENT
        for event in receiver.events():
            if isinstance(event, MessageReceived):
                assert len(event.payload) <= max_message + MAX_FRAGMENT or (
                    len(event.payload) <= MAX_DATAGRAM - HEADER_SIZE)


@given(SIZES, st.lists(st.integers(1, 70_000), min_size=1, max_size=6))
@settings(max_examples=30, deadline=None)
def test_a_message_written_in_pieces_is_cut_as_the_whole_would_be(
        packet_size: int, pieces: list[int]) -> None:
    rng = random.Random(len(pieces))
    data = [rng.randbytes(n) for n in pieces]
    out = OutgoingFragments(3, packet_size - HEADER_SIZE)
    packets = [p for piece in data for p in out.write(piece)]
    packets.append(out.close())
    assert packets == fragment_packets(3, b"".join(data), packet_size)


def test_a_streams_early_large_fragments_are_bounded_in_bytes() -> None:
    """A stream holds at most stream_window early fragments: with fragments of up to
    65,499 bytes that would be 128 times the bytes, so the bytes are bounded too
    (stream_window x 500), and a stream past them is given up (reason ``bound``)."""
    streams = IncomingStreams(StreamLimits(message_timeout=1.0, stream_window=4))
    streams.start(1, {0: b"a" * 10}, -1, 0.0)
    streams.receive(1, 2, False, b"b" * 1000, 0.0)  # early: held (1000 <= 4 x 500)
    assert streams.held_bytes == 1000
    streams.receive(1, 3, False, b"c" * 1001, 0.0)  # would hold 2001 > 2000
    assert streams.held_bytes == 0
    assert [(e.message_id, e.reason) for e in streams.take_abandoned()] == [(1, "bound")]
