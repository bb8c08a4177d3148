"""Node.last_heard / Group.last_heard: presence from heartbeats, without messages."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.errors import UsageError
from m2mc.runtime.sync import SyncNode


async def test_a_silent_member_is_heard_from() -> None:
    channel = f"mem://heard-{uuid.uuid4().hex[:8]}"
    async with Node(NodeConfig(pid="alice", channel=channel)) as alice:
        group = await alice.create_group("quiet room")
        with pytest.raises(UsageError, match="not a member"):
            alice.last_heard("nobody/1")
        async with Node(NodeConfig(pid="bob", channel=channel)) as bob:
            await bob.join(group.gid)
            start = time.time()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10.0
            # bob sends nothing: his status heartbeats (about every second) are heard.
            while group.last_heard().get("bob", 0.0) < start + 1.0:
                assert loop.time() < deadline, group.last_heard()
                await asyncio.sleep(0.05)
            assert "alice" not in group.last_heard()   # not our own packets
            assert group.last_heard()["bob"] <= time.time()


def test_sync_facade_last_heard() -> None:
    with SyncNode(NodeConfig(pid="solo", channel=f"mem://heard-{uuid.uuid4().hex[:8]}")) as node:
        group = node.create_group("alone")
        assert group.last_heard() == {}
