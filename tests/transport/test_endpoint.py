"""M2MPEndpoint: the asyncio driver of the M2MP layer, over mem://, multicast and udp."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Callable

import pytest
from gated_channel import GatedChannel

from m2mc.errors import UsageError
from m2mc.runtime.endpoint import M2MPEndpoint, MessageAbandonedError
from m2mc.transport.channel import ChannelClosedError
from m2mc.transport.url import open_channel
from m2mc.wire.m2mp import M2MPConfig, MessageAbandoned
from m2mc.wire.packet import MAX_DATAGRAM, MAX_FRAGMENT, fragments

DEADLINE = 5.0


async def until(condition: Callable[[], bool], timeout: float = DEADLINE) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not reached before the deadline")
        await asyncio.sleep(0.002)


async def test_send_and_receive_over_mem_never_to_self() -> None:
    async with M2MPEndpoint("mem://e1", filters=[b""]) as a, \
            M2MPEndpoint("mem://e1", filters=[b""]) as b:
        big = random.Random(1).randbytes(64 * 1024)
        ids = [await a.send(b"small"), await a.send(big), await b.send(b"from b")]
        got_b = [await asyncio.wait_for(b.receive(), DEADLINE) for _ in range(2)]
        assert [(m.message_id, m.payload) for m in got_b] == [(ids[0], b"small"), (ids[1], big)]
        got_a = await asyncio.wait_for(a.receive(), DEADLINE)
        assert (got_a.message_id, got_a.payload) == (ids[2], b"from b")
        await until(lambda: a.stats["looped_back"] == 2 * (1 + 132))
        assert a.stats["messages_in"] == 1 and b.stats["messages_in"] == 2
        assert a.stats["flow_timeouts"] == 0


async def test_multicast_endpoints_with_flow_control(mcast_url: str) -> None:
    async with M2MPEndpoint(mcast_url, filters=[b""]) as a, \
            M2MPEndpoint(mcast_url, filters=[b""]) as b:
        assert a.config.flow_control
        payloads = [bytes([i]) * (i * 700) for i in range(20)]
        for payload in payloads:
            await a.send(payload)
        got = [(await asyncio.wait_for(b.receive(), DEADLINE)).payload for _ in payloads]
        assert got == payloads


async def test_flow_control_is_off_on_channels_without_loopback() -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    async with M2MPEndpoint(f"udp://127.0.0.1:1?bind=127.0.0.1:{port}", filters=[b""]) as b, \
            M2MPEndpoint(f"udp://127.0.0.1:{port}", M2MPConfig(flow_control=True)) as a:
        assert not a.config.flow_control
        await a.send(bytes(10 * MAX_FRAGMENT))
        assert a.stats["send_backlog"] == 0  # everything left at once
        assert (await asyncio.wait_for(b.receive(), DEADLINE)).payload == bytes(10 * MAX_FRAGMENT)


async def test_filters_can_be_added_and_removed_while_running() -> None:
    async with M2MPEndpoint("mem://e2") as sender, M2MPEndpoint("mem://e2") as receiver:
        await sender.send(b"before any filter")
        receiver.add_filter(b"a:")
        receiver.add_filter(b"b:")
        for payload in (b"a:1", b"c:2", b"b:3"):
            await sender.send(payload)
        got = [(await asyncio.wait_for(receiver.receive(), DEADLINE)).payload for _ in range(2)]
        assert got == [b"a:1", b"b:3"]
        receiver.remove_filter(b"a:")
        await sender.send(b"a:4")
        await sender.send(b"b:5")
        assert (await asyncio.wait_for(receiver.receive(), DEADLINE)).payload == b"b:5"
        assert receiver.filters == (b"b:",)
        assert receiver.stats["filtered_out"] == 3  # before any filter, c:2, a:4


async def test_send_blocks_when_the_send_queue_is_full() -> None:
    channel = GatedChannel()
    config = M2MPConfig(redundancy=1)
    async with M2MPEndpoint(channel, config, max_send_queue=4) as endpoint:
        await endpoint.send(bytes(3 * MAX_FRAGMENT))  # 3 packets queued: fits
        blocked = asyncio.ensure_future(endpoint.send(bytes(3 * MAX_FRAGMENT)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not blocked.done()
        assert endpoint.stats["send_backlog"] == 3
        channel.gate.set()
        await asyncio.wait_for(blocked, DEADLINE)
        await asyncio.wait_for(endpoint.drain(), DEADLINE)
        assert len(channel.sent) == 6
        assert endpoint.stats.get("send_backlog") == 0


async def test_a_message_larger_than_the_queue_still_goes_when_the_queue_is_empty() -> None:
    channel = GatedChannel()
    channel.gate.set()
    async with M2MPEndpoint(channel, M2MPConfig(redundancy=1), max_send_queue=2) as endpoint:
        await asyncio.wait_for(endpoint.send(bytes(10 * MAX_FRAGMENT)), DEADLINE)
        await asyncio.wait_for(endpoint.drain(), DEADLINE)
        assert len(channel.sent) == 10


async def test_send_larger_than_max_message_bytes_is_refused() -> None:
    async with M2MPEndpoint("null://", M2MPConfig(max_message_bytes=100)) as endpoint:
        with pytest.raises(UsageError, match="max_message_bytes"):
            await endpoint.send(bytes(101))


async def test_abandoned_message_is_reported_to_the_reader() -> None:
    async with M2MPEndpoint("mem://e3", M2MPConfig(message_timeout=0.05),
                            filters=[b""]) as receiver, open_channel("mem://e3") as raw:
        packets = list(fragments(1234, b"x" * (3 * MAX_FRAGMENT)))
        await raw.send(packets[0])
        await raw.send(packets[1])  # the last fragment never comes
        with pytest.raises(MessageAbandonedError) as caught:
            await asyncio.wait_for(receiver.receive(), DEADLINE)
        assert caught.value.event == MessageAbandoned(1234, "timeout", 2 * MAX_FRAGMENT)
        assert receiver.stats["partial_messages"] == 0


async def test_malformed_datagrams_are_counted_and_dropped() -> None:
    async with M2MPEndpoint("mem://e4", filters=[b""]) as receiver, \
            open_channel("mem://e4") as raw:
        for junk in (b"", b"short", bytes(MAX_DATAGRAM + 1)):  # (509 bytes is a packet now)
            await raw.send(junk)
        await raw.send(next(fragments(9, b"fine")))
        assert (await asyncio.wait_for(receiver.receive(), DEADLINE)).payload == b"fine"
        assert receiver.stats["malformed"] == 3


async def test_receive_queue_bound_drops_the_oldest() -> None:
    async with M2MPEndpoint("mem://e5") as sender, \
            M2MPEndpoint("mem://e5", filters=[b""], max_receive_queue=2) as receiver:
        for index in range(5):
            await sender.send(bytes([index]))
        await until(lambda: receiver.stats["messages_in"] == 5)
        assert receiver.receive_overflow == 3
        got = [(await receiver.receive()).payload for _ in range(2)]
        assert got == [b"\x03", b"\x04"]


async def test_async_iteration_ends_when_the_endpoint_closes() -> None:
    async with M2MPEndpoint("mem://e6") as sender:
        receiver = M2MPEndpoint("mem://e6", filters=[b""])
        await receiver.start()
        await sender.send(b"1")
        await sender.send(b"2")
        got: list[bytes] = []

        async def collect() -> None:
            async for message in receiver:
                got.append(message.payload)
                if len(got) == 2:
                    await receiver.close()

        await asyncio.wait_for(collect(), DEADLINE)
        assert got == [b"1", b"2"]
        with pytest.raises(ChannelClosedError):
            await receiver.send(b"after close")


async def test_using_an_endpoint_before_start_is_a_usage_error() -> None:
    endpoint = M2MPEndpoint("null://")
    with pytest.raises(UsageError, match="not started"):
        await endpoint.send(b"x")
