"""M2MP messages written and read in pieces (m2mc.wire.streams, seeds/002 section 4).

* the wire of a message written in pieces is byte for byte that of the whole message;
* a receiver reading streams delivers exactly the bytes a receiver of whole messages
  does, whatever the piece boundaries, with loss, duplication and reordering;
* a receiver holds a bounded window of a 50 MiB message, never the message;
* a stream abandoned part-way (late fragment, gap, contradiction, bound) is an error
  for its reader, never a truncated message; filters still decide on the first bytes.
"""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import ConfigError
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageAbandoned, MessageReceived
from m2mc.wire.packet import LAST_FLAG, MAX_FRAGMENT, fragments
from m2mc.wire.streams import OutgoingFragments, StreamChunk

THRESHOLD = 2_000
WINDOW = 64


def receiver(threshold: int = THRESHOLD, **config: object) -> M2MPLayer:
    layer = M2MPLayer(M2MPConfig(stream_threshold=threshold, stream_window=WINDOW,
                                 **config), random.Random(7))  # type: ignore[arg-type]
    layer.add_filter(b"")
    return layer


def written_in_pieces(message_id: int, payload: bytes, cuts: list[int]) -> list[bytes]:
    out = OutgoingFragments(message_id)
    packets: list[bytes] = []
    start = 0
    for cut in sorted(c % (len(payload) + 1) for c in cuts):
        packets += out.write(payload[start:cut])
        start = max(start, cut)
    packets += out.write(payload[start:])
    packets.append(out.close())
    return packets


class Reader:
    """What an application reading a layer's events sees: whole messages, and streams
    put together from their chunks (checking offsets and the end flag)."""

    def __init__(self) -> None:
        self.whole: dict[int, bytes] = {}
        self.streamed: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.abandoned: dict[int, str] = {}

    def take(self, layer: M2MPLayer) -> None:
        for event in layer.events():
            if isinstance(event, MessageReceived):
                assert event.message_id not in self.whole
                self.whole[event.message_id] = event.payload
            elif isinstance(event, StreamChunk):
                assert event.message_id not in self.ended
                got = self.streamed.setdefault(event.message_id, bytearray())
                assert event.offset == len(got)  # in order, nothing skipped
                got += event.data
                if event.end:
                    self.ended.add(event.message_id)
            else:
                assert isinstance(event, MessageAbandoned)
                assert event.message_id not in self.ended
                self.abandoned[event.message_id] = event.reason

    def delivered(self) -> dict[int, bytes]:
        out = dict(self.whole)
        out.update({mid: bytes(self.streamed[mid]) for mid in self.ended})
        return out


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=3 * MAX_FRAGMENT + 3) | st.integers(0, 40_000).map(
    lambda n: random.Random(n).randbytes(n)), cuts=st.lists(st.integers(0, 50_000)))
def test_pieces_make_exactly_the_packets_of_the_whole_message(payload: bytes,
                                                              cuts: list[int]) -> None:
    assert written_in_pieces(0x1234, payload, cuts) == list(fragments(0x1234, payload))


def test_an_empty_message_is_one_empty_packet_with_the_last_flag() -> None:
    out = OutgoingFragments(5)
    assert out.write(b"") == []
    assert out.close() == (5).to_bytes(4, "big") + LAST_FLAG.to_bytes(4, "big")


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 40_000), min_size=1, max_size=4),
       cuts=st.lists(st.integers(0, 40_000), max_size=6), copies=st.integers(1, 3),
       lose=st.floats(0, 0.5), reorder=st.integers(0, WINDOW - 1), seed=st.integers(0, 2**32))
def test_streamed_and_whole_receivers_deliver_the_same_bytes(
        sizes: list[int], cuts: list[int], copies: int, lose: float, reorder: int,
        seed: int) -> None:
    streamed_and_whole(sizes, cuts, copies, lose, reorder, seed)


def test_a_copy_after_the_end_in_the_same_batch_does_not_restart_the_stream() -> None:
    """Found by CI (2026-11-26): a stream completed part-way through a batch of
    datagrams, and later copies in the same batch began the message again at offset 0
    (the ID was marked done only at the end of the batch)."""
    payload = random.Random(1).randbytes(3_000)
    packets = list(fragments(1001, payload))  # 7 fragments: a stream from fragment 3 on
    layer, reader = receiver(), Reader()
    layer.receive_datagrams(packets + packets[:5], 1.0)  # all, then copies, one batch
    reader.take(layer)
    layer.receive_datagrams(packets, 2.0)  # and copies in a later batch
    reader.take(layer)
    assert reader.delivered() == {1001: payload}
    assert layer.partial_bytes == 0 and layer.streams_open == 0


def test_the_ci_case_of_a_restarting_stream() -> None:
    streamed_and_whole([1373, 3073], [], 3, 0.1328125, 48, 16611)


