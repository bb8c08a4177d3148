"""A ``reply_to`` that no member's decoder would accept is refused at the send
(m2mc.group.node_send), before it takes a seqno: such a record would make every
receiver refuse the whole batch it travels in, and that batch's repairs too, so the
good messages sent with it would never arrive (docs/decisions.md, "A reply_to is
checked where it is sent")."""

from __future__ import annotations

import asyncio

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.errors import UsageError
from m2mc.group.config import GroupConfig
from m2mc.group.manager import GroupNode
from m2mc.group.wire_bounds import MAX_PID
from m2mc.ordering import MessageId

from .harness import Net, group_of_three

BAD_PARENTS = [
    MessageId("p" * (MAX_PID + 1), 1),  # a pid longer than any decoder takes
    MessageId("a", 0),  # seqnos start at 1
    MessageId("a", -3),
    MessageId("a", GroupConfig().max_seq),  # absurd: every decoder drops it
    MessageId("", 5),  # ROOT has seqno 0
    "a:0",
    "no seqno",
    "",  # (ROOT: accepted)
]


@pytest.mark.parametrize("bad", BAD_PARENTS, ids=repr)
def test_a_bad_reply_to_is_refused_and_the_batch_it_would_have_spoilt_arrives(
        bad: MessageId | str) -> None:
    net = Net(seed=3, tracing=False)
    gid = group_of_three(net, "replies")
    sent: list[MessageId] = []

    def burst(node: GroupNode) -> None:
        # One batch: a good message, the bad reply, a good reply, all in one step.
        first = node.send(gid, b"first", net.now)
        sent.append(first)
        if bad == "":
            sent.append(node.send(gid, b"to the root", net.now, bad))
        else:
            with pytest.raises(UsageError, match="reply_to"):
                node.send(gid, b"bad reply", net.now, bad)
        sent.append(node.send(gid, b"second", net.now, first))

    net.do("a", burst)
    net.run(2.0)
    # No seqno was used by the refused send, and every member has everything sent.
    assert [m.seq for m in sent] == list(range(sent[0].seq, sent[0].seq + len(sent)))
    for pid in ("a", "b", "c"):
        assert net.delivered[pid][gid][-len(sent):] == sent
    assert net.nodes["a"].node_stats()["sent"] == len(sent)


def test_the_longest_pid_and_the_highest_seqno_are_accepted() -> None:
    net = Net(seed=4, tracing=False)
    gid = group_of_three(net, "edges")
    parent = MessageId("q" * MAX_PID, GroupConfig().max_seq - 1)  # never sent
    net.send("a", gid, b"answer", parent)
    net.run(1.0)
    for pid in ("b", "c"):
        # Decoded and held for its parent, not refused as malformed.
        assert net.nodes[pid].node_stats()["malformed"] == 0
        assert net.nodes[pid].group_stats(gid)["held"] == 1


def test_the_api_says_what_is_wrong_with_a_reply_to() -> None:
    async def main() -> None:
        async with Node(NodeConfig(channel="mem://reply-to-test")) as node:
            group = await node.join("g", order="sb")
            first = await group.send(b"first")
            for bad in ("not an id", "a:0", MessageId("x" * 65, 1)):
                with pytest.raises(UsageError, match="reply_to"):
                    await group.send(b"bad", reply_to=bad)
            second = await group.send(b"second", reply_to=first)
            assert second.seq == first.seq + 1
            got = await group.receive_many(timeout=5)
            while len(got) < 2:
                got += await group.receive_many(timeout=5)
            assert [m.data for m in got] == [b"first", b"second"]
            assert got[1].parent == first

    asyncio.run(main())
