"""A chat session over the fake backend: what each participant ends up seeing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from m2mc.errors import UsageError
from m2mc_chat.backend import ChatBackend, Delivered, MemberNamed, SyncProgress
from m2mc_chat.fake import FakeBackend, FakeNetwork, FakeStore
from m2mc_chat.presence import MemberState
from m2mc_chat.session import UNREADABLE_TEXT, ChatSession, MessageAdded, SessionChange
from m2mc_chat.state import UiStateStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


async def started(backend: FakeBackend, nick: str, clock: Clock,
                  ui_state: UiStateStore | None = None) -> tuple[ChatSession, asyncio.Task[None]]:
    session = ChatSession(backend, nick, clock=clock, ui_state=ui_state)
    await session.start()
    return session, asyncio.create_task(session.run())


@pytest.fixture
async def pair() -> AsyncIterator[tuple[FakeNetwork, ChatSession, ChatSession]]:
    net, clock = FakeNetwork(), Clock()
    alice, t1 = await started(FakeBackend(net, "A"), "alice", clock)
    bob, t2 = await started(FakeBackend(net, "B"), "bob", clock)
    yield net, alice, bob
    await alice.close()
    await bob.close()
    await asyncio.gather(t1, t2)


def test_fake_backend_is_a_chat_backend() -> None:
    assert isinstance(FakeBackend(FakeNetwork(), "A"), ChatBackend)


async def test_create_join_reply_and_both_see_the_same_tree(
        pair: tuple[FakeNetwork, ChatSession, ChatSession]) -> None:
    _, alice, bob = pair
    info = await alice.create_group("lunch")
    assert await bob.wait_until(lambda: bob.find_group("lunch") is not None, 5)
    q = await alice.send(info.gid, "Pizza or curry?")
    await bob.join_group(info.gid)
    assert await bob.wait_until(lambda: q in bob.views[info.gid].tree, 5)
    answer = await bob.send(info.gid, "Curry", reply_to=q)
    assert await alice.wait_until(lambda: answer in alice.views[info.gid].tree, 5)
    a_tree, b_tree = alice.views[info.gid].tree, bob.views[info.gid].tree
    assert a_tree.transcript() == b_tree.transcript()
    assert a_tree.transcript()[0]["children"][0]["text"] == "Curry"
    assert a_tree.is_unread(answer) and not a_tree.is_unread(q)   # own messages are read
    presence = alice.views[info.gid].presence
    assert presence.nick("B") == "bob"
    assert presence.state("B", alice.clock()) is MemberState.JOINED
    assert presence.state("B", alice.clock() + 3600) is MemberState.SILENT


async def test_reply_to_unknown_message_and_send_outside_group_refused(
        pair: tuple[FakeNetwork, ChatSession, ChatSession]) -> None:
    _, alice, _ = pair
    info = await alice.create_group("g")
    with pytest.raises(UsageError, match="no message"):
        await alice.send(info.gid, "x", reply_to="Z:9")
    with pytest.raises(UsageError, match="not a member"):
        await alice.send("nope", "x")


async def test_leave_is_seen_by_the_others(
        pair: tuple[FakeNetwork, ChatSession, ChatSession]) -> None:
    _, alice, bob = pair
    info = await alice.create_group("g")
    await bob.wait_until(lambda: info.gid in bob.groups, 5)
    await bob.join_group(info.gid)
    await alice.wait_until(lambda: "B" in alice.views[info.gid].presence, 5)
    await bob.leave_group(info.gid)
    assert info.gid not in bob.views
    assert await alice.wait_until(
        lambda: alice.views[info.gid].presence.state("B", 0) is MemberState.LEFT, 5)
    assert alice.groups[info.gid].left == ("B",)


async def test_out_of_order_and_unreadable_deliveries() -> None:
    net, clock = FakeNetwork(), Clock()
    gid = net.add_group("g", "C")
    backend = FakeBackend(net, "A")
    session, task = await started(backend, "alice", clock)
    await session.join_group(gid)
    first = net.post(gid, "C", "carol", "Did you visit Delhi?", deliver=False)
    reply = net.post(gid, "C", "carol", "I did", parent=first.mid, deliver=False)
    seen: list[SessionChange] = []
    session.subscribe(seen.append)
    backend.inject(reply)
    backend.inject(Delivered(gid, "C:9", first.mid, "C", b"\x00garbage"))
    backend.inject(first)
    tree = session.views[gid].tree
    assert await session.wait_until(lambda: len(tree) == 3, 5)
    assert [tree.get(m).text for m in tree.display_order()] == [  # type: ignore[union-attr]
        "Did you visit Delhi?", "I did", UNREADABLE_TEXT]
    assert session.undecodable == 1
    added = [c for c in seen if isinstance(c, MessageAdded)]
    assert [c.restructured for c in added] == [True, False, True]
    await session.close()
    await task


async def test_catch_up_progress_is_reported() -> None:
    net, clock = FakeNetwork(), Clock()
    gid = net.add_group("busy", "C")
    for i in range(10):
        net.post(gid, "C", "carol", f"m{i}")
    backend = FakeBackend(net, "A", catch_up_batch=4)
    session, task = await started(backend, "alice", clock)
    progress: list[int] = []
    session.subscribe(lambda c: progress.append(c.pending) if hasattr(c, "pending") else None)
    await session.join_group(gid)
    view = session.views[gid]
    assert await session.wait_until(lambda: len(view.tree) == 4 and view.pending_sync == 6, 5)
    assert progress == [10, 6]
    assert view.tree.unread_count == 4
    assert session.views[gid].pending_sync == 6
    backend.inject(SyncProgress(gid, 0))
    assert await session.wait_until(lambda: session.views[gid].pending_sync == 0, 5)
    await session.close()
    await task


async def test_restart_restores_history_read_marks_and_collapse(tmp_path: Path) -> None:
    net, clock, store = FakeNetwork(), Clock(), FakeStore()
    gid = net.add_group("g", "C")
    q = net.post(gid, "C", "carol", "question")
    session, task = await started(FakeBackend(net, "A", store=store), "alice", clock,
                                  UiStateStore(tmp_path / "s.json"))
    await session.join_group(gid)
    tree = session.views[gid].tree
    await session.wait_until(lambda: q.mid in tree, 5)
    net.post(gid, "C", "carol", "answer", parent=q.mid)
    await session.wait_until(lambda: len(tree) == 2, 5)
    tree.mark_read(q.mid)
    tree.set_collapsed(q.mid, True)
    before = tree.transcript()
    await session.close()
    await task

    again, task = await started(FakeBackend(net, "A", store=store), "alice", clock,
                                UiStateStore(tmp_path / "s.json"))
    restored = again.views[gid].tree
    assert restored.transcript() == before
    assert restored.unread_mids() == {"C:2"}
    assert restored.collapsed_mids() == {q.mid}
    await again.close()
    await task


async def test_nicks_come_from_the_group_layer_before_anyone_writes(
        pair: tuple[FakeNetwork, ChatSession, ChatSession]) -> None:
    _, alice, bob = pair
    assert isinstance(alice.backend, FakeBackend) and alice.backend.nick == "alice"  # set_nick
    info = await alice.create_group("quiet")
    assert await bob.wait_until(lambda: bob.find_group("quiet") is not None, 5)
    assert bob.nick_of("A") == "alice"                      # from the group's record
    await bob.join_group(info.gid)
    view = alice.views[info.gid]
    assert await alice.wait_until(lambda: "B" in view.presence, 5)
    assert view.presence.nick("B") == "bob" and alice.nick_of("B") == "bob"  # from its join


async def test_announced_nicks_win_over_written_ones_and_bad_ones_are_ignored() -> None:
    net, clock = FakeNetwork(), Clock()
    gid = net.add_group("g", "C", names={"C": "carol"})
    net.post(gid, "C", "caz", "hi")                         # writes under another nick
    alice, task = await started(FakeBackend(net, "A"), "alice", clock)
    try:
        await alice.join_group(gid)
        presence, tree = alice.views[gid].presence, alice.views[gid].tree
        assert await alice.wait_until(lambda: "C:1" in tree, 5)      # caught up
        assert presence.nick("C") == "carol" and alice.nick_of("C") == "carol"
        assert tree.get("C:1").nick == "caz"  # type: ignore[union-attr]
        net.rename("C", "\x1b[31mred")                         # not a nick: says none
        assert await alice.wait_until(lambda: presence.nick("C") == "caz", 5)
        assert alice.nick_of("C") == "caz"
        net.rename("C", "x" * 33)                             # longer than a nick
        net.rename("C", "  carol  ")
        assert await alice.wait_until(lambda: presence.nick("C") == "carol", 5)
        net.rename("C", "")                                   # announces none any more
        assert await alice.wait_until(lambda: presence.nick("C") == "caz", 5)
        for i in range(5000):                                 # bounded like nicks written
            alice.apply(MemberNamed(gid, f"p{i}", f"n{i}"))
        assert len(alice._announced) <= 4096 and len(presence._announced) <= 4096
    finally:
        await alice.close()
        await task
