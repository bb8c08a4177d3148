"""Reassembly: any order, duplicates, many senders, missing fragments, timeouts, bounds."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.wire.packet import MAX_FRAGMENT, Packet, decode, fragments
from m2mc.wire.reassembly import Reassembler, ReassemblyLimits


def packets_of(message_id: int, payload: bytes) -> list[Packet]:
    return [decode(w) for w in fragments(message_id, payload)]


def feed(reassembler: Reassembler, packets: list[Packet], now: float = 0.0) -> list[bytes]:
    out = []
    for packet in packets:
        message = reassembler.receive(packet, now)
        if message is not None:
            out.append(message)
    return out


messages = st.dictionaries(st.integers(0, 0xFFFF_FFFF), st.binary(max_size=4 * MAX_FRAGMENT + 7),
                           min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(messages, st.integers(1, 3), st.randoms(use_true_random=False))
def test_interleaved_senders_with_duplicates_deliver_each_message_once(
        sent: dict[int, bytes], copies: int, rng: random.Random) -> None:
    stream = [p for mid, payload in sent.items() for p in packets_of(mid, payload)] * copies
    rng.shuffle(stream)
    reassembler = Reassembler()
    delivered = feed(reassembler, stream)
    assert sorted(delivered) == sorted(sent.values())
    assert reassembler.partial_messages == 0 and reassembler.partial_bytes == 0
    total = sum(len(packets_of(mid, p)) for mid, p in sent.items())
    assert reassembler.duplicates == total * (copies - 1)
    assert reassembler.take_abandoned() == []


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=MAX_FRAGMENT + 1, max_size=6 * MAX_FRAGMENT), st.data())
def test_a_missing_fragment_means_no_delivery_then_timeout(payload: bytes,
                                                           data: st.DataObject) -> None:
    packets = packets_of(42, payload)
    missing = data.draw(st.integers(0, len(packets) - 1))
    reassembler = Reassembler(ReassemblyLimits(message_timeout=5.0))
    assert feed(reassembler, packets[:missing] + packets[missing + 1:], now=1.0) == []
    assert reassembler.partial_messages == 1
    assert reassembler.next_deadline() == 6.0
    reassembler.on_timer(5.99)
    assert reassembler.take_abandoned() == []
    reassembler.on_timer(6.0)
    [abandoned] = reassembler.take_abandoned()
    assert (abandoned.message_id, abandoned.reason) == (42, "timeout")
    assert abandoned.fragments == len(packets) - 1
    assert abandoned.bytes == len(payload) - len(packets[missing].data)
    assert abandoned.head == (packets[0].data if missing != 0 else b"")
    assert reassembler.partial_messages == 0 and reassembler.partial_bytes == 0
    assert reassembler.next_deadline() is None


def test_timer_restarts_on_every_fragment() -> None:
    packets = packets_of(1, bytes(3 * MAX_FRAGMENT))
    reassembler = Reassembler(ReassemblyLimits(message_timeout=1.0))
    delivered = []
    for index, packet in enumerate(packets):  # 0.9 s apart: 1.8 s overall > the timeout
        now = index * 0.9
        reassembler.on_timer(now)
        message = reassembler.receive(packet, now)
        if message is not None:
            delivered.append(message)
    assert delivered == [bytes(3 * MAX_FRAGMENT)]
    assert reassembler.take_abandoned() == []


def test_a_late_next_fragment_abandons_the_message_and_later_ones_do_not_revive_it() -> None:
    packets = packets_of(1, bytes(3 * MAX_FRAGMENT))
    reassembler = Reassembler(ReassemblyLimits(message_timeout=1.0))
    reassembler.receive(packets[0], 0.0)
    reassembler.on_timer(1.5)
    assert [a.reason for a in reassembler.take_abandoned()] == ["timeout"]
    assert feed(reassembler, packets[1:], now=1.6) == []  # no fragment 0: never completes
    reassembler.on_timer(10.0)
    assert [a.head for a in reassembler.take_abandoned()] == [b""]


def test_redundant_copies_after_completion_are_duplicates_not_new_messages() -> None:
    reassembler = Reassembler(ReassemblyLimits(message_timeout=1.0))
    [packet] = packets_of(5, b"hi")
    assert reassembler.receive(packet, 0.0) == b"hi"
    assert reassembler.receive(packet, 0.5) is None
    assert reassembler.receive(packet, 1.4) is None  # each copy keeps the memory alive
    assert reassembler.duplicates == 2
    assert reassembler.receive(packet, 5.0) == b"hi"  # long after: a new message


def test_partial_message_bound_abandons_the_idlest_first() -> None:
    reassembler = Reassembler(ReassemblyLimits(max_partial_messages=3))
    first_fragments = [packets_of(mid, bytes(2 * MAX_FRAGMENT))[0] for mid in range(5)]
    feed(reassembler, first_fragments[:3])
    # Activity on message 0 makes message 1 the idlest.
    reassembler.receive(packets_of(0, bytes(3 * MAX_FRAGMENT))[1], 0.0)
    feed(reassembler, first_fragments[3:])
    assert reassembler.partial_messages == 3
    abandoned = reassembler.take_abandoned()
    assert [(a.message_id, a.reason) for a in abandoned] == [(1, "bound"), (2, "bound")]


def test_partial_bytes_bound() -> None:
    limit = 10 * MAX_FRAGMENT
    reassembler = Reassembler(ReassemblyLimits(max_partial_bytes=limit))
    for mid in range(50):
        reassembler.receive(packets_of(mid, bytes(3 * MAX_FRAGMENT))[0], float(mid))
        assert reassembler.partial_bytes <= limit
    assert reassembler.partial_messages == 10
    assert {a.reason for a in reassembler.take_abandoned()} == {"bound"}


def test_fragment_beyond_max_message_bytes_is_too_large() -> None:
    reassembler = Reassembler(ReassemblyLimits(max_message_bytes=1000))
    reassembler.receive(Packet(9, 0, False, bytes(MAX_FRAGMENT)), 0.0)
    assert reassembler.receive(Packet(9, 5, False, bytes(MAX_FRAGMENT)), 0.0) is None
    assert [(a.message_id, a.reason) for a in reassembler.take_abandoned()] == [(9, "too_large")]
    assert reassembler.partial_messages == 0


def test_two_different_last_fragments_are_malformed() -> None:
    reassembler = Reassembler()
    reassembler.receive(Packet(3, 0, False, b"a" * MAX_FRAGMENT), 0.0)
    reassembler.receive(Packet(3, 2, True, b"c"), 0.0)
    reassembler.receive(Packet(3, 3, True, b"d"), 0.0)
    assert [a.reason for a in reassembler.take_abandoned()] == ["malformed"]
    reassembler.receive(Packet(4, 2, True, b"c"), 0.0)
    reassembler.receive(Packet(4, 3, False, b"d"), 0.0)  # past the last fragment
    assert [a.reason for a in reassembler.take_abandoned()] == ["malformed"]
    assert reassembler.partial_messages == 0


def test_completed_cache_is_bounded() -> None:
    reassembler = Reassembler(ReassemblyLimits(completed_cache=10))
    for mid in range(100):
        assert reassembler.receive(Packet(mid, 0, True, b"x"), 0.0) == b"x"
    assert sum(reassembler.is_done(mid, 0.0) for mid in range(100)) == 10
    assert all(reassembler.is_done(mid, 0.0) for mid in range(90, 100))


def test_an_ignored_message_stays_ignored_while_its_copies_keep_coming_and_memory_stays_bounded(
) -> None:
    reassembler = Reassembler(ReassemblyLimits(completed_cache=10, message_timeout=1.0))
    reassembler.mark_done(7, 0.0)  # e.g. filtered out on its first fragment
    now = 0.0
    for step in range(2000):  # copies of message 7 for far longer than one timeout
        now = step * 0.01
        assert reassembler.receive(Packet(7, step % 50, False, b"c"), now) is None
        if step % 10 == 0:  # and new one-packet messages, pushing old IDs out
            mid = 1000 + step
            assert reassembler.receive(Packet(mid, 0, True, b"n"), now) == b"n"
        reassembler.on_timer(now)
        assert len(reassembler.done_ids) <= 10
        # Each refresh queues an entry; stale ones are dropped before they pile up.
        assert len(reassembler._done_ids) <= 2 * 10 + 64
    assert reassembler.duplicates == 2000 and reassembler.is_done(7, now)
    assert not reassembler.is_done(7, now + 1.0)  # forgotten one timeout after the last copy


def test_completed_ids_expire_after_the_message_timeout() -> None:
    reassembler = Reassembler(ReassemblyLimits(message_timeout=1.0))
    assert reassembler.receive(Packet(1, 0, True, b"a"), 0.0) == b"a"
    assert reassembler.receive(Packet(2, 0, True, b"b"), 0.5) == b"b"
    reassembler.on_timer(1.2)
    assert list(reassembler.done_ids) == [2]
    assert reassembler.receive(Packet(1, 0, True, b"a"), 1.2) == b"a"  # new again
