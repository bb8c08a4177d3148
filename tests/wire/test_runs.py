"""Runs: a message's fragments arriving in order are collected and handed to the
reassembler at once (M2MPLayer.receive_datagrams, Reassembler.add_run/complete_run).

A run is only a faster way to reach the same state: whatever the traffic (losses,
copies, reordering, interleaved messages, filters, bounds, streams, timeouts) and
however it is cut into batches, a layer with runs gives the same events, counters
and tables as one that takes every packet through the per-fragment path.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.wire import m2mp as m2mp_module
from m2mc.wire import run_end as run_end_module
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageReceived
from m2mc.wire.packet import HEADER_SIZE, MAX_FRAGMENT, MAX_PACKET, fragments
from m2mc.wire.reassembly import Reassembler, ReassemblyLimits
from m2mc.wire.segments import Segments, segment_data, split_block
from m2mc.wire.streams import StreamChunk


def layer(config: M2MPConfig, runs: bool = True) -> M2MPLayer:
    m2mp = M2MPLayer(config, random.Random(7))
    m2mp.add_filter(b"\x01")
    if not runs:
        m2mp._run_end = 0  # no fragment number is below it: no run ever begins
    return m2mp


def deliver(m2mp: M2MPLayer, datagrams: list[bytes], batch: int) -> list[bytes]:
    for i in range(0, len(datagrams), batch):
        m2mp.receive_datagrams(datagrams[i:i + batch], 1.0)
    return [e.payload for e in m2mp.events() if isinstance(e, MessageReceived)]


# ------------------------------------------------------------------ what a user sees
def test_a_64_kib_message_read_64_packets_at_a_time_arrives_whole() -> None:
    payloads = [b"\x01" + os.urandom(65_535) for _ in range(3)]
    packets = [p for i, payload in enumerate(payloads) for p in fragments(10 + i, payload)]
    m2mp = layer(M2MPConfig())
    assert deliver(m2mp, packets, 64) == payloads
    assert m2mp.partial_messages == 0 and m2mp.partial_bytes == 0
    assert m2mp.stats.messages_in == 3 and m2mp.stats.duplicates == 0


def test_64_kib_messages_read_as_segments_arrive_whole_without_being_cut_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a reader with UDP receive offload gets (wire/segments.py): each read's
    packets joined. In order, they are taken as they are."""
    def never(block: bytes) -> list[bytes]:
        raise AssertionError("cut apart")

    monkeypatch.setattr(m2mp_module, "split_block", never)
    monkeypatch.setattr(run_end_module, "split_block", never)
    payloads = [b"\x01" + os.urandom(65_535) for _ in range(3)]
    packets = [p for i, payload in enumerate(payloads) for p in fragments(10 + i, payload)]
    m2mp = layer(M2MPConfig())
    for batch in (packets[:70], packets[70:300], packets[300:]):
        m2mp.receive_datagrams(gro(batch, [64]), 1.0)
    assert [e.payload for e in m2mp.events() if isinstance(e, MessageReceived)] == payloads
    assert m2mp.stats.packets_in == len(packets) and m2mp.stats.messages_in == 3
    assert m2mp.partial_messages == 0 and m2mp.partial_bytes == 0


def test_a_senders_own_copies_read_as_segments_release_its_window_uncut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def never(block: bytes) -> list[bytes]:
        raise AssertionError("cut apart")

    m2mp = layer(M2MPConfig(flow_window=200, redundancy=1))
    m2mp.send(b"\x01" + bytes(40_000), 0.0)
    sent = m2mp.datagrams_to_send(0.0)
    assert len(sent) == 81 and m2mp.flow_blocked
    monkeypatch.setattr(m2mp_module, "split_block", never)
    m2mp.receive_datagrams(sent[:3] + gro(sent[3:], [64]), 1.0)  # 3 alone, 64 and 14 joined
    assert not m2mp.flow_blocked and m2mp.events() == []
    assert m2mp.stats.looped_back == m2mp.stats.packets_in == 81


def test_segments_that_are_not_one_message_in_order_are_taken_one_by_one() -> None:
    payload = b"\x01" + os.urandom(5_000)
    packets = [p for p in fragments(5, payload) for _ in range(2)]  # each sent twice
    m2mp = layer(M2MPConfig())
    m2mp.receive_datagrams(gro(packets, [64]), 1.0)
    assert [e.payload for e in m2mp.events() if isinstance(e, MessageReceived)] == [payload]
    assert m2mp.stats.duplicates == len(packets) // 2
    assert m2mp.stats.packets_in == len(packets)


