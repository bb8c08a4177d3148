"""``M2MPLayer.queued_bytes``: the bytes of the packets flow control holds back, what the
group layer's byte bound on a sender counts (docs/api.md, "Back-pressure")."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from m2mc.wire.m2mp import M2MPConfig, M2MPLayer


@given(sizes=st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 3)), max_size=12),
       window=st.integers(1, 40), redundancy=st.integers(1, 3), loopback=st.booleans())
def test_queued_bytes_is_the_size_of_the_queued_packets(sizes: list[tuple[int, int]],
                                                         window: int, redundancy: int,
                                                         loopback: bool) -> None:
    layer = M2MPLayer(M2MPConfig(flow_window=window, redundancy=redundancy,
                                 flow_control=loopback), random.Random(3))
    now = 0.0
    for size, copies in sizes:  # copies: a message queued several times (group repairs)
        layer.send(bytes(size), now, copies)
        assert layer.queued_bytes == sum(map(len, layer._queue))
        out = layer.datagrams_to_send(now)
        assert layer.queued_bytes == sum(map(len, layer._queue))
        if loopback:
            layer.receive_datagrams(out, now)  # the copies come back: the window opens
    while layer.queued_packets:
        now += 1.0
        layer.on_timer(now)
        layer.datagrams_to_send(now)
    assert layer.queued_bytes == 0
