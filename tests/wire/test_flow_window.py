"""Flow control with a window of packets in flight (seeds/002 section 5; docs/decisions.md).

``flow_window=1`` is the seed's stop-and-wait (tests/wire/test_m2mp_layer.py); a
larger window lets a sender have that many packets whose looped-back copy is
still awaited, each with its own flow timeout.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import ConfigError
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageReceived
from m2mc.wire.packet import MAX_FRAGMENT, decode


def sender(window: int | None, *, redundancy: int = 1, flow_timeout: float = 0.1) -> M2MPLayer:
    return M2MPLayer(M2MPConfig(flow_window=window, redundancy=redundancy,
                                flow_timeout=flow_timeout), random.Random(7))


def fragments_of(datagrams: list[bytes]) -> list[int]:
    return [decode(d).fragment for d in datagrams]


def test_the_layer_alone_defaults_to_the_seeds_stop_and_wait() -> None:
    layer = sender(None)
    layer.send(bytes(3 * MAX_FRAGMENT), 0.0)
    assert fragments_of(layer.datagrams_to_send(0.0)) == [0]
    assert layer.datagrams_to_send(0.0) == [] and layer.flow_room == 0


def test_a_window_lets_that_many_packets_go_then_each_loopback_frees_one_slot() -> None:
    layer = sender(4, redundancy=2)
    layer.send(bytes(10 * MAX_FRAGMENT), 0.0)
    first = layer.datagrams_to_send(0.0)
    assert fragments_of(first) == [0, 0, 1, 1, 2, 2, 3, 3]  # 4 packets, N copies each
    assert layer.datagrams_to_send(0.01) == [] and layer.flow_blocked
    layer.receive_datagram(first[0], 0.02)  # loopback of packet 0
    layer.receive_datagram(first[1], 0.02)  # its redundant copy frees nothing more
    assert layer.flow_room == 1
    assert fragments_of(layer.datagrams_to_send(0.02)) == [4, 4]
    assert layer.stats.looped_back == 2 and layer.events() == []


def test_each_packet_in_the_window_has_its_own_flow_timeout() -> None:
    layer = sender(2, flow_timeout=0.1)
    layer.send(bytes(5 * MAX_FRAGMENT), 0.0)
    assert fragments_of(layer.datagrams_to_send(0.0)) == [0, 1]
    layer.on_timer(0.05)
    third = layer.datagrams_to_send(0.05)
    assert third == []
    assert layer.next_deadline() == pytest.approx(0.1)
    layer.on_timer(0.1)  # both loopbacks lost: both slots free at their deadline
    assert layer.stats.flow_timeouts == 2
    assert fragments_of(layer.datagrams_to_send(0.1)) == [2, 3]
    assert layer.next_deadline() == pytest.approx(0.2)


def test_packets_sent_later_time_out_later() -> None:
    layer = sender(2, flow_timeout=0.1)
    layer.send(bytes(4 * MAX_FRAGMENT), 0.0)
    out = layer.datagrams_to_send(0.0)  # packets 0 and 1, deadline 0.1
    layer.receive_datagram(out[0], 0.06)
    assert fragments_of(layer.datagrams_to_send(0.06)) == [2]  # deadline 0.16
    layer.on_timer(0.1)  # packet 1's loopback is late; packet 2's is not due yet
    assert layer.stats.flow_timeouts == 1 and layer.flow_room == 1
    assert fragments_of(layer.datagrams_to_send(0.1)) == [3]
    assert layer.next_deadline() == pytest.approx(0.16)


def test_a_later_loopback_releases_the_earlier_packets_whose_copy_was_lost() -> None:
    # Packets are not reordered (seeds/002 section 1, assumption 4).
    layer = sender(3)
    layer.send(bytes(6 * MAX_FRAGMENT), 0.0)
    out = layer.datagrams_to_send(0.0)
    layer.receive_datagram(out[2], 0.01)  # copies of packets 0 and 1 never came back
    assert layer.stats.loopbacks_missed == 2 and layer.flow_room == 3
    assert layer.stats.flow_timeouts == 0
    layer.receive_datagram(out[0], 0.02)  # a straggler frees nothing and is not delivered
    assert layer.flow_room == 3 and layer.events() == []


def test_window_must_be_positive() -> None:
    with pytest.raises(ConfigError):
        M2MPLayer(M2MPConfig(flow_window=0), random.Random(0))


@settings(max_examples=80, deadline=None)
@given(window=st.integers(1, 8), redundancy=st.integers(1, 3),
       sizes=st.lists(st.integers(0, 4 * MAX_FRAGMENT), min_size=1, max_size=6),
       lost=st.lists(st.booleans(), max_size=64))
def test_everything_leaves_in_order_within_the_window_whatever_loopbacks_are_lost(
        window: int, redundancy: int, sizes: list[int], lost: list[bool]) -> None:
    layer = sender(window, redundancy=redundancy, flow_timeout=0.1)
    receiver = M2MPLayer(M2MPConfig(), random.Random(8))
    receiver.add_filter(b"")
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    ids = [layer.send(p, 0.0) for p in payloads]
    now, sent, step = 0.0, [], 0
    while layer.queued_packets:
        out = layer.datagrams_to_send(now)
        assert len(out) <= window * redundancy
        sent.extend(out)
        for datagram in out:  # the receiver gets everything, in order
            receiver.receive_datagram(datagram, now)
        for datagram in out[::redundancy]:  # the sender's own copies, some lost
            if not (lost[step % len(lost)] if lost else False):
                layer.receive_datagram(datagram, now)
            step += 1
        if not layer.flow_room:
            deadline = layer.next_deadline()
            assert deadline is not None and deadline <= now + 0.1
            now = deadline
            layer.on_timer(now)
    assert receiver.events() == [MessageReceived(i, p) for i, p in zip(ids, payloads,
                                                                       strict=True)]
    assert layer.events() == []  # never delivered to itself
    assert layer.stats.packets_out == len(sent)


def test_a_runtime_may_widen_the_window_once_its_socket_is_known() -> None:
    """The window a Node sets once its channel is open (runtime/endpoint.py,
    flow_window_for): a 64 KiB message's 132 packets go at once with 256, in three
    rounds with 64; a window below 1 is refused."""
    layer = sender(64)
    layer.send(bytes(65_536), 0.0)
    assert len(layer.datagrams_to_send(0.0)) == 64
    wide = sender(64)
    wide.flow_window = 256
    wide.send(bytes(65_536), 0.0)
    assert fragments_of(wide.datagrams_to_send(0.0)) == list(range(132))
    assert wide.flow_window == 256
    with pytest.raises(ValueError):
        wide.flow_window = 0
