"""``NodeConfig.max_queued_messages``: an application that stops reading pauses its
node instead of growing memory, and loses nothing (docs/api.md, docs/security.md).

At the bound the node stops taking datagrams off the channel; the channel's own
bounded inbox then drops what keeps coming, like a full socket buffer, and once
the application reads again the group layer's repair fetches what was dropped.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from m2mc.api import GroupMessage, Node, NodeConfig
from m2mc.group.config import GroupConfig
from m2mc.transport.channel import Channel
from m2mc.transport.url import open_channel

LIMIT = 50
INBOX = 64  # datagrams the receiver's channel holds while its node is paused
DEADLINE = 60.0
# The writer sends each message as soon as it has it (no batch_hold), one per packet:
# the batch in hand when the reader pauses is then one or two messages.
ONE_PER_PACKET = GroupConfig(batch_hold=0.0)


async def _settle(turns: int = 50) -> None:
    """Let every task run a while (nothing here waits for a particular moment)."""
    for _ in range(turns):
        await asyncio.sleep(0.001)


async def test_unread_messages_pause_the_node_at_the_bound_and_nothing_is_lost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    channels: list[Channel] = []  # in the order the nodes open them

    def small_inbox(url: str) -> Channel:
        channels.append(open_channel(url, max_inbound=INBOX))
        return channels[-1]

    monkeypatch.setattr("m2mc.api.adhoc.open_channel", small_inbox)
    bus = f"mem://backpressure-{uuid.uuid4().hex[:8]}"
    async with Node(NodeConfig(pid="reader", channel=bus, max_queued_messages=LIMIT)) as reader, \
            Node(NodeConfig(pid="writer", channel=bus, group=ONE_PER_PACKET)) as writer:
        reader_channel = channels[0]
        group = await writer.create_group("firehose")
        mine = await reader.join(group.gid, timeout=10.0)
        texts: list[str] = []
        previous = None

        async def send(count: int) -> None:
            nonlocal previous
            for _ in range(count):
                texts.append(f"m{len(texts)}")
                previous = await group.send(texts[-1], reply_to=previous)  # one long thread
                await asyncio.sleep(0)

        # Up to the bound, one message per turn: the node pauses once LIMIT are unread.
        most = 0
        for _ in range(3 * LIMIT):
            await send(1)
            most = max(most, mine.pending())
        await _settle()
        paused_at = mine.pending()
        assert LIMIT <= paused_at <= most
        assert most <= LIMIT + 2  # what the batch in hand delivered on top of the bound

        # The writer goes on; the paused reader takes none of it in.
        dropped_before = reader_channel.stats.dropped_inbound
        await send(1000)
        await writer._drv().wait_sent()
        await _settle()
        assert mine.pending() == paused_at
        assert reader_channel.stats.dropped_inbound > dropped_before  # its inbox overflowed

        # Reading again: every message, once, in the thread's order (repair fetched
        # what the channel dropped while the node was paused).
        got: list[GroupMessage] = []
        while len(got) < len(texts):
            got.extend(await mine.receive_many(timeout=DEADLINE))
            assert mine.pending() <= LIMIT + 2 * 4096
        assert [m.text for m in got] == texts
        assert reader._node().group_stats(group.gid)["nacks_sent"] >= 1
