"""The daemon's two buffers that others can fill (docs/security.md, bounds table):
bytes unsent to one slow local process, and datagrams waiting for the network.

A slow or stuck client must not grow the daemon's memory nor cost the other
clients anything; a stalled network must not grow the daemon's memory nor
stop local delivery.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Callable

from gated_channel import GatedChannel

from m2mc.runtime.daemon import M2MPDaemon
from m2mc.transport.channel import Channel
from m2mc.transport.frames import MAX_FRAME
from m2mc.transport.url import open_channel

DEADLINE = 10.0
DATAGRAM = 500  # a full-sized M2MP packet, give or take


def _datagram(index: int) -> bytes:
    return index.to_bytes(4, "big") + bytes(DATAGRAM - 4)


async def _until(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not condition():
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def _read_until(channel: Channel, got: list[bytes], count: int) -> None:
    """Read from ``channel`` into ``got`` until it holds ``count`` datagrams."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while len(got) < count:
        assert loop.time() < end, f"timed out: {len(got)} of {count} datagrams"
        got.extend(channel.recv_nowait(4096))
        if len(got) < count:
            await asyncio.sleep(0.005)


async def test_a_client_that_never_reads_costs_at_most_its_buffer_and_others_get_everything(
) -> None:
    limit = 64 * 1024
    network = f"mem://daemon-bounds-{uuid.uuid4().hex[:8]}"
    async with M2MPDaemon(network, port=0, max_client_buffer=limit) as daemon:
        url = f"daemon://127.0.0.1:{daemon.port}"
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(stuck, ("127.0.0.1", daemon.port))
        reader = open_channel(url)
        device = open_channel(network)  # another device on the network
        await reader.start()
        await device.start()
        try:
            await _until(lambda: daemon.stats_dict()["clients"] == 2, "both clients")
            slow = next(p for p in daemon._clients.values()
                        if p.transport is not None
                        and p.transport.get_extra_info("peername")[1]
                        == stuck.getsockname()[1])
            assert slow.transport is not None
            got: list[bytes] = []
            most_buffered = 0
            total = 8000  # 4 MB: more than the kernel's socket buffers take in
            for start in range(0, total, 50):
                for index in range(start, start + 50):
                    await device.send(_datagram(index))
                await _read_until(reader, got, start + 50)
                most_buffered = max(most_buffered, slow.transport.get_write_buffer_size())
            assert got == [_datagram(i) for i in range(total)]  # all, in order, once
            assert daemon.stats.client_overflow > 0  # datagrams for the stuck one, dropped
            assert daemon.stats_dict()["client_overflow"] == daemon.stats.client_overflow
            assert most_buffered <= limit + 2 + MAX_FRAME
        finally:
            stuck.close()
            await reader.close()
            await device.close()


async def test_datagrams_waiting_for_a_stalled_network_stop_at_the_backlog_bound() -> None:
    bound = 100
    network = GatedChannel()  # takes nothing until its gate opens
    async with M2MPDaemon(network, port=0, max_external_backlog=bound) as daemon:
        url = f"daemon://127.0.0.1:{daemon.port}"
        writer, reader = open_channel(url), open_channel(url)
        await writer.start()
        await reader.start()
        try:
            await _until(lambda: daemon.stats_dict()["clients"] == 2, "both clients")
            total = bound + 150
            for index in range(total):
                await writer.send(_datagram(index))
            got: list[bytes] = []
            await _read_until(reader, got, total)
            # Local processes get everything while the network takes nothing.
            assert got == [_datagram(i) for i in range(total)]
            # The first `bound` wait (the oldest in the writer's hands), the rest are dropped.
            assert daemon.stats.external_overflow == total - bound
            assert daemon.stats_dict()["external_overflow"] == total - bound
            assert daemon.external_backlog == bound
            network.gate.set()
            await _until(lambda: len(network.sent) == bound, "the network")
            assert network.sent == [_datagram(i) for i in range(bound)]
        finally:
            await writer.close()
            await reader.close()
