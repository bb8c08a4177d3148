"""Each channel kind moves datagrams as its URL says; bounds and closing behave."""

from __future__ import annotations

import asyncio
import socket

import pytest

from m2mc.errors import ConfigError
from m2mc.transport.channel import ChannelClosedError
from m2mc.transport.udp import UdpChannel
from m2mc.transport.url import open_channel

DEADLINE = 5.0


async def recv(channel: object, timeout: float = DEADLINE) -> bytes:
    return await asyncio.wait_for(channel.recv(), timeout)  # type: ignore[attr-defined]


async def test_multicast_reaches_every_member_including_the_sender(mcast_url: str) -> None:
    async with open_channel(mcast_url) as a, open_channel(mcast_url) as b:
        await a.send(b"one")
        assert await recv(a) == b"one"  # loopback
        assert await recv(b) == b"one"
        assert a.stats.datagrams_out == 1 and b.stats.datagrams_in == 1


async def test_multicast_groups_on_the_same_port_do_not_mix(mcast_url: str) -> None:
    port = mcast_url.split(":")[2].split("?")[0]
    other = f"udp-multicast://239.255.250.251:{port}"
    async with open_channel(mcast_url) as a, open_channel(other) as b:
        await b.send(b"for b only")
        await a.send(b"for a only")
        assert await recv(b) == b"for b only"
        assert await recv(a) == b"for a only"
        assert a.stats.datagrams_in == 1 and b.stats.datagrams_in == 1


async def test_multicast_on_an_interface_we_do_not_have_is_a_config_error() -> None:
    channel = open_channel("udp-multicast://239.255.3.3:40001?iface=127.0.0.1&ttl=1")
    await channel.start()
    await channel.close()
    bad = open_channel("udp-multicast://239.255.3.3:40001?iface=255.255.255.255")
    with pytest.raises(ConfigError, match="cannot join"):
        await bad.start()


async def test_udp_unicast_to_peer_list_without_loopback() -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port_b = probe.getsockname()[1]
    probe.close()
    b = open_channel(f"udp://127.0.0.1:1?bind=127.0.0.1:{port_b}")
    async with b:
        a = open_channel(f"udp://127.0.0.1:{port_b}")
        async with a:
            assert isinstance(a, UdpChannel)
            await a.send(b"hi")
            assert await recv(b) == b"hi"
            assert not a.loops_back and a.stats.datagrams_in == 0


async def test_udp_skips_itself_in_the_peer_list() -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    async with open_channel(f"udp://127.0.0.1:{port}?bind=127.0.0.1:{port}") as channel:
        await channel.send(b"x")
        with pytest.raises(TimeoutError):
            await recv(channel, timeout=0.2)


async def test_mem_bus_is_per_name() -> None:
    async with open_channel("mem://t1") as a, open_channel("mem://t1") as b, \
            open_channel("mem://t2") as c:
        await a.send(b"d")
        assert await recv(a) == b"d" and await recv(b) == b"d"
        assert c.stats.datagrams_in == 0


async def test_null_discards() -> None:
    async with open_channel("null://") as channel:
        await channel.send(b"gone")
        assert channel.stats.datagrams_out == 1
        with pytest.raises(TimeoutError):
            await recv(channel, timeout=0.05)


async def test_inbox_bound_drops_newest_and_counts() -> None:
    async with open_channel("mem://bounded", max_inbound=3) as channel:
        for index in range(10):
            await channel.send(bytes([index]))
        assert await channel.recv_many() == [b"\x00", b"\x01", b"\x02"]
        assert channel.stats.dropped_inbound == 7


async def test_closed_channel_raises_for_readers_and_writers() -> None:
    channel = open_channel("mem://closing")
    await channel.start()
    reader = asyncio.ensure_future(channel.recv())
    await asyncio.sleep(0)
    await channel.close()
    with pytest.raises(ChannelClosedError):
        await asyncio.wait_for(reader, DEADLINE)
    with pytest.raises(ChannelClosedError):
        await channel.send(b"late")
    with pytest.raises(ChannelClosedError):
        await channel.start()


async def test_multicast_inbox_bound_counts_what_it_drops(mcast_url: str) -> None:
    async with open_channel(mcast_url) as sender, \
            open_channel(mcast_url, max_inbound=3) as small:
        for index in range(10):
            await sender.send(bytes([index]))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        while small.stats.datagrams_in < 10 and loop.time() < deadline:
            await asyncio.sleep(0.005)
        assert small.stats.datagrams_in == 10 and small.stats.dropped_inbound == 7
        assert await small.recv_many() == [b"\x00", b"\x01", b"\x02"]


async def test_a_sink_gets_queued_and_new_datagrams_pushed(mcast_url: str) -> None:
    async with open_channel(mcast_url) as sender, open_channel(mcast_url) as receiver:
        await sender.send(b"queued")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        while receiver.stats.datagrams_in < 1 and loop.time() < deadline:
            await asyncio.sleep(0.005)
        pushed: list[bytes] = []
        assert receiver.set_sink(pushed.extend)
        assert pushed == [b"queued"]  # what waited in the inbox is handed over
        await sender.send(b"pushed")
        while len(pushed) < 2 and loop.time() < deadline:
            await asyncio.sleep(0.005)
        assert pushed == [b"queued", b"pushed"]
        assert not open_channel("mem://no-sink").set_sink(pushed.extend)


async def test_poll_returns_what_the_socket_holds_without_waiting(mcast_url: str) -> None:
    async with open_channel(mcast_url) as channel:
        assert channel.poll() == []
        await channel.send(b"mine")  # on Linux loopback the copy is back when sendto returns
        got = channel.poll()
        if not got:  # a kernel that loops back later: it comes through the reader instead
            got = await asyncio.wait_for(channel.recv_many(), DEADLINE)
        assert got == [b"mine"]


async def test_send_many_and_poll_many_keep_order(mcast_url: str) -> None:
    datagrams = [b"d%d" % i for i in range(10)]
    async with open_channel(mcast_url) as sender, open_channel(mcast_url) as other:
        assert sender.poll(5) == []
        assert sender.send_many_nowait(datagrams) == 10
        assert sender.stats.datagrams_out == 10
        got: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        while len(got) < 10:  # poll takes what the socket holds, at most the limit each time
            batch = sender.poll(4)
            assert len(batch) <= 4
            got.extend(batch)
            if not batch:
                got.extend(sender.recv_nowait())
                assert loop.time() < deadline
                await asyncio.sleep(0.002)
        assert got == datagrams
        assert [await recv(other) for _ in datagrams] == datagrams


async def test_default_send_many_stops_at_the_first_datagram_that_would_wait() -> None:
    async with open_channel("null://") as channel:
        assert channel.send_many_nowait([b"a", b"b"]) == 2

    class Choosy(type(channel)):  # type: ignore[misc]
        def send_nowait(self, datagram: bytes) -> bool:
            return datagram != b"wait"

    choosy = Choosy("null://")
    assert choosy.send_many_nowait([b"a", b"wait", b"c"]) == 1
