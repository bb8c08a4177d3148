"""``GroupConfig.batch_hold``: a sender of many small messages holds each next batch
until it is a full bulk batch or ``batch_hold`` after the last one went, and a
sender of few messages is never held (docs/decisions.md, "Small messages are held
up to half a millisecond"). On the in-process network, whose clock is exact."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.api import Node, NodeConfig
from m2mc.errors import ConfigError
from m2mc.group.config import GroupConfig
from m2mc.ordering import MessageId
from m2mc.wire.packet import decode

from .harness import Net, group_of_three

HOLD = GroupConfig().batch_hold


def _stream(hold: float, gap: float, count: int = 400) -> tuple[int, list[int]]:
    """``count`` messages of 100 bytes, one every ``gap`` seconds, in one thread: the
    datagrams the group sent meanwhile, and the packets of each M2MP message."""
    net = Net(seed=21, config=lambda: GroupConfig(batch_hold=hold))
    gid = group_of_three(net, "hold")
    fragments: list[int] = []
    net.counter = lambda d: fragments.append(decode(d).fragment + 1)
    before = net.datagrams
    previous: MessageId | None = None
    for _ in range(count):
        previous = net.send("a", gid, b"z" * 100, reply_to=previous)
        net.run(gap)
    net.run(3.0)
    net.check_group(gid, ["a", "b", "c"])  # every message, once, in order
    return net.datagrams - before, fragments


def test_a_fast_sender_of_small_messages_sends_full_packets_and_fewer_of_them() -> None:
    # 10,000 messages/s: a message every 100 µs, five per batch_hold (measured: 330
    # datagrams against 822; flow control alone batches nothing at this pace).
    held, fragments = _stream(HOLD, 0.0001)
    unheld, unheld_fragments = _stream(0.0, 0.0001)
    assert max(fragments) > 1 == max(unheld_fragments)  # batches of several packets
    assert held < 0.5 * unheld, (held, unheld)


def test_a_sender_slower_than_batch_hold_is_never_held() -> None:
    # A message every 2 ms: each one is sent on its own, and exactly as without holding.
    held, fragments = _stream(HOLD, 0.002, count=100)
    unheld, _ = _stream(0.0, 0.002, count=100)
    assert held == unheld
    assert max(fragments) == 1


def _sent_at(net: Net, marker: bytes) -> list[float]:
    """When the datagrams that carry ``marker`` were sent (filled in as they go)."""
    times: list[float] = []
    earlier = net.counter

    def count(datagram: bytes) -> None:
        if earlier is not None:
            earlier(datagram)
        if marker in datagram:
            times.append(net.now)

    net.counter = count
    return times


def test_a_steady_sender_is_held_and_a_burst_of_two_is_not() -> None:
    net = Net(seed=5)
    gid = group_of_three(net, "hold")
    times = {name: _sent_at(net, name) for name in (b"first", b"second", b"third")}
    start = net.now
    net.send("a", gid, b"first")  # the first after a pause: at once
    net.run(0.0001)
    net.send("a", gid, b"second")  # 0.1 ms after a batch that was not held: at once
    net.run(0.0001)
    net.send("a", gid, b"third")  # 0.1 ms later again: a steady sender, held
    net.run(0.01)
    assert set(times[b"first"]) == {start}
    assert set(times[b"second"]) == {start + 0.0001}
    assert times[b"third"] and all(t == pytest.approx(start + 0.0001 + HOLD, abs=1e-9)
                                   for t in times[b"third"])
    net.run(1.0)
    net.check_group(gid, ["a", "b", "c"])


def test_a_message_that_fills_a_bulk_batch_is_not_held() -> None:
    net = Net(seed=6)
    gid = group_of_three(net, "hold")
    net.send("a", gid, b"small")
    net.run(0.0001)
    big = _sent_at(net, b"big")
    at = net.now
    net.send("a", gid, b"big" * 1000)  # 3,000 bytes: more than a bulk batch
    assert big and set(big) == {at}
    net.run(1.0)
    net.check_group(gid, ["a", "b", "c"])


def test_batch_hold_cannot_be_negative() -> None:
    with pytest.raises(ConfigError, match="batch_hold"):
        GroupConfig(batch_hold=-0.001).validate()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.00005, 0.0002, 0.0006, 0.002]), min_size=1,
                max_size=40))
def test_no_message_waits_past_batch_hold_and_none_waits_when_all_are_apart(
        gaps: list[float]) -> None:
    """Whatever the pace: every message is delivered everywhere, its first packet
    leaves within batch_hold of its send (plus a loopback's flow control, 0.1 ms
    here), and a sender whose messages are all batch_hold or more apart is sent at
    once, each message at the moment it is sent."""
    net = Net(seed=len(gaps))
    gid = group_of_three(net, "hold")
    sent_at: list[float] = []
    left: list[list[float]] = []
    previous: MessageId | None = None
    for number, gap in enumerate(gaps):
        net.run(gap)
        left.append(_sent_at(net, b"<%04d>" % number))
        sent_at.append(net.now)
        previous = net.send("a", gid, b"<%04d>" % number, reply_to=previous)
    net.run(2.0)
    net.check_group(gid, ["a", "b", "c"])
    for when, went in zip(sent_at, left, strict=True):
        assert went and when <= min(went) <= when + HOLD + 0.0002
    if all(gap >= HOLD for gap in gaps[1:]):
        assert all(min(went) == when for when, went in zip(sent_at, left, strict=True))


def test_release_batches_sends_what_is_held_with_the_next_output() -> None:
    # What a closing node does first (AdhocNode.close), so nothing held is left behind.
    net = Net(seed=8)
    gid = group_of_three(net, "hold")
    went = _sent_at(net, b"third")
    for text in (b"first", b"second"):
        net.send("a", gid, text)
        net.run(0.0001)
    at = net.now
    net.send("a", gid, b"third")
    assert not went  # held: a steady sender
    net.do("a", lambda n: n.release_batches())  # (net.do carries out the node's output)
    assert went and set(went) == {at}


async def test_a_node_closed_right_after_sending_has_sent_everything() -> None:
    bus = f"mem://hold-{uuid.uuid4().hex[:8]}"
    async with Node(NodeConfig(pid="reader", channel=bus)) as reader:
        writer = Node(NodeConfig(pid="writer", channel=bus))
        await writer.start()
        group = await writer.create_group("last words")
        mine = await reader.join(group.gid, timeout=10.0)
        for number in range(20):  # one per turn: a steady sender, held after the second
            await group.send(f"m{number}")
            await asyncio.sleep(0)
        await writer.close()  # no data_dir: nobody could repair what it kept
        got: list[str] = []
        while len(got) < 20:
            got.extend(m.text for m in await mine.receive_many(timeout=10.0))
        assert got == [f"m{number}" for number in range(20)]
