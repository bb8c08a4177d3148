"""``history(gid)`` of a total-order group gives each message the ``gseq`` it was
delivered with (docs/api.md): its number among messages, not its position in the
sequencing log, where membership records take positions too (docs/group.md §5).
Before the fix history() returned the position, so every gseq was off by the records
before it (found by tests/netns/test_adhoc_total_restarts.py). Also after a restart on
the same ``data_dir``, when the records come from the durable log. And in the order
they were delivered, the log's order being that of their first arrival
(m2mc.ordering.replay)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from m2mc.api import GroupConfig, GroupMessage, Node, NodeConfig

DEADLINE = 60.0
SEND = 3


def _config(pid: str, bus: str, data: Path) -> NodeConfig:
    return NodeConfig(pid=pid, channel=bus, data_dir=data / pid,
                      group=GroupConfig(sequencer_timeout=0.5))


async def test_history_numbers_total_order_messages_as_they_were_delivered(
        tmp_path: Path) -> None:
    bus = f"mem://total-history-{uuid.uuid4().hex[:8]}"
    async with Node(_config("a", bus, tmp_path)) as a, Node(_config("b", bus, tmp_path)) as b:
        ga, gb = await a.join("t", order="total"), await b.join("t", order="total")
        loop = asyncio.get_running_loop()
        end = loop.time() + DEADLINE
        while len(ga.members) < 2 or len(gb.members) < 2:
            assert loop.time() < end
            await asyncio.sleep(0.01)
        for i in range(SEND):
            await ga.send(f"a{i}")
            await gb.send(f"b{i}")
        got: list[GroupMessage] = []
        while len(got) < 2 * SEND:
            got.append(await ga.receive(timeout=DEADLINE))
        delivered = [(m.gseq, str(m.mid)) for m in got]
        assert [g for g, _ in delivered] == list(range(1, 2 * SEND + 1))
        assert [(m.gseq, str(m.mid)) for m in a.history("t")] == delivered
    async with Node(_config("a", bus, tmp_path)) as again:  # its records from the log
        assert [(m.gseq, str(m.mid)) for m in again.history("t")] == delivered
