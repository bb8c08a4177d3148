"""The sender's backlog is bounded in bytes (``GroupConfig.send_backlog_bytes``):
``Group.send`` waits at the bound instead of queueing every large message it is
given, and nothing is lost (docs/api.md, docs/security.md).

Before the byte bound a record counted as one until it was packed, so a sender of
60 KB messages queued 4,096 of them (245 MB) before it waited.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.group import backlog
from m2mc.group.config import GroupConfig
from m2mc.group.manager import GroupNode

BOUND = 256 * 1024
SIZE = 60_000
COUNT = 120  # 7.2 MB in all: 28 times the bound
HEADERS = 512  # the group header of the message last taken (record and frame)
DEADLINE = 120.0


async def test_a_sender_of_large_messages_holds_at_most_the_bound_and_all_arrive(
        monkeypatch: pytest.MonkeyPatch) -> None:
    held: list[int] = []
    real_send = GroupNode.send

    def measured_send(self: GroupNode, *args: object, **kwargs: object) -> object:
        mid = real_send(self, *args, **kwargs)  # type: ignore[arg-type]
        if self.pid == "writer":
            held.append(self.send_backlog_bytes)
        return mid

    monkeypatch.setattr(GroupNode, "send", measured_send)
    bus = f"mem://backlog-{uuid.uuid4().hex[:8]}"
    config = GroupConfig(send_backlog_bytes=BOUND)
    async with Node(NodeConfig(pid="reader", channel=bus, group=config)) as reader, \
            Node(NodeConfig(pid="writer", channel=bus, group=config,
                            deliver_own=False)) as writer:
        group = await writer.create_group("large")
        mine = await reader.join(group.gid, timeout=10.0)
        payloads = [hashlib.sha256(str(i).encode()).digest() * (SIZE // 32) for i in range(COUNT)]

        async def write() -> None:
            for payload in payloads:  # the plain loop: no pause, no reading
                await group.send(payload)

        writing = asyncio.ensure_future(write())
        got: list[bytes] = []
        while len(got) < COUNT:
            got.extend(m.data for m in await mine.receive_many(timeout=DEADLINE))
        await writing
        assert got == payloads  # every message, once, in order
        assert len(held) == COUNT
        assert max(held) <= BOUND + HEADERS
        assert max(held) > BOUND // 2  # the bound was reached: send() did wait


def test_the_rule_counts_bytes_and_packets() -> None:
    """must_wait: an empty backlog takes anything (even one message over the bound);
    otherwise a message waits if its bytes or the packet count would pass a bound."""
    import random

    node = GroupNode("n", rng=random.Random(1), config=GroupConfig(
        send_backlog=10, send_backlog_bytes=10_000))
    gid = node.create_group("g", 0.0)
    node.datagrams_to_send(0.0)
    node.m2mp.config.flow_control = True
    while node.m2mp.queued_packets:  # a clean start: nothing queued
        node.m2mp.on_timer(1e9)
        node.datagrams_to_send(1e9)
    assert not backlog.must_wait(node, 50_000)  # empty: a large message goes alone
    node.send(gid, b"x" * 4_000, 1.0)
    assert node.send_backlog_bytes >= 4_000
    assert not backlog.must_wait(node, 4_000)  # 8 KB and headers fit in 10 KB
    assert backlog.must_wait(node, 6_000)  # 10 KB and headers do not
    assert backlog.room_made(node)  # under half of both bounds: blocked senders go on
    node.send(gid, b"x" * 2_000, 1.0)
    assert not backlog.room_made(node)  # over half the bytes
    for _ in range(8):
        node.send(gid, b"", 1.0)
    assert backlog.must_wait(node, 0)  # ten records: the packet bound
