"""``await node.sync()``: what ``send`` returned for is in the durable log once it
returns, so a process killed after it keeps those messages under their identities;
``send`` alone returns before the write (docs/api.md, docs/group.md section 8).

The kill is the driver closed under the node, as tests/group/test_trace_journal.py
does: no output step runs after it and nothing is committed or closed cleanly."""

from __future__ import annotations

import uuid
from pathlib import Path

from m2mc.api import Node, NodeConfig


def _config(tmp_path: Path) -> NodeConfig:
    return NodeConfig(pid="a", channel=f"mem://sync-{uuid.uuid4().hex[:8]}",
                      data_dir=str(tmp_path / "a"))


async def _crash(node: Node) -> None:
    await node._drv().close()  # type: ignore[attr-defined]  # (the process is gone)


async def test_what_sync_saw_survives_a_kill(tmp_path: Path) -> None:
    config = _config(tmp_path)
    node = Node(config)
    await node.start()
    group = await node.create_group("sync")
    sent = [str(await group.send(f"m{i}")) for i in range(5)]
    await node.sync()
    await _crash(node)
    async with Node(config) as again:
        assert [str(m.mid) for m in again.history(group.gid)] == sent
        assert [m.text for m in again.history(group.gid)] == [f"m{i}" for i in range(5)]
        g = await again.join(group.gid)
        assert str(await g.send("next")) == "a:6"  # numbered on, none reused


async def test_without_sync_a_kill_right_after_send_keeps_out_what_nobody_saw(
        tmp_path: Path) -> None:
    config = _config(tmp_path)
    node = Node(config)
    await node.start()
    group = await node.create_group("sync")
    await group.send("kept")
    await node.sync()
    assert str(await group.send("lost")) == "a:2"
    await _crash(node)  # before the loop's next turn: a:2 was never written nor sent
    async with Node(config) as again:
        assert [m.text for m in again.history(group.gid)] == ["kept"]
        g = await again.join(group.gid)
        assert str(await g.send("next")) == "a:2"  # the unseen number goes to the next


async def test_sync_without_a_data_dir_returns_at_once() -> None:
    async with Node(NodeConfig(channel=f"mem://sync-{uuid.uuid4().hex[:8]}")) as node:
        group = await node.create_group("sync")
        await group.send("x")
        await node.sync()
        assert [m.text for m in node.history(group.gid)] == ["x"]
