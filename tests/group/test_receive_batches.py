"""A batch of datagrams handed over at once (``GroupNode.receive_datagrams``, what
the asyncio driver does) has the very effect of the same datagrams one by one."""

from __future__ import annotations

import random

from m2mc.group.events import DeliveredBatch
from m2mc.group.manager import GroupNode
from m2mc.ordering import MessageId
from m2mc.wire.m2mp import M2MPConfig


def _node(pid: str) -> GroupNode:
    node = GroupNode(pid, rng=random.Random(pid), m2mp_config=M2MPConfig(flow_window=8))
    node.batch_deliveries = True
    node.start(0.0)
    node.join_group("g", 0.0, order="sb")
    return node


def _traffic() -> list[bytes]:
    """A sender's datagrams: joins, data in one-packet and (backlogged) multi-packet
    batches, replies across senders, statuses, with copies and a loss."""
    a, b = _node("a"), _node("b")
    out: list[bytes] = []
    now = 0.0
    prev: MessageId | None = None
    for i in range(400):
        sender = a if i % 5 else b
        prev = sender.send("g", b"m%d" % i * (1 + i % 7), now, prev if i % 4 else None)
        if i % 200 == 199:  # a backlog: multi-packet batches
            now += 0.3
            for node in (a, b):
                node.on_timer(now)
                sent = node.datagrams_to_send(now)
                node.receive_datagrams(sent, now)  # the loopback
                out += sent
    for node in (a, b):
        while True:
            sent = node.datagrams_to_send(now)
            if not sent:
                break
            node.receive_datagrams(sent, now)
            out += sent
    out = out[:40] + out[41:]  # one lost
    return out + out[60:90]  # and copies


def _run(batch: int) -> tuple[list[MessageId], dict[str, int], dict[str, int], dict[str, object]]:
    node = _node("c")
    traffic = _traffic()
    for i in range(0, len(traffic), batch):
        chunk = traffic[i:i + batch]
        if batch == 1:
            node.receive_datagram(chunk[0], 1.0 + i / 1000)
        else:
            node.receive_datagrams(chunk, 1.0 + i / 1000)
    delivered = [m.mid for e in node.events() if isinstance(e, DeliveredBatch)
                 for m in e.messages]
    return delivered, node.node_stats(), node.group_stats("g"), node.m2mp.stats.as_dict()


def test_batches_of_datagrams_act_as_one_by_one() -> None:
    one_by_one = _run(1)
    assert len(one_by_one[0]) > 300
    m2mp = one_by_one[3]
    assert m2mp["duplicates"] and m2mp["packets_in"] > m2mp["messages_in"] + m2mp["duplicates"]
    for batch in (2, 7, 64, 10_000):
        assert _run(batch) == one_by_one
