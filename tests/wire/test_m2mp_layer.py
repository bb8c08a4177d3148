"""The sans-IO M2MP layer: redundancy, flow control, filters, own messages, abandonment."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import ConfigError
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageAbandoned, MessageReceived
from m2mc.wire.packet import MAX_FRAGMENT, decode


def layer(seed: int = 1, **config: object) -> M2MPLayer:
    return M2MPLayer(M2MPConfig(**config), random.Random(seed))  # type: ignore[arg-type]


def receive_all(receiver: M2MPLayer, datagrams: list[bytes], now: float = 0.0) -> list[object]:
    for datagram in datagrams:
        receiver.receive_datagram(datagram, now)
    return list(receiver.events())


def test_redundancy_sends_each_packet_n_times_and_the_receiver_delivers_once() -> None:
    sender = layer(redundancy=3, flow_control=False)
    receiver = layer(seed=2)
    receiver.add_filter(b"")
    payload = bytes(range(256)) * 5  # 1280 bytes: 3 packets
    message_id = sender.send(payload, 0.0)
    out = sender.datagrams_to_send(0.0)
    assert len(out) == 9
    assert out[0] == out[1] == out[2] and out[3] == out[4] == out[5]
    assert receive_all(receiver, out) == [MessageReceived(message_id, payload)]
    assert receiver.stats.duplicates == 6
    assert receiver.stats.messages_in == 1


def test_a_message_sent_with_copies_queues_each_packet_that_often_and_arrives_once() -> None:
    sender = layer(redundancy=1, flow_control=False)  # as a group node's
    receiver = layer(seed=2)
    receiver.add_filter(b"")
    payload = bytes(range(256)) * 5  # 3 packets
    message_id = sender.send(payload, 0.0, copies=2)
    assert sender.queued_packets == 6
    out = sender.datagrams_to_send(0.0)
    assert len(out) == 6 and out[0] == out[1] and out[2] == out[3] and out[0] != out[2]
    lost_one_copy_each = [out[0], out[3], out[4]]  # any one copy of each packet will do
    assert receive_all(receiver, lost_one_copy_each) == [MessageReceived(message_id, payload)]
    small = sender.send(b"one packet", 0.0, copies=2)
    out = sender.datagrams_to_send(0.0)
    assert len(out) == 2 and out[0] == out[1]
    assert receive_all(receiver, out) == [MessageReceived(small, b"one packet")]
    assert sender.stats.messages_out == 2


def test_flow_control_waits_for_the_looped_back_copy() -> None:
    sender = layer(redundancy=2, flow_timeout=0.1)
    sender.send(bytes(3 * MAX_FRAGMENT), 0.0)
    first = sender.datagrams_to_send(0.0)
    assert len(first) == 2 and decode(first[0]).fragment == 0
    assert sender.datagrams_to_send(0.01) == []  # still waiting for the loopback
    assert sender.queued_packets == 2 and sender.flow_blocked
    sender.receive_datagram(first[0], 0.02)  # loopback: our own, never delivered
    second = sender.datagrams_to_send(0.02)
    assert [decode(d).fragment for d in second] == [1, 1]
    assert sender.next_deadline() == pytest.approx(0.12)
    sender.on_timer(0.05)
    assert sender.datagrams_to_send(0.05) == []
    sender.on_timer(0.13)  # the loopback got lost: proceed after flow_timeout
    assert [decode(d).fragment for d in sender.datagrams_to_send(0.13)] == [2, 2]
    assert sender.stats.flow_timeouts == 1
    assert sender.events() == []


def test_without_flow_control_everything_goes_at_once() -> None:
    sender = layer(redundancy=1, flow_control=False)
    sender.send(bytes(5 * MAX_FRAGMENT), 0.0)
    assert len(sender.datagrams_to_send(0.0)) == 5
    assert sender.next_deadline() is None


def test_own_messages_are_never_delivered_to_the_sender() -> None:
    node = layer(flow_control=False)
    node.add_filter(b"")
    node.send(b"mine", 0.0)
    assert receive_all(node, node.datagrams_to_send(0.0)) == []
    assert node.stats.looped_back == 2 and node.stats.messages_in == 0


def test_filters_by_prefix_several_and_removable() -> None:
    sender = layer(flow_control=False, redundancy=1)
    receiver = layer(seed=2)
    assert receive_all(receiver, [_one(sender, b"anything")]) == []  # no filter: nothing
    receiver.add_filter(b"chat:")
    receiver.add_filter(b"ping")
    got = receive_all(receiver, [_one(sender, m) for m in
                                 (b"chat:hi", b"ping", b"pin", b"other", b"pingpong")])
    assert [e.payload for e in got if isinstance(e, MessageReceived)] == [
        b"chat:hi", b"ping", b"pingpong"]
    receiver.remove_filter(b"ping")
    assert receiver.filters == (b"chat:",)
    got = receive_all(receiver, [_one(sender, m) for m in (b"ping", b"chat:x")])
    assert [e.payload for e in got if isinstance(e, MessageReceived)] == [b"chat:x"]
    receiver.add_filter(b"")
    assert len(receive_all(receiver, [_one(sender, b"zzz")])) == 1


def test_a_long_message_is_filtered_on_its_first_fragment() -> None:
    sender = layer(flow_control=False, redundancy=2)
    receiver = layer(seed=2)
    receiver.add_filter(b"yes")
    sender.send(b"no" + bytes(10 * MAX_FRAGMENT), 0.0)
    assert receive_all(receiver, sender.datagrams_to_send(0.0)) == []
    assert receiver.partial_messages == 0 and receiver.stats.filtered_out == 1
    # 11 fragments sent twice: the first is filtered, the other 21 copies are counted as
    # fragments of a filtered message, not as duplicates.
    assert receiver.stats.filtered_fragments == 21 and receiver.stats.duplicates == 0


def receive_batched(receiver: M2MPLayer, datagrams: list[bytes], now: float = 0.0
                    ) -> list[object]:
    """As a read of many datagrams at once (the runs path)."""
    receiver.receive_datagrams(datagrams, now)
    return list(receiver.events())


@pytest.mark.parametrize("receive", [receive_all, receive_batched])
def test_the_watcher_hears_of_each_message_turned_away_once_with_its_first_bytes(
        receive: Callable[..., list[object]]) -> None:
    sender = layer(flow_control=False, redundancy=2)
    receiver = layer(seed=2)
    receiver.add_filter(b"yes")
    told: list[tuple[bytes, float]] = []
    receiver.watch_filtered(lambda head, now: told.append((bytes(head[:5]), now)))
    sender.send(b"no-1" + bytes(10 * MAX_FRAGMENT), 0.0)  # filtered at its first fragment
    sender.send(b"no-2", 0.0)  # whole, in one fragment
    sender.send(b"yes!", 0.0)
    got = receive(receiver, sender.datagrams_to_send(0.0), now=1.5)
    assert [e.payload for e in got if isinstance(e, MessageReceived)] == [b"yes!"]
    assert sorted(told) == [(b"no-1\x00", 1.5), (b"no-2", 1.5)]  # once each, copies too
    receiver.watch_filtered(None)
    sender.send(b"no-3", 2.0)
    receive(receiver, sender.datagrams_to_send(2.0), now=2.0)
    assert len(told) == 2 and receiver.stats.filtered_out == 3


def test_abandoned_message_that_matched_tells_the_reader() -> None:
    sender = layer(flow_control=False, redundancy=1)
    receiver = layer(seed=2, message_timeout=1.0)
    receiver.add_filter(b"want")
    message_id = sender.send(b"want" + bytes(2 * MAX_FRAGMENT), 0.0)
    packets = sender.datagrams_to_send(0.0)
    assert receive_all(receiver, packets[:2]) == []  # the last fragment is lost
    receiver.on_timer(1.0)
    assert receiver.events() == [MessageAbandoned(message_id, "timeout", 2 * MAX_FRAGMENT)]
    assert receiver.stats.abandoned == {"timeout": 1}


def test_abandoned_message_without_fragment_zero_is_only_counted() -> None:
    sender = layer(flow_control=False, redundancy=1)
    receiver = layer(seed=2, message_timeout=1.0)
    receiver.add_filter(b"")
    sender.send(bytes(3 * MAX_FRAGMENT), 0.0)
    assert receive_all(receiver, sender.datagrams_to_send(0.0)[1:2]) == []
    receiver.on_timer(2.0)
    assert receiver.events() == []
    assert receiver.stats.abandoned == {"timeout": 1}


def test_config_is_validated() -> None:
    for bad in ({"redundancy": 0}, {"message_timeout": 0}, {"flow_timeout": -1},
                {"max_partial_messages": 0}):
        with pytest.raises(ConfigError):
            layer(**bad)


def _one(sender: M2MPLayer, payload: bytes) -> bytes:
    sender.send(payload, 0.0)
    [datagram] = sender.datagrams_to_send(0.0)
    return datagram


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=3 * MAX_FRAGMENT), min_size=1, max_size=4),
                min_size=1, max_size=5),
       st.randoms(use_true_random=False))
def test_many_senders_interleaved_with_one_copy_of_each_packet_lost(
        per_sender: list[list[bytes]], rng: random.Random) -> None:
    """Redundancy 2 survives losing either copy of every packet, in any interleaving."""
    senders = [layer(seed=100 + i, redundancy=2, flow_control=False)
               for i in range(len(per_sender))]
    receiver = layer(seed=1)
    receiver.add_filter(b"")
    streams: list[list[bytes]] = []
    expected: dict[int, bytes] = {}
    for sender, payloads in zip(senders, per_sender, strict=True):
        for payload in payloads:
            expected[sender.send(payload, 0.0)] = payload
        out = sender.datagrams_to_send(0.0)
        # drop one copy of each packet at random; keep the sender's own order
        streams.append([pair[rng.randrange(2)] for pair in zip(out[::2], out[1::2], strict=True)])
    merged: list[bytes] = []
    while any(streams):
        stream = rng.choice([s for s in streams if s])
        merged.append(stream.pop(0))
    events = receive_all(receiver, merged)
    assert all(isinstance(e, MessageReceived) for e in events)
    assert {e.message_id: e.payload for e in events if isinstance(e, MessageReceived)} == expected
    assert len(events) == len(expected)
