"""The asyncio application API over the in-process mem:// channel."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from m2mc.api import GroupMessage, Node, NodeConfig
from m2mc.errors import UsageError
from m2mc.group.events import GroupDiscovered, MemberJoined
from m2mc.kinds import Order


def _channel() -> str:
    return f"mem://api-{uuid.uuid4().hex[:8]}"


async def _collect(group, count: int, timeout: float = 10.0) -> list[GroupMessage]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(count):
        out.append(await group.receive(timeout=timeout))
    return out


async def test_create_join_send_and_receive_in_sb_order() -> None:
    channel = _channel()
    async with Node(NodeConfig(pid="alice", channel=channel)) as alice, \
            Node(NodeConfig(pid="bob", channel=channel)) as bob:
        chat = await alice.create_group("threaded chat")
        assert chat.gid == "alice/1"
        joined = await bob.join(chat.gid, timeout=5.0)
        q = await chat.send("Did you visit Delhi?")
        got = await joined.receive(timeout=5.0)
        assert (got.sender, got.text, got.is_reply) == ("alice", "Did you visit Delhi?", False)
        await joined.send("Yes", reply_to=got)
        mine = await _collect(chat, 2)  # the sender delivers its own message too
        assert [m.text for m in mine] == ["Did you visit Delhi?", "Yes"]
        assert mine[1].parent == q
        assert sorted(chat.members) == ["alice", "bob"]


async def test_events_report_discovery_and_members() -> None:
    channel = _channel()
    async with Node(NodeConfig(pid="a", channel=channel)) as a:
        group = await a.create_group("games", order="total")
        async with Node(NodeConfig(pid="b", channel=channel)) as b:
            infos = await b.discover(timeout=0.5)
            assert [i.gid for i in infos] == [group.gid]
            assert infos[0].order == "total"
            found = []
            async for event in b.events():
                found.append(event)
                if isinstance(event, GroupDiscovered):
                    break
            await b.join(group.gid)
            seen = []
            async for event in a.events():
                seen.append(event)
                if isinstance(event, MemberJoined):
                    break
            assert any(isinstance(e, MemberJoined) and e.pid == "b" for e in seen)
            await b.group(group.gid).send(b"x")
            msg = await group.receive(timeout=5.0)
            assert msg.gseq == 1


async def test_many_messages_keep_order_and_arrive_once() -> None:
    channel = _channel()
    async with Node(NodeConfig(pid="s", channel=channel)) as s, \
            Node(NodeConfig(pid="r", channel=channel)) as r:
        g = await s.create_group("bulk")
        rg = await r.join(g.gid)
        await asyncio.sleep(0.2)
        prev = None
        for i in range(2000):
            prev = await g.send(f"{i}", reply_to=prev if i % 2 else None)
        got = await _collect(rg, 2000, timeout=20.0)
        assert [m.text for m in got] == [str(i) for i in range(2000)]


async def test_join_unknown_group_times_out_with_a_clear_error() -> None:
    async with Node(NodeConfig(pid="x", channel=_channel())) as x:
        with pytest.raises(UsageError, match="not found"):
            await x.join("nobody/1", timeout=0.3)
        g = await x.join("named", order="sb")  # by name: no discovery needed
        await g.send(b"hi")
        assert (await g.receive(timeout=2.0)).data == b"hi"


async def test_an_order_is_a_plain_string_or_a_member_and_nothing_else() -> None:
    async with Node(NodeConfig(pid="a", channel=_channel())) as a:
        by_string = await a.create_group("s", order="total")
        by_member = await a.create_group("m", order=Order.FIFO)
        assert (by_string.order, by_member.order) == (Order.TOTAL, Order.FIFO)
        assert type(by_string.order) is Order  # the member, not the caller's string
        with pytest.raises(UsageError, match="unknown order 'totl'; expected one of "
                                             "sb, causal, fifo, total"):
            await a.create_group("typo", order="totl")
        with pytest.raises(UsageError, match="unknown order 'SB'"):
            await a.join("named", order="SB")


async def test_durable_node_keeps_history_across_restart(tmp_path: Path) -> None:
    channel = _channel()
    cfg = NodeConfig(pid="d", channel=channel, data_dir=tmp_path / "d")
    async with Node(cfg) as d:
        g = await d.create_group("log")
        ids = [await g.send(f"{i}") for i in range(5)]
        await _collect(g, 5)
    async with Node(NodeConfig(channel=channel, data_dir=tmp_path / "d")) as again:
        assert again.pid == "d"
        g2 = again.group(g.gid)
        mid = await g2.send("after")
        assert mid.seq == ids[-1].seq + 1
        (m,) = await _collect(g2, 1)
        assert m.text == "after"  # history is not delivered twice


def test_sync_facade_for_scripts() -> None:
    from m2mc.api.sync import SyncNode

    channel = _channel()
    with SyncNode(NodeConfig(pid="p", channel=channel)) as p, \
            SyncNode(NodeConfig(pid="q", channel=channel)) as q:
        g = p.create_group("script")
        qg = q.join(g.gid)
        first = g.send("one")
        qg.send("two", reply_to=first)
        texts = [m.text for m in g.messages(idle=1.0)]
        assert texts == ["one", "two"]
        assert q.members(g.gid) == ["p", "q"]
        assert not g.authenticated


def test_sync_facade_keyed_group() -> None:
    from m2mc.api.sync import SyncNode

    channel = _channel()
    with SyncNode(NodeConfig(pid="p", channel=channel)) as p, \
            SyncNode(NodeConfig(pid="q", channel=channel)) as q:
        g = p.create_group("secret", key=b"k" * 32)
        qg = q.join(g.gid, key=b"k" * 32)
        assert g.authenticated and qg.authenticated
        g.send("sealed")
        assert [m.text for m in qg.messages(idle=1.0)] == ["sealed"]


def test_chat_bot_example_runs() -> None:
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[2] / "examples" / "chat_bot.py"
    done = subprocess.run([sys.executable, str(example), "--channel", _channel()],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    lines = done.stdout.splitlines()
    assert "alice: Did you visit Delhi?" in lines
    assert "    bot: good question, alice: 'Did you visit Delhi?'" in lines


async def test_unread_events_stop_at_max_queued_events_oldest_dropped() -> None:
    channel = _channel()
    async with Node(NodeConfig(pid="z", channel=channel, max_queued_events=4)) as z, \
            Node(NodeConfig(pid="spam", channel=channel)) as spam:
        for i in range(10):
            await spam.create_group(f"offer {i}")
        loop = asyncio.get_running_loop()
        end = loop.time() + 10
        while len(z.discovered()) < 10 and loop.time() < end:
            await asyncio.sleep(0.02)
        assert len(z.discovered()) == 10
        assert z.events_dropped == 6
        kept = []
        async for event in z.events():
            kept.append(event)
            if len(kept) == 4:
                break
        assert [e.info.desc for e in kept if isinstance(e, GroupDiscovered)] == [
            f"offer {i}" for i in range(6, 10)]



async def test_receive_times_out_cleanly_and_timed_out_readers_do_not_pile_up() -> None:
    """A reader polling with short timeouts on a quiet group gets TimeoutError each
    time, and the node keeps a bounded list of waiters for them; a message sent
    afterwards still reaches a reader, and a cancelled reader leaves nothing behind."""
    async with Node(NodeConfig(pid="quiet", channel=_channel())) as node:
        group = await node.create_group("quiet")
        for _ in range(200):
            with pytest.raises(TimeoutError):
                await group.receive(timeout=0.0005)
        assert len(node._waiters) <= 64
        reader = asyncio.create_task(group.receive())
        await asyncio.sleep(0)
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        await group.send(b"after")
        assert (await group.receive(timeout=5.0)).data == b"after"
