"""M2MPLayer.receive_datagrams (the drivers' batch path) behaves like one receive_datagram
per datagram: same events, same counters, whatever the mix of traffic."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.wire.m2mp import M2MPConfig, M2MPLayer
from m2mc.wire.packet import MAX_FRAGMENT, fragments


def node(seed: int) -> M2MPLayer:
    layer = M2MPLayer(M2MPConfig(flow_window=4, redundancy=2, completed_cache=16,
                                 max_partial_messages=4), random.Random(seed))
    layer.add_filter(b"\x01")
    layer.add_filter(b"\x02\x02")
    return layer


@settings(max_examples=120, deadline=None)
@given(payloads=st.lists(st.binary(max_size=3 * MAX_FRAGMENT), max_size=8),
       own=st.lists(st.binary(max_size=2 * MAX_FRAGMENT), max_size=3),
       junk=st.lists(st.binary(max_size=40), max_size=5),
       order=st.randoms(use_true_random=False), cuts=st.lists(st.integers(1, 7), max_size=30))
def test_batches_and_single_datagrams_give_the_same_result(
        payloads: list[bytes], own: list[bytes], junk: list[bytes], order: random.Random,
        cuts: list[int]) -> None:
    one, batched = node(1), node(1)  # same seed: the same own message IDs
    stream = [p for i, payload in enumerate(payloads)
              for p in fragments(1000 + i, payload)] * 2  # every packet twice
    for layer in (one, batched):
        for payload in own:
            layer.send(payload, 0.0)
    own_out = one.datagrams_to_send(0.0)
    assert own_out == batched.datagrams_to_send(0.0)
    stream += own_out + junk + [bytes(600)]
    order.shuffle(stream)
    for datagram in stream:
        one.receive_datagram(datagram, 1.0)
    start = 0
    for cut in [*cuts, len(stream)]:
        batched.receive_datagrams(stream[start:start + cut], 1.0)
        start += cut
        if start >= len(stream):
            break
    assert batched.events() == one.events()
    assert batched.stats == one.stats
    assert batched.flow_room == one.flow_room
    assert batched.partial_messages == one.partial_messages
