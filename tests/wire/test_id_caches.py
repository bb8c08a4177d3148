"""The M2MP layer's caches of message IDs stay flat over a long life (issue 35 item 4):
a sender's own IDs and a receiver's completed IDs are forgotten a message timeout after
they can matter, not only past their count bound (docs/decisions.md, "Caches of message
IDs forget by age too")."""

from __future__ import annotations

import random

from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageReceived
from m2mc.wire.packet import MAX_FRAGMENT

RATE = 100  # messages a second
TIMEOUT = 1.0  # message_timeout, seconds
# Kept at most: a timeout's worth, plus the marks' spacing (a quarter of it) twice.
FLAT = int(RATE * TIMEOUT * 1.5) + 2


def layer(seed: int, **config: object) -> M2MPLayer:
    return M2MPLayer(M2MPConfig(message_timeout=TIMEOUT, **config),  # type: ignore[arg-type]
                     random.Random(seed))


def test_a_chat_of_hours_keeps_a_timeouts_worth_of_ids_at_both_ends() -> None:
    sender = layer(1, flow_control=False)
    receiver = layer(2)
    receiver.add_filter(b"")
    delivered = 0
    for step in range(3 * 3600 * RATE // 10):  # 3 hours of bursts of 10 messages,
        now = step / (RATE / 10)  # 10 bursts a second
        for k in range(10):
            sender.send(b"m%d.%d" % (step, k), now)
        out = sender.datagrams_to_send(now)
        sender.receive_datagrams(out, now)  # its own copies come back
        receiver.receive_datagrams(out, now)
        delivered += sum(isinstance(e, MessageReceived) for e in receiver.events())
        assert not sender.events()  # never its own messages
        if step % 1000 == 0:
            assert len(sender._own_ids) <= FLAT
            assert len(receiver._reassembler.done_ids) <= FLAT
    assert delivered == 3 * 3600 * RATE
    assert sender.stats.looped_back == sender.stats.packets_out  # each copy known as ours


def test_a_late_copy_within_a_timeout_is_still_known_as_ours() -> None:
    sender = layer(1, flow_control=False)
    sender.send(b"first", 0.0)
    held = sender.datagrams_to_send(0.0)
    for step in range(1, 90):  # others sent for 0.9 timeouts
        now = step / RATE
        sender.send(b"next", now)
        sender.receive_datagrams(sender.datagrams_to_send(now), now)
    sender.receive_datagrams(held, 0.9)
    assert not sender.events()


def test_a_stream_being_written_keeps_its_id_however_long_it_takes() -> None:
    sender = layer(1, flow_control=False)
    message_id = sender.open_message(0.0)
    copies: list[bytes] = []
    for step in range(600):  # a piece every 0.05 s for 30 timeouts, others in between
        now = step * 0.05
        sender.write_message(message_id, bytes(MAX_FRAGMENT), now)
        sender.send(b"chat", now)
        out = sender.datagrams_to_send(now)
        copies += out
        sender.on_timer(now)
    sender.close_message(message_id, 30.0)
    copies += sender.datagrams_to_send(30.0)
    assert message_id in sender._own_ids.ids
    sender.receive_datagrams([c for c in copies if c[:4] == message_id.to_bytes(4, "big")],
                             30.0)
    assert not sender.events()  # its own stream's copies, all recognised
    assert len(sender._own_ids) <= int(20 * TIMEOUT * 1.5) + 3  # the chat's were forgotten


def test_the_count_bound_still_holds_at_any_rate() -> None:
    sender = layer(1, flow_control=False, own_id_cache=50)
    for _ in range(1000):  # all at one instant: no age has passed
        sender.send(b"x", 0.0)
        sender.datagrams_to_send(0.0)
    assert len(sender._own_ids) == 50
