"""``NodeConfig.max_queued_messages`` in infrastructure mode: a member whose
application stops reading pauses at the bound instead of growing memory, and loses
nothing (docs/api.md, docs/security.md), as an ad hoc node does.

At the bound the member core delivers no more: records wait in its bounded buffer
(mybuf, ``member_buffer``), further ones are dropped and no NACK is sent; once the
application has read the queue down to half the bound the member delivers what
waits and NACKs the rest, which the hosts still hold (a record is freed only once
every member delivered it).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator

import pytest

from m2mc.api import GroupMessage, Node, NodeConfig
from m2mc.api.infra import InfraNode
from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.ids import MemberId
from m2mc.infra.member import Delivered, MemberCore, ViewChange
from m2mc.infra.state import pack_groups
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings

B = MemberId("B", 7)
LIMIT = 20
BASE = 18000 + (os.getpid() % 300) * 4
CELLS = [f"udp-multicast://239.255.{90 + i}.{1 + os.getpid() % 200}:{BASE + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(2)]
BACKBONE = [("127.0.0.1", BASE + 2 + i) for i in range(2)]


# ------------------------------------------------------------------ the core
def _member(**cfg: object) -> MemberCore:
    core = MemberCore("A", InfraConfig(**cfg).check(), random.Random(1))  # type: ignore[arg-type]
    core.on_attach("cell", 0.0)
    core.receive(m.Beacon("G", 0, "up", "H1"), 0.0)
    mid = core.join(0.0)
    out = core.sender.outstanding
    assert out is not None
    core.receive(m.Ack("G", "A", out.rseq), 0.0)
    core.receive(m.Normals("G", (m.Record(1, 1, m.JOINED, mid, body=pack_groups(["infra"])),)),
                 0.0)
    core.drain()
    core.events()
    return core


def _rec(g: int, kind: int = m.APP) -> m.Record:
    return m.Record(g, g, kind, B, g, g, 0, f"b{g}".encode(), "infra")


def _delivered(core: MemberCore) -> list[int]:
    return [e.gseq for e in core.events() if isinstance(e, Delivered)]


def _nacks(core: MemberCore) -> list[m.NackReq]:
    return [u.message for u in core.drain() if isinstance(u.message, m.NackReq)]


def test_the_core_stops_at_the_room_it_was_given_and_nacks_nothing_while_paused() -> None:
    core = _member(member_buffer=4)
    core.make_room(core.stats.delivered + 3, 0.0)
    core.receive(m.Normals("G", tuple(_rec(g) for g in range(2, 12))), 0.0)
    assert _delivered(core) == [2, 3, 4]  # exactly the room, in order
    assert core.paused and core.stats.delivery_pauses == 1
    assert sorted(core.mybuf) == [5, 6, 7, 8]  # waiting, within member_buffer
    assert core.stats.buffer_evictions == 3  # 9, 10, 11 dropped (seen_high remembers them)
    core.receive(m.Beacon("G", 11, "up", "H1"), 0.1)
    core.on_timer(5.0)
    assert _nacks(core) == []  # no room: asking for more would only be dropped again
    core.receive(m.Normals("G", (_rec(12),)), 5.0)
    assert _delivered(core) == [] and core.stats.delivery_pauses == 1  # counted once a pause

    core.make_room(core.stats.delivered + 100, 6.0)  # the application read
    assert not core.paused
    assert _delivered(core) == [5, 6, 7, 8]
    (nack,) = _nacks(core)
    assert (nack.s1, nack.s2) == (8, 13)  # what was dropped while paused
    core.receive(m.Transfer("G", core.mid, tuple(_rec(g) for g in range(9, 13))), 6.1)  # type: ignore[arg-type]
    assert _delivered(core) == [9, 10, 11, 12]


def test_membership_changes_pass_while_the_application_has_no_room() -> None:
    core = _member()
    core.make_room(core.stats.delivered, 0.0)  # no room at all
    joined = m.Record(2, 2, m.JOINED, B, body=pack_groups(["infra"]))
    core.receive(m.Normals("G", (joined, _rec(3))), 0.0)
    events = core.events()
    assert [type(e) for e in events] == [ViewChange]  # B joined; message 3 waits
    assert core.mystable == 2 and core.paused
    core.make_room(core.stats.delivered + 1, 1.0)
    assert _delivered(core) == [3]


def test_without_a_room_given_the_core_has_no_bound() -> None:
    core = _member(member_buffer=0)
    core.receive(m.Transfer("G", core.mid, tuple(_rec(g) for g in range(2, 500))), 0.0)  # type: ignore[arg-type]
    assert len(_delivered(core)) == 498 and not core.paused


# ------------------------------------------------------------------ over the API
@pytest.fixture
async def hosts() -> AsyncIterator[list[HostDriver]]:
    drivers = [HostDriver(HostSettings(f"H{i}", BACKBONE[i], CELLS[i], ("127.0.0.1", 0),
                                       [b for j, b in enumerate(BACKBONE) if j != i]))
               for i in range(2)]
    try:
        for d in drivers:
            await d.start()
        loop = asyncio.get_running_loop()
        end = loop.time() + 20
        while not any(d.core is not None and d.core.coordinator is not None for d in drivers):
            assert loop.time() < end, "no coordinator elected"
            await asyncio.sleep(0.05)
        yield drivers
    finally:
        for d in drivers:
            await d.close()


async def test_a_member_that_stops_reading_pauses_at_the_bound_and_loses_nothing(
        hosts: list[HostDriver]) -> None:
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS))
    # A buffer smaller than half the bound: what the paused member drops must come
    # back by NACK from the hosts.
    slow = NodeConfig(mode="infra", hosts=tuple(CELLS), max_queued_messages=LIMIT,
                      infra=InfraConfig(member_buffer=4))
    async with Node(cfg, pid="writer") as writer, Node(slow, pid="reader") as reader:
        assert isinstance(reader, InfraNode) and reader.driver is not None
        core = reader.driver.core
        sent = await writer.create_group("firehose")
        mine = await reader.join("firehose", timeout=15)
        texts = [f"m{i}" for i in range(5 * LIMIT)]
        for text in texts:
            await sent.send(text)
        # The writer's own copies come back: everything was sequenced.
        assert [(await sent.receive(timeout=30)).text for _ in texts] == texts
        loop = asyncio.get_running_loop()
        end = loop.time() + 30
        most = 0
        while not (core.paused and mine.pending() == LIMIT):
            most = max(most, mine.pending())
            assert loop.time() < end, f"not paused at the bound ({mine.pending()} queued)"
            await asyncio.sleep(0.02)
        assert most <= LIMIT
        assert reader.stats()["delivery_pauses"] == 1

        # It goes on once the application read half the queue, not before.
        first = [await mine.receive(timeout=1) for _ in range(LIMIT // 2 - 1)]
        assert core.paused and mine.pending() == LIMIT // 2 + 1
        first.append(await mine.receive(timeout=1))
        assert not core.paused

        got: list[GroupMessage] = first
        while len(got) < len(texts):
            got.extend(await mine.receive_many(timeout=30))
            assert mine.pending() <= LIMIT
        assert [g.text for g in got] == texts  # every message once, in the total order
        stats = reader.stats()
        assert stats["buffer_evictions"] > 0 and stats["nacks"] > 0  # dropped, fetched again
