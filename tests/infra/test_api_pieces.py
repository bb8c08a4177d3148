"""Frames larger than the cell's MTU travel in pieces and come out whole, through the
public API (docs/decisions.md, "Cell frames never rely on IP fragmentation"). The
cells are on loopback, whose MTU (65,536) needs no pieces: ``cell_mtu`` sets the
smallest MTU an IPv4 link may have, so every message here is cut."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.infra.config import InfraConfig
from m2mc.infra.pieces import MIN_CELL_MTU
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings
from m2mc.infra_runtime.net import cell_datagram_limit, fitted_to_cell

BASE = 17000 + (os.getpid() % 400) * 2
CELLS = [f"udp-multicast://239.255.61.{1 + os.getpid() % 200}:{BASE + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(1)]
BACKBONE = ("127.0.0.1", BASE + 10)
SMALL = InfraConfig(cell_mtu=MIN_CELL_MTU)


@pytest.fixture
async def host() -> AsyncIterator[HostDriver]:
    d = HostDriver(HostSettings("H0", BACKBONE, CELLS[0], ("127.0.0.1", 0), [], config=SMALL))
    await d.start()
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while d.core is None or d.core.coordinator is None:
        assert loop.time() < end, "no coordinator elected"
        await asyncio.sleep(0.05)
    yield d
    await d.close()


def test_the_limit_follows_the_interface_or_the_setting() -> None:
    assert cell_datagram_limit("127.0.0.1") == 65_507  # loopback's 65,536, capped
    assert cell_datagram_limit("127.0.0.1", 1500) == 1472
    assert fitted_to_cell(InfraConfig(), "127.0.0.1").max_datagram == 8192  # as set
    assert fitted_to_cell(InfraConfig(cell_mtu=1500), "127.0.0.1").max_datagram == 1172


async def test_messages_larger_than_a_packet_arrive_whole_in_order(host: HostDriver) -> None:
    bodies = [bytes([i]) * size for i, size in enumerate((100, 3000, 20_000, 59_000, 700))]
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS), infra=SMALL)
    async with Node(cfg, pid="alice") as alice, Node(cfg, pid="bob") as bob:
        ga = await alice.create_group("big", order="total")
        gb = await bob.join("big", order="total", timeout=10)
        for body in bodies:
            await ga.send(body)
        got = [(await gb.receive(timeout=20)).data for _ in bodies]
        assert got == bodies
        stats = bob.stats()
        assert stats["frames_put_together"] >= 3  # what the host relayed, in pieces
        assert alice.stats()["frames_in_pieces"] >= 3  # what alice sent, in pieces
        assert stats["pieces_refused"] == 0
    counters = host.stats()
    assert counters["frames_in_pieces"] >= 3 and counters["frames_put_together"] >= 3
