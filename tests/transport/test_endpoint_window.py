"""M2MPEndpoint flow control: a window of packets in flight, each with its flow timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from m2mc.runtime.endpoint import (
    DEFAULT_FLOW_WINDOW,
    MAX_FLOW_WINDOW,
    M2MPEndpoint,
    flow_window_for,
)
from m2mc.transport.channel import Channel
from m2mc.wire.m2mp import M2MPConfig
from m2mc.wire.packet import MAX_FRAGMENT, decode

DEADLINE = 5.0


class DeafChannel(Channel):
    """Claims to loop datagrams back but never does: every loopback is lost."""

    def __init__(self) -> None:
        super().__init__("deaf://")
        self.sent: list[tuple[int, bytes]] = []
        # What the sender had counted when each datagram left (its flow timeouts, say)
        self.count_at_send: Callable[[], int] = lambda: 0

    @property
    def loops_back(self) -> bool:
        return True

    async def _open(self) -> None:
        return None

    def _shutdown(self) -> None:
        return None

    def send_nowait(self, datagram: bytes) -> bool:
        self.sent.append((self.count_at_send(), datagram))
        return True

    async def send(self, datagram: bytes) -> None:
        self.send_nowait(datagram)


async def until(condition: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not condition():
        assert loop.time() < deadline, "condition not reached before the deadline"
        await asyncio.sleep(0.002)


async def test_the_endpoint_runs_a_window_unless_the_configuration_sets_one() -> None:
    async with M2MPEndpoint("mem://w1") as default, \
            M2MPEndpoint("mem://w1", M2MPConfig(flow_window=1)) as seed:
        assert default.config.flow_window == DEFAULT_FLOW_WINDOW > 1
        assert seed.config.flow_window == 1


def test_the_window_grows_with_the_receive_buffer_between_its_bounds() -> None:
    assert flow_window_for(None) == flow_window_for(0) == DEFAULT_FLOW_WINDOW == 64
    assert flow_window_for(425_984) == 64  # Linux's default 208 KiB, as the kernel reports it
    assert flow_window_for(1 << 20) == 128
    assert flow_window_for(8 << 20) == flow_window_for(1 << 30) == MAX_FLOW_WINDOW == 256


async def test_an_endpoint_keeps_the_default_window_whatever_its_socket(
        mcast_url: str) -> None:
    async with M2MPEndpoint(mcast_url) as endpoint:
        assert endpoint.config.flow_window == DEFAULT_FLOW_WINDOW


async def test_lost_loopbacks_cost_one_flow_timeout_per_window_and_nothing_else() -> None:
    channel = DeafChannel()
    config = M2MPConfig(flow_window=8, flow_timeout=0.05, redundancy=1)
    async with M2MPEndpoint(channel, config) as endpoint:
        channel.count_at_send = lambda: cast(int, endpoint.stats["flow_timeouts"])
        await endpoint.send(bytes(20 * MAX_FRAGMENT))
        assert len(channel.sent) == 8  # the window, then nothing until the flow timeout
        await until(lambda: len(channel.sent) == 20)
        assert [decode(d).fragment for _, d in channel.sent] == list(range(20))
        # Each packet past the window left only once an earlier one's flow timeout had
        # freed its place: the n-th beyond the window, after at least n timeouts.
        timeouts_when_sent = [count for count, _ in channel.sent]
        assert timeouts_when_sent[:8] == [0] * 8
        assert all(timeouts_when_sent[i] >= i - 7 for i in range(8, 20))
        await until(lambda: endpoint.stats["flow_timeouts"] == 20)


async def test_multicast_sender_with_a_window_delivers_everything_in_order(
        mcast_url: str) -> None:
    async with M2MPEndpoint(mcast_url, filters=[b""]) as receiver, \
            M2MPEndpoint(mcast_url, M2MPConfig(flow_window=4, redundancy=2)) as sender:
        payloads = [bytes([i]) * (i * 300) for i in range(30)]
        for payload in payloads:
            await sender.send(payload)
        got = [(await asyncio.wait_for(receiver.receive(), DEADLINE)).payload
               for _ in payloads]
        assert got == payloads
        await until(lambda: sender.stats["looped_back"] == sender.stats["packets_out"])
        assert sender.stats["flow_timeouts"] == 0 and sender.stats["messages_in"] == 0
