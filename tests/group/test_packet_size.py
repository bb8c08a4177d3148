"""A group whose members send at different M2MP packet sizes (``packet=`` on the
channel URL, docs/m2mp.md "Packet size"): the group layer runs on top unchanged."""

from __future__ import annotations

import random
import uuid

from m2mc.api import Node, NodeConfig


async def test_members_at_508_1472_and_65000_bytes_share_a_group() -> None:
    bus = f"mem://ps-{uuid.uuid4().hex[:8]}"
    urls = {"a": bus, "b": f"{bus}?packet=1472", "c": f"{bus}?packet=65000"}
    rng = random.Random(4)
    async with Node(NodeConfig(pid="a", channel=urls["a"])) as a, \
            Node(NodeConfig(pid="b", channel=urls["b"])) as b, \
            Node(NodeConfig(pid="c", channel=urls["c"])) as c:
        assert [n._stack.m2mp.config.packet_size for n in (a, b, c)] == [508, 1472, 65000]
        group = await a.create_group("sizes", order="total")
        groups = {"a": group, "b": await b.join(group.gid, timeout=5.0),
                  "c": await c.join(group.gid, timeout=5.0)}
        sent = []
        for pid in ("c", "b", "a"):
            for size in (10, 3000, 60_000):
                data = rng.randbytes(size)
                await groups[pid].send(data)
                sent.append((pid, data))
        for pid, member in groups.items():
            got = [await member.receive(timeout=10.0) for _ in sent]
            assert sorted((m.sender, m.data) for m in got) == sorted(sent), pid
            # total order: every member delivers them in one order
            if pid == "a":
                order = [(m.sender, m.data) for m in got]
            else:
                assert [(m.sender, m.data) for m in got] == order