def streamed_and_whole(sizes: list[int], cuts: list[int], copies: int, lose: float,
                       reorder: int, seed: int) -> None:
    """Several senders' messages interleaved, each packet sent ``copies`` times, copies
    lost at random, the rest moved up to ``reorder`` places (less than the stream
    window: reordered further, a stream counts a gap). A receiver of streams
    and one of whole messages deliver the same messages with the same bytes; a message
    one of them cannot complete (every copy of a packet lost) the other does not
    deliver either, and the streaming one tells its reader (never a truncation)."""
    rng = random.Random(seed)
    payloads = {1000 + i: rng.randbytes(n) for i, n in enumerate(sizes)}
    datagrams = [p for mid, payload in payloads.items()
                 for p in written_in_pieces(mid, payload, cuts) for _ in range(copies)]
    datagrams = [d for d in datagrams if rng.random() >= lose]
    # Local reordering: each datagram ends up at most ``reorder`` places from where it
    # was (a chain of swaps would carry one arbitrarily far).
    keys = [i + rng.uniform(0, reorder) for i in range(len(datagrams))]
    datagrams = [d for _, d in sorted(zip(keys, datagrams, strict=True), key=lambda kd: kd[0])]
    streaming, whole = receiver(), M2MPLayer(M2MPConfig(), random.Random(8))
    whole.add_filter(b"")
    got_streamed, got_whole = Reader(), Reader()
    for start in range(0, len(datagrams), 7):  # in batches, as a driver reads them
        for layer, reader in ((streaming, got_streamed), (whole, got_whole)):
            layer.receive_datagrams(datagrams[start:start + 7], 1.0)
            reader.take(layer)
    for layer, reader in ((streaming, got_streamed), (whole, got_whole)):
        layer.on_timer(100.0)  # whatever is incomplete times out
        reader.take(layer)
    assert got_streamed.delivered() == got_whole.delivered()
    for mid, payload in got_streamed.delivered().items():
        assert payload == payloads[mid]
    assert streaming.stream_held_bytes == 0 and streaming.streams_open == 0
    assert streaming.partial_bytes == 0
    for mid in got_streamed.streamed:  # a stream that began either ended or failed
        assert (mid in got_streamed.ended) != (mid in got_streamed.abandoned)