def test_redundant_copies_are_counted_once_each_and_the_message_arrives_once() -> None:
    payload = b"\x01" + os.urandom(5_000)
    packets = [p for p in fragments(5, payload) for _ in range(2)]
    m2mp = layer(M2MPConfig())
    assert deliver(m2mp, packets, 64) == [payload]
    assert m2mp.stats.duplicates == len(packets) // 2


def test_a_lost_packet_that_comes_late_still_completes_the_message() -> None:
    payload = b"\x01" + os.urandom(10 * MAX_FRAGMENT)
    packets = list(fragments(5, payload))
    late = packets.pop(4)
    m2mp = layer(M2MPConfig())
    assert deliver(m2mp, packets, 64) == []
    assert m2mp.partial_messages == 1
    assert deliver(m2mp, [late], 1) == [payload]
    assert m2mp.partial_messages == 0


def test_a_message_past_max_message_bytes_is_still_refused() -> None:
    m2mp = layer(M2MPConfig(max_message_bytes=4 * MAX_FRAGMENT))
    assert deliver(m2mp, list(fragments(5, b"\x01" + bytes(10 * MAX_FRAGMENT))), 64) == []
    assert m2mp.stats.abandoned == {"too_large": 1}
    assert m2mp.partial_messages == 0


def test_a_message_past_the_stream_threshold_is_still_read_as_a_stream() -> None:
    payload = b"\x01" + os.urandom(20 * MAX_FRAGMENT)
    m2mp = layer(M2MPConfig(stream_threshold=4 * MAX_FRAGMENT))
    packets = list(fragments(5, payload))
    for i in range(0, len(packets), 64):
        m2mp.receive_datagrams(packets[i:i + 64], 1.0)
    chunks = [e for e in m2mp.events() if isinstance(e, StreamChunk)]
    assert m2mp.stats.streams_in == 1 and chunks[-1].end
    assert b"".join(c.data for c in chunks) == payload
    assert chunks[0].offset == 0 and len(chunks[0].data) == 4 * MAX_FRAGMENT


# ------------------------------------------------------------------- reassembler
@settings(max_examples=200, deadline=None)
@given(st.integers(0, 129 * MAX_PACKET), st.sampled_from([0, HEADER_SIZE]))
def test_segment_data_is_each_datagram_without_its_first_bytes(size: int, skip: int) -> None:
    # (one Struct call does what slicing each datagram did; a final datagram shorter
    # than ``skip`` gives b"" as its slice did)
    block = Segments(os.urandom(size))
    datagrams = [block[i:i + MAX_PACKET] for i in range(0, size, MAX_PACKET)]
    assert segment_data(block, skip) == [d[skip:] for d in datagrams]
    assert split_block(block) == datagrams


def test_add_run_refuses_what_would_pass_a_bound_and_changes_nothing() -> None:
    r = Reassembler(ReassemblyLimits(max_partial_bytes=3 * MAX_FRAGMENT))
    packets = list(fragments(1, bytes(10 * MAX_FRAGMENT)))
    assert not r.add_run(1, 0, packets[:4], HEADER_SIZE, 0.0)
    assert r.partial_messages == 0 and r.partial_bytes == 0
    assert r.add_run(1, 0, packets[:3], HEADER_SIZE, 0.0)
    assert r.partial_bytes == 3 * MAX_FRAGMENT and r.run_stop(1, 3, 99) == 3
    assert r.complete_run(1, 3, packets[3:], HEADER_SIZE, 0.0) is None  # 7 more: too many


def test_a_run_that_does_not_continue_the_partial_message_is_refused() -> None:
    r = Reassembler()
    packets = list(fragments(1, bytes(6 * MAX_FRAGMENT)))
    r.receive_fragment(1, 0, False, packets[0][HEADER_SIZE:], 0.0)
    r.receive_fragment(1, 3, False, packets[3][HEADER_SIZE:], 0.0)  # ahead of the run
    assert r.run_stop(1, 1, 99) == 0
    assert not r.add_run(1, 1, packets[1:3], HEADER_SIZE, 0.0)
    assert r.complete_run(1, 1, packets[1:], HEADER_SIZE, 0.0) is None
    assert not r.add_run(2, 4, packets[4:5], HEADER_SIZE, 0.0)  # not even begun


