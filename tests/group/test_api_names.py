"""Display names through the asyncio API over mem:// (docs/api.md): ``NodeConfig.name``,
``MemberJoined.name``, ``MemberNamed``, ``member_names()`` and discovered ``GrpInfo.names``."""

from __future__ import annotations

import asyncio
import uuid

from m2mc.api import Node, NodeConfig
from m2mc.group.events import GroupEvent, MemberJoined, MemberNamed

WAIT = 10.0  # generous: events are awaited, never slept for


async def next_event(node: Node, wanted: type[GroupEvent], pid: str) -> GroupEvent:
    async def find() -> GroupEvent:
        async for event in node.events():
            if isinstance(event, wanted) and getattr(event, "pid", None) == pid:
                return event
        raise AssertionError("node closed")
    return await asyncio.wait_for(find(), WAIT)


async def test_names_reach_the_api_before_anyone_writes() -> None:
    channel = f"mem://names-{uuid.uuid4().hex[:8]}"
    async with Node(NodeConfig(pid="a", channel=channel, name="Alice")) as alice:
        group = await alice.create_group("quiet")
        assert group.member_names() == {"a": "Alice"}
        async with Node(NodeConfig(pid="b", channel=channel, name="Bob")) as bob:
            [info] = await bob.discover(timeout=0.5)
            assert info.gid == group.gid and info.names == (("a", "Alice"),)
            assert info.name_of("a") == "Alice"
            joined = await bob.join(group.gid)
            assert joined.member_names() == {"a": "Alice", "b": "Bob"}
            assert await next_event(alice, MemberJoined, "b") == MemberJoined(group.gid, "b",
                                                                             "Bob")
            assert alice.member_names(group.gid) == {"a": "Alice", "b": "Bob"}
            bob.set_name("Robert")
            assert await next_event(alice, MemberNamed, "b") == MemberNamed(group.gid, "b",
                                                                           "Robert")
            assert group.member_names()["b"] == "Robert"
            assert bob.config.name == "Robert"