def test_a_50_mib_stream_holds_a_bounded_window_not_the_message() -> None:
    """50 MiB written in 64 KiB pieces, each packet sent twice, one copy of one packet
    in ten lost and neighbours swapped: the receiver never holds more than the
    threshold (before the message is a stream) plus its window of early fragments;
    every byte comes out, in order, with the sender's SHA-256."""
    size, piece = 50 << 20, 64 << 10
    threshold, window = 64 << 10, 256
    bound = threshold + window * MAX_FRAGMENT
    layer = M2MPLayer(M2MPConfig(stream_threshold=threshold, stream_window=window),
                      random.Random(3))
    layer.add_filter(b"")
    rng = random.Random(5)
    out = OutgoingFragments(77)
    sent, got = hashlib.sha256(), hashlib.sha256()
    offset = most = 0
    ended = False
    block = bytes(range(256)) * (piece // 256)
    written = 0
    while not ended:
        if written < size:
            data = block[:min(piece, size - written)]
            data = rng.randbytes(16) + data[16:]
            sent.update(data)
            written += len(data)
            packets = out.write(data)
            if written == size:
                packets.append(out.close())
        batch = [p for p in packets for _ in range(2)]
        batch = [p for i, p in enumerate(batch) if not (i % 2 == 0 and rng.random() < 0.1)]
        for i in range(0, len(batch) - 1, 2):
            if rng.random() < 0.3:
                batch[i], batch[i + 1] = batch[i + 1], batch[i]
        for i in range(0, len(batch), 64):
            layer.receive_datagrams(batch[i:i + 64], 1.0)
            most = max(most, layer.stream_held_bytes + layer.partial_bytes)
            for event in layer.events():
                assert isinstance(event, StreamChunk), event
                assert event.offset == offset
                offset += len(event.data)
                got.update(event.data)
                ended = event.end
        if written == size and not ended:
            raise AssertionError("the stream did not end")
    assert offset == size and got.digest() == sent.digest()
    assert most <= bound
    assert layer.stream_held_bytes == 0 and layer.stats.streams_in == 1


def stream_packets(message_id: int, size: int, seed: int = 1) -> tuple[bytes, list[bytes]]:
    payload = random.Random(seed).randbytes(size)
    return payload, list(fragments(message_id, payload))


def test_a_stream_whose_next_fragment_is_late_is_abandoned_for_its_reader() -> None:
    layer = receiver(message_timeout=2.0)
    payload, packets = stream_packets(9, 10_000)
    layer.receive_datagrams(packets[:8], 0.0)  # 4,000 bytes: a stream, then silence
    reader = Reader()
    reader.take(layer)
    assert bytes(reader.streamed[9]) == payload[:4000]
    layer.on_timer(1.9)
    reader.take(layer)
    assert 9 not in reader.abandoned
    assert layer.next_deadline() == 2.0
    layer.on_timer(2.0)
    reader.take(layer)
    assert reader.abandoned == {9: "timeout"} and 9 not in reader.ended
    layer.receive_datagrams(packets[8:], 2.5)  # stragglers: ignored, never a new message
    reader.take(layer)
    assert reader.delivered() == {} and layer.stats.abandoned == {"timeout": 1}


def test_a_fragment_past_the_window_means_a_gap_and_abandons_at_once() -> None:
    layer = receiver()
    _, packets = stream_packets(9, 60_000)
    reader = Reader()
    layer.receive_datagrams(packets[:10], 0.0)
    layer.receive_datagrams(packets[11:11 + WINDOW], 0.0)  # packet 10 lost in every copy
    reader.take(layer)
    assert reader.abandoned == {9: "gap"}
    assert layer.stream_held_bytes == 0 and layer.streams_open == 0


def test_two_last_fragments_are_malformed() -> None:
    layer = receiver()
    _, packets = stream_packets(9, 10_000)
    layer.receive_datagrams(packets[:6], 0.0)
    bad = bytearray(packets[7])
    bad[4] |= 0x80  # fragment 7 claims to be the last; the real last is 19
    layer.receive_datagrams([bytes(bad), packets[-1]], 0.0)
    reader = Reader()
    reader.take(layer)
    assert reader.abandoned == {9: "malformed"} and layer.stats.abandoned == {"malformed": 1}


def test_streams_past_max_streams_abandon_the_idlest() -> None:
    layer = receiver(max_streams=2)
    reader = Reader()
    for mid in (1, 2, 3):
        layer.receive_datagrams(stream_packets(mid, 10_000)[1][:5], float(mid))
    reader.take(layer)
    assert reader.abandoned == {1: "bound"}
    assert layer.streams_open == 2


def test_filters_decide_on_the_first_bytes_and_redundant_copies_are_not_delivered() -> None:
    layer = M2MPLayer(M2MPConfig(stream_threshold=THRESHOLD), random.Random(1))
    layer.add_filter(b"keep:")
    wanted = b"keep:" + bytes(12_000)
    unwanted = b"drop:" + bytes(12_000)
    datagrams = [p for mid, payload in ((1, wanted), (2, unwanted))
                 for p in fragments(mid, payload) for _ in range(2)]
    layer.receive_datagrams(datagrams, 0.0)
    reader = Reader()
    reader.take(layer)
    assert reader.delivered() == {1: wanted}
    assert layer.stats.filtered_out == 1 and layer.stats.streams_in == 1
    assert layer.stats.filtered_fragments == 2 * 25 - 1  # the rest of message 2
    layer.receive_datagrams(list(fragments(1, wanted)), 1.0)  # a late copy of it all
    reader.take(layer)
    assert reader.delivered() == {1: wanted}


def test_a_filter_longer_than_one_fragment_is_checked_when_the_stream_starts() -> None:
    layer = M2MPLayer(M2MPConfig(stream_threshold=THRESHOLD), random.Random(1))
    prefix = b"p" * 700
    layer.add_filter(prefix)
    reader = Reader()
    layer.receive_datagrams(list(fragments(1, prefix + bytes(9000))), 0.0)
    layer.receive_datagrams(list(fragments(2, b"p" * 699 + b"q" + bytes(9000))), 0.0)
    reader.take(layer)
    assert list(reader.delivered()) == [1] and layer.stats.filtered_out == 1


def test_messages_shorter_than_the_threshold_still_come_whole() -> None:
    layer = receiver()
    payload, packets = stream_packets(4, THRESHOLD - 1)
    layer.receive_datagrams(packets, 0.0)
    assert layer.events() == [MessageReceived(4, payload)]
    assert layer.stats.streams_in == 0


def test_sending_in_pieces_through_the_layer_with_flow_control() -> None:
    sender = M2MPLayer(M2MPConfig(flow_window=4, redundancy=2), random.Random(2))
    reader_layer = receiver()
    payload = random.Random(9).randbytes(30_000)
    message_id = sender.open_message(0.0)
    reader = Reader()
    for start in range(0, len(payload), 777):
        sender.write_message(message_id, payload[start:start + 777], 0.0)
        out = sender.datagrams_to_send(0.0)
        sender.receive_datagrams(out, 0.0)  # our own copies: flow control goes on
        reader_layer.receive_datagrams(out, 0.0)
        reader.take(reader_layer)
    sender.close_message(message_id, 0.0)
    while sender.queued_packets:
        out = sender.datagrams_to_send(0.0)
        sender.receive_datagrams(out, 0.0)
        reader_layer.receive_datagrams(out, 0.0)
    reader.take(reader_layer)
    assert reader.delivered() == {message_id: payload}
    assert sender.queued_bytes == 0 and sender.stats.messages_out == 1
    assert sender.events() == []  # never delivered to itself


def test_stream_settings_are_validated() -> None:
    with pytest.raises(ConfigError):
        M2MPLayer(M2MPConfig(stream_threshold=100), random.Random(1))
    with pytest.raises(ConfigError):
        M2MPLayer(M2MPConfig(stream_threshold=2_000, stream_window=0), random.Random(1))
