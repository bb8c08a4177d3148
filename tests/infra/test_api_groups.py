"""The API in infrastructure mode with several groups, history and a member that sleeps
(issue 34 items 4 and 5; docs/infra.md "Groups", "History", "Members that sleep"):
real nodes, hosts as asyncio drivers in this process, loopback multicast."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from trace_check import verify

from m2mc.api import Group, GroupMessage, Node, NodeConfig
from m2mc.errors import UsageError
from m2mc.group.events import GroupEvent, MemberLeft, MessagesSkipped
from m2mc.infra.config import InfraConfig
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings

BASE = 15000 + (os.getpid() % 300) * 3
CELLS = [f"udp-multicast://239.255.{80 + i}.{1 + os.getpid() % 200}:{BASE + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(2)]
BACKBONE = [("127.0.0.1", BASE + 2 + i) for i in range(2)]
WAIT = 15.0


async def start_hosts(cfg: InfraConfig) -> list[HostDriver]:
    drivers = [HostDriver(HostSettings(f"H{i}", BACKBONE[i], CELLS[i], ("127.0.0.1", 0),
                                       [b for j, b in enumerate(BACKBONE) if j != i],
                                       config=cfg))
               for i in range(2)]
    for d in drivers:
        await d.start()
    await until(lambda: any(d.core is not None and d.core.coordinator is not None
                            for d in drivers), "no coordinator elected")
    return drivers


@pytest.fixture
async def hosts() -> AsyncIterator[list[HostDriver]]:
    drivers = await start_hosts(InfraConfig(max_member_groups=2))
    yield drivers
    for d in drivers:
        await d.close()


async def until(cond: Callable[[], bool], why: str, wait: float = WAIT) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + wait
    while not cond():
        assert loop.time() < end, why
        await asyncio.sleep(0.02)


async def take(group: Group, n: int) -> list[GroupMessage]:
    return [await group.receive(timeout=WAIT) for _ in range(n)]


async def events_until(node: Node, want: Callable[[GroupEvent], bool]) -> GroupEvent:
    async def first() -> GroupEvent:
        async for ev in node.events():
            if want(ev):
                return ev
        raise AssertionError("node closed")
    return await asyncio.wait_for(first(), WAIT)


async def test_several_groups_each_with_its_members_order_and_history(
        hosts: list[HostDriver], tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS), trace_dir=trace, trace_flush_every=1)
    async with Node(cfg, pid="alice") as alice, Node(cfg, pid="bob", infra_cell=CELLS[1]) as bob, \
            Node(cfg, pid="carol") as carol:
        red_a = await alice.create_group("red")
        blue_a = await alice.create_group("blue")
        red_b = await bob.join("red", timeout=WAIT)
        blue_c = await carol.join("blue", timeout=WAIT)
        for i in range(5):
            await red_a.send(f"red {i}")
            await blue_a.send(f"blue {i}")
        await red_b.send("bob in red")
        await blue_c.send("carol in blue")
        got_b = [m.text for m in await take(red_b, 6)]
        got_c = [m.text for m in await take(blue_c, 6)]
        assert [t for t in got_b if t.startswith("red")] == [f"red {i}" for i in range(5)]
        assert "bob in red" in got_b and not any("blue" in t for t in got_b)
        assert "carol in blue" in got_c and not any(t.startswith("red") for t in got_c)
        both = await take(red_a, 6) + await take(blue_a, 6)
        assert {m.gid for m in both} == {"red", "blue"}
        await until(lambda: alice.members("red") == ["alice", "bob"]
                    and alice.members("blue") == ["alice", "carol"], "views")
        assert bob.members("red") == ["alice", "bob"]  # named by the hosts at his join
        assert [g.gid for g in alice.joined()] == ["red", "blue"]
        assert {g.gid for g in carol.discovered()} >= {"red", "blue"}
        # A third group is over the hosts' max_member_groups: refused, in one line.
        with pytest.raises(UsageError, match="refused"):
            await alice.create_group("green")
        # A late joiner reads the group's history from the hosts' log.
        async with Node(cfg, pid="dave") as dave:
            red_d = await dave.join("red", timeout=WAIT)
            old = [m.text for m in dave.history("red")]
            assert sorted(old) == sorted([f"red {i}" for i in range(5)] + ["bob in red"])
            assert [m.text for m in dave.history("red")] == [m.text for m in both
                                                             if m.gid == "red"]
            assert [m.gseq for m in dave.history("red")] == sorted(
                m.gseq for m in dave.history("red"))
            await red_a.send("after dave")
            assert (await red_d.receive(timeout=WAIT)).text == "after dave"
            assert dave.history("red")[-1].text == "after dave"
            assert dave.history("blue") == []
            await red_d.leave()  # its only group: it leaves the deployment
            await until(lambda: not dave.joined(), "dave left")
        # Leaving one group keeps the others; the last one leaves the deployment.
        await blue_a.leave()
        await until(lambda: "alice" not in carol.members("blue"), "alice left blue")
        await red_b.send("still red")
        assert [m.text for m in await take(red_a, 2)] == ["after dave", "still red"]
        await red_a.leave()
        await until(lambda: not alice.joined(), "alice out of the deployment")
    v = verify(trace)
    assert v.ok, v.problems[:5]


async def test_a_restarted_member_sees_its_conversation(hosts: list[HostDriver],
                                                        tmp_path: Path) -> None:
    """With a data_dir it resumes its groups; without one, a new process joins and
    reads the same history: either way ``history`` shows the conversation."""
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS))
    async with Node(cfg, pid="alice") as alice:
        ga = await alice.create_group("notes")
        bob = Node(cfg, pid="bob", data_dir=tmp_path / "bob")
        await bob.start()
        gb = await bob.join("notes", timeout=WAIT)
        await ga.send("one")
        await gb.send("two", reply_to=(await gb.receive(timeout=WAIT)))
        await take(gb, 1)
        await bob.close()  # switch-off
        await ga.send("three")
        bob = Node(cfg, data_dir=tmp_path / "bob")
        await bob.start()
        gb = await bob.join("notes", timeout=WAIT)  # resumed: at once, with its history
        await until(lambda: len(bob.history("notes")) == 3, "history after a restart")
        texts = [m.text for m in bob.history("notes")]
        assert texts == ["one", "two", "three"]
        assert bob.history("notes")[1].is_reply
        await bob.close()
        async with Node(cfg, pid="carol") as carol:  # no data_dir: a new member
            await carol.join("notes", timeout=WAIT)
            assert [m.text for m in carol.history("notes")] == ["one", "two", "three"]


async def test_a_member_asleep_past_member_timeout_catches_up_and_is_told_what_it_lost(
        tmp_path: Path) -> None:
    """The hosts expel a member silent for member_timeout (1.5 s here) and keep 3 KB of
    history in memory: asleep through 100 messages, it comes back in its groups with
    the newest ones and a MessagesSkipped event counting the others."""
    hosts = await start_hosts(InfraConfig(member_timeout=1.5, memory_history_bytes=3000))
    try:
        cfg = NodeConfig(mode="infra", hosts=tuple(CELLS),
                         infra=InfraConfig(member_timeout=1.5))
        async with Node(cfg, pid="alice") as alice:
            ga = await alice.create_group("chat")
            bob = Node(cfg, pid="bob", data_dir=tmp_path / "bob")
            await bob.start()
            await bob.join("chat", timeout=WAIT)
            await bob.close()  # asleep
            for i in range(100):
                await ga.send(f"m{i:03d}".ljust(40, "."))
            await take(ga, 100)
            await until(lambda: all(d.core is not None and not any(
                m.node == "bob" for m in d.core.log.state.members) for d in hosts),
                "bob expelled")
            bob = Node(cfg, data_dir=tmp_path / "bob")
            await bob.start()
            skipped = await events_until(bob, lambda e: isinstance(e, MessagesSkipped))
            assert isinstance(skipped, MessagesSkipped) and skipped.gid == "chat"
            gb = bob.group("chat")
            await until(lambda: bob.stats()["catchups"] == 1
                        and bob.driver is not None and bob.driver.core.catchup is None,
                        "caught up")
            got = [m.text for m in await take(gb, gb.pending())]
            assert got and got[-1].startswith("m099")
            assert skipped.count + len(got) == 100 == skipped.count + bob.stats()["caught_up"]
            assert bob.stats()["lost"] == skipped.count
            await ga.send("welcome back")
            assert (await gb.receive(timeout=WAIT)).text == "welcome back"
            assert not any(isinstance(e, MemberLeft) and e.pid == "bob"
                           for e in list(bob._events))  # it never left its group
            await bob.close()
    finally:
        for d in hosts:
            await d.close()

