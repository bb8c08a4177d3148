"""Node.last_heard / Group.last_heard: presence from heartbeats, without messages."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.api.sync import SyncNode
from m2mc.errors import UsageError
from m2mc.group.config import GroupConfig


async def test_a_silent_member_is_heard_from() -> None:
    channel = f"mem://heard-{uuid.uuid4().hex[:8]}"
    # A member whose statuses others' cover still sends one every STATUS_KEEPALIVE
    # intervals: 2 s here, well inside the 10 s this test waits.
    fast = GroupConfig(status_interval=0.2)
    async with Node(NodeConfig(pid="alice", channel=channel, group=fast)) as alice:
        group = await alice.create_group("quiet room")
        with pytest.raises(UsageError, match="not a member"):
            alice.last_heard("nobody/1")
        async with Node(NodeConfig(pid="bob", channel=channel, group=fast)) as bob:
            await bob.join(group.gid)
            start = time.time()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10.0
            # bob sends nothing: his status heartbeats are heard.
            while group.last_heard().get("bob", 0.0) < start + 1.0:
                assert loop.time() < deadline, group.last_heard()
                await asyncio.sleep(0.05)
            assert "alice" not in group.last_heard()   # not our own packets
            assert group.last_heard()["bob"] <= time.time()


def test_sync_facade_last_heard() -> None:
    with SyncNode(NodeConfig(pid="solo", channel=f"mem://heard-{uuid.uuid4().hex[:8]}")) as node:
        group = node.create_group("alone")
        assert group.last_heard() == {}