# ------------------------------------------------------------ same as without runs
@st.composite
def traffic(draw: st.DrawFn) -> list[bytes]:
    """Mostly in-order fragments, as large messages arrive, then spoiled a little."""
    datagrams: list[bytes] = []
    for i in range(draw(st.integers(1, 6))):
        head = draw(st.sampled_from([b"\x01", b"\x02"]))  # \x02: filtered out
        size = draw(st.integers(0, 14 * MAX_FRAGMENT))
        copies = draw(st.integers(1, 2))
        packets = [p for p in fragments(100 + i % 4, head + bytes(size)) for _ in range(copies)]
        if draw(st.booleans()) and datagrams:  # interleaved with what came before
            merged: list[bytes] = []
            for a, b in zip(datagrams, packets, strict=False):
                merged += [a, b]
            shorter = min(len(datagrams), len(packets))
            datagrams = merged + datagrams[shorter:] + packets[shorter:]
        else:
            datagrams += packets
    for _ in range(draw(st.integers(0, 4))):  # losses
        if datagrams:
            datagrams.pop(draw(st.integers(0, len(datagrams) - 1)))
    for _ in range(draw(st.integers(0, 3))):  # neighbours swapped
        if len(datagrams) > 1:
            k = draw(st.integers(0, len(datagrams) - 2))
            datagrams[k], datagrams[k + 1] = datagrams[k + 1], datagrams[k]
    for _ in range(draw(st.integers(0, 2))):  # junk, and a copy of an earlier packet
        if datagrams:
            k = draw(st.integers(0, len(datagrams)))
            datagrams.insert(k, draw(st.sampled_from([b"xx", datagrams[k - 1]])))
    return datagrams


configs = st.builds(
    M2MPConfig,
    max_partial_messages=st.sampled_from([1, 2, 1024]),
    max_partial_bytes=st.sampled_from([4 * MAX_FRAGMENT, 9 * MAX_FRAGMENT, 1 << 24]),
    max_message_bytes=st.sampled_from([6 * MAX_FRAGMENT, 1 << 26]),
    stream_threshold=st.sampled_from([0, 0, 3 * MAX_FRAGMENT, 5 * MAX_FRAGMENT]),
    completed_cache=st.sampled_from([2, 65536]),
)


def gro(batch: list[bytes], sizes: list[int]) -> list[bytes]:
    """``batch`` as a reader with UDP receive offload may get it (wire/segments.py):
    full packets in a row, and the shorter one after them, joined as Segments of at
    most the drawn sizes."""
    out: list[bytes] = []
    i = k = 0
    while i < len(batch):
        most = sizes[k % len(sizes)]
        k += 1
        j = i
        while j < len(batch) and j - i < most and len(batch[j]) == MAX_PACKET:
            j += 1
        if i < j < len(batch) and j - i < most and len(batch[j]) < MAX_PACKET:
            j += 1
        if j - i >= 2:
            out.append(Segments(b"".join(batch[i:j])))
            i = j
        else:
            out.append(batch[i])
            i += 1
    return out


@settings(max_examples=500, deadline=None)
@given(config=configs, datagrams=traffic(),
       own=st.lists(st.integers(0, 3 * MAX_FRAGMENT), max_size=2),
       where=st.randoms(use_true_random=False),
       cuts=st.lists(st.integers(1, 40), min_size=1, max_size=40),
       waits=st.lists(st.sampled_from([0.0, 0.0, 2.0, 6.0]), min_size=1, max_size=40),
       joins=st.lists(st.integers(1, 70), min_size=1, max_size=10))
def test_runs_leave_exactly_what_the_per_fragment_path_leaves(
        config: M2MPConfig, datagrams: list[bytes], own: list[int], where: random.Random,
        cuts: list[int], waits: list[float], joins: list[int]) -> None:
    """And so does a layer given the same batches with packets joined as a reader with
    UDP receive offload gets them (Segments)."""
    fast, plain, joined = layer(config), layer(config, runs=False), layer(config)
    for size in own:  # our own messages' looped-back copies, somewhere in the traffic
        for m2mp in (fast, plain, joined):
            m2mp.send(b"\x01" + bytes(size), 0.0)
        sent = fast.datagrams_to_send(0.0)
        assert sent == plain.datagrams_to_send(0.0) == joined.datagrams_to_send(0.0)
        at = where.randrange(len(datagrams) + 1)
        datagrams = datagrams[:at] + sent + datagrams[at:]
    now, start, k = 1.0, 0, 0
    while start < len(datagrams):
        cut = cuts[k % len(cuts)]
        now += waits[k % len(waits)]
        k += 1
        batch = datagrams[start:start + cut]
        for m2mp in (fast, plain, joined):
            m2mp.on_timer(now)
            m2mp.receive_datagrams(gro(batch, joins) if m2mp is joined else batch, now)
        start += cut
        expected = plain.events()
        assert fast.events() == expected
        assert joined.events() == expected
        for m2mp in (fast, joined):
            assert m2mp.stats == plain.stats
            assert (m2mp.partial_messages, m2mp.partial_bytes) == (
                plain.partial_messages, plain.partial_bytes)
            assert m2mp.next_deadline() == plain.next_deadline()
