"""``packet=`` on channel URLs: parsing, the one-line errors, what the channels and the
endpoint do with it, and nodes of different packet sizes on one channel."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys

import pytest

from m2mc.errors import ConfigError
from m2mc.runtime.endpoint import DEFAULT_FLOW_WINDOW, M2MPEndpoint, flow_window_for, window_at
from m2mc.transport.channel import DEFAULT_MAX_INBOUND_BYTES
from m2mc.transport.multicast import MulticastChannel
from m2mc.transport.offload import SOL_UDP, UDP_SEGMENT, run_end, segments_per_send
from m2mc.transport.url import (
    MemSpec,
    MulticastSpec,
    UdpSpec,
    format_channel_url,
    open_channel,
    parse_channel_url,
)
from m2mc.wire.m2mp import M2MPConfig
from m2mc.wire.packet import MAX_DATAGRAM, MAX_PACKET

DEADLINE = 10.0


@pytest.mark.parametrize(("url", "spec"), [
    ("udp-multicast://239.255.1.2:4000?packet=1472",
     MulticastSpec("239.255.1.2", 4000, packet=1472)),
    ("udp-multicast://239.255.1.2:4000?iface=127.0.0.1&ttl=1&packet=65507&offload=0",
     MulticastSpec("239.255.1.2", 4000, offload=False, packet=65507)),
    ("udp://127.0.0.1:5000?packet=9000", UdpSpec((("127.0.0.1", 5000),), packet=9000)),
    ("mem://bus?packet=508", MemSpec("bus")),
    ("mem://bus?packet=65000", MemSpec("bus", 65000)),
    ("udp-multicast://239.255.1.2:4000", MulticastSpec("239.255.1.2", 4000)),
])
def test_packet_parses_and_round_trips(url: str, spec: object) -> None:
    assert parse_channel_url(url) == spec
    assert parse_channel_url(format_channel_url(spec)) == spec  # type: ignore[arg-type]
    if spec == MulticastSpec("239.255.1.2", 4000):  # the default: no packet= written
        assert "packet" not in format_channel_url(spec)


@pytest.mark.parametrize(("url", "fault"), [
    ("udp-multicast://239.255.1.2:4000?packet=507", "packet must be in 508..65507, got 507"),
    ("udp-multicast://239.255.1.2:4000?packet=65508", "packet must be in 508..65507, got 65508"),
    ("udp://127.0.0.1:5000?packet=0", "packet must be in 508..65507"),
    ("udp://127.0.0.1:5000?packet=1.5k", "packet must be an integer, got '1.5k'"),
    ("mem://bus?packet=", "packet must be an integer"),
    ("mem://bus?packet=600&rcvbuf=9", "unexpected parameter(s) rcvbuf"),
    ("daemon://127.0.0.1:5678?packet=1472", "unexpected parameter(s) packet"),
    ("udp-multicast://239.255.1.2:4000?packet=1472&packet=1472", "'packet' given twice"),
])
def test_a_bad_packet_is_a_one_line_config_error(url: str, fault: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_channel_url(url)
    assert fault in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_packet_on_the_command_line_exits_2_with_one_line() -> None:
    for command in ("send", "listen"):
        done = subprocess.run(
            [sys.executable, "-m", "m2mc.cli", command, "--channel",
             "udp-multicast://239.255.1.2:4000?packet=100"],
            input=b"x", capture_output=True, timeout=60, check=False)
        assert done.returncode == 2
        err = done.stderr.decode()
        assert err.count("\n") == 1 and "packet must be in 508..65507, got 100" in err


async def test_the_endpoint_sends_at_the_channels_packet_size() -> None:
    """Over mem://, the datagrams a sender set to 1472 puts on the bus are 1472 bytes
    (the last shorter), and a node at the default size reads them; and back."""
    async with M2MPEndpoint("mem://ps1?packet=1472", filters=[b""]) as big, \
            M2MPEndpoint("mem://ps1", filters=[b""]) as small:
        tap = open_channel("mem://ps1")
        await tap.start()
        assert big.config.packet_size == 1472 and small.config.packet_size == MAX_PACKET
        assert big.config.flow_window == window_at(DEFAULT_FLOW_WINDOW, 1472)
        payload = random.Random(1).randbytes(64 * 1024)
        mid = await big.send(payload)
        got = await asyncio.wait_for(small.receive(), DEADLINE)
        assert (got.message_id, got.payload) == (mid, payload)
        mid = await small.send(payload)
        got = await asyncio.wait_for(big.receive(), DEADLINE)
        assert (got.message_id, got.payload) == (mid, payload)
        sizes = [len(d) for d in tap.recv_nowait(10_000)]
        assert max(sizes) == 1472 and sizes.count(1472) >= 44 and MAX_PACKET in sizes
        await tap.close()


async def test_a_configured_size_and_a_different_url_size_are_refused() -> None:
    with pytest.raises(ConfigError, match="name it in one place"):
        M2MPEndpoint("mem://ps2?packet=1472", M2MPConfig(packet_size=9000))
    endpoint = M2MPEndpoint("mem://ps2", M2MPConfig(packet_size=9000))
    assert endpoint.config.packet_size == 9000


def test_a_flow_window_holds_about_the_same_bytes_at_any_packet_size() -> None:
    assert window_at(64, MAX_PACKET) == 64
    assert window_at(64, 1472) == 22
    assert window_at(64, 65_000) == 1
    assert flow_window_for(None, 1472) == 22
    assert flow_window_for(4 << 20, MAX_PACKET) == 256 > flow_window_for(4 << 20, 9000)


async def test_the_inbox_is_bounded_in_bytes_as_well_as_in_datagrams() -> None:
    """Without a sink, arrivals wait in the inbox: 8192 datagrams of up to 65,507 bytes
    would be half a gigabyte, so it also stops at DEFAULT_MAX_INBOUND_BYTES, dropping
    (and counting) the newest as at its count bound."""
    sender, receiver = open_channel("mem://ps3"), open_channel("mem://ps3")
    await sender.start()
    await receiver.start()
    big = b"\x05" * MAX_DATAGRAM
    total = 2 * DEFAULT_MAX_INBOUND_BYTES // MAX_DATAGRAM
    for _ in range(total):
        sender.send_nowait(big)
    receiver._deliver_many([big] * 100)  # a batch read, as the socket channels hand over
    held = receiver.recv_nowait(1 << 20)
    assert sum(map(len, held)) <= DEFAULT_MAX_INBOUND_BYTES
    assert len(held) == DEFAULT_MAX_INBOUND_BYTES // MAX_DATAGRAM
    assert receiver.stats.dropped_inbound == total + 100 - len(held)
    receiver._deliver_many([b"small"] * 3)  # room again once read
    assert receiver.recv_nowait() == [b"small"] * 3
    await sender.close()
    await receiver.close()


@pytest.mark.parametrize(("packet", "joined"), [(1472, 44), (32_753, 2), (32_754, 1),
                                               (65_000, 1)])
async def test_a_multicast_channel_joins_sends_of_its_packet_size(
        mcast_url: str, packet: int, joined: int) -> None:
    """Joined sends (GSO) cut at the channel's packet size, as many per send as one
    UDP datagram carries (none past 32,753 bytes); a reader at the default size
    (GRO on) gets every packet whole, cut at the sender's size."""
    assert segments_per_send(packet) == joined
    async with open_channel(f"{mcast_url}&packet={packet}") as big, \
            open_channel(mcast_url) as small:
        assert isinstance(big, MulticastChannel) and isinstance(small, MulticastChannel)
        assert big.packet_size == packet and big.gso == (joined > 1) and small.gro
        if big.gso:
            assert big._sock is not None
            assert big._sock.getsockopt(SOL_UDP, UDP_SEGMENT) == packet
        count = min(100, 2 * MAX_DATAGRAM // packet)
        packets = [bytes([i]) * packet for i in range(count)] + [b"end"]
        assert big.send_many_nowait(packets) == len(packets)
        got: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        while len(got) < len(packets) and loop.time() < deadline:
            got += await asyncio.wait_for(small.recv_many(), DEADLINE)
        assert got == packets


def test_a_run_to_join_is_of_full_packets_of_the_packet_size() -> None:
    datagrams = [bytes(1472)] * 50 + [bytes(100), bytes(1472)]
    assert run_end(datagrams, 0, 1472, segments_per_send(1472)) == 44
    assert run_end(datagrams, 44, 1472, segments_per_send(1472)) == 51  # 6 full + the short
    assert run_end([bytes(508)] * 3, 0, 1472, 44) == 1  # not full at 1472: one alone


async def test_endpoints_of_three_sizes_on_one_multicast_channel(mcast_url: str) -> None:
    """508, 1472 and 65,000-byte nodes on real loopback multicast: each one's messages
    (small, 64 KiB, 200 KB) reach the other two whole."""
    rng = random.Random(7)
    urls = [mcast_url, mcast_url + "&packet=1472", mcast_url + "&packet=65000"]
    endpoints = [M2MPEndpoint(url, filters=[b""]) for url in urls]
    for endpoint in endpoints:
        await endpoint.start()
    try:
        messages = [b"hello", rng.randbytes(64 * 1024), rng.randbytes(200_000)]
        for index, endpoint in enumerate(endpoints):
            ids = [await endpoint.send(m) for m in messages]
            await endpoint.drain()
            for other in endpoints[:index] + endpoints[index + 1:]:
                got = [await asyncio.wait_for(other.receive(), DEADLINE) for _ in messages]
                assert sorted((m.message_id, m.payload) for m in got) == sorted(
                    zip(ids, messages, strict=True))
    finally:
        for endpoint in endpoints:
            await endpoint.close()


def test_packet_is_bounded_by_what_udp_carries() -> None:
    assert MAX_DATAGRAM == 65_535 - 20 - 8


def test_a_cell_url_of_infrastructure_mode_refuses_packet() -> None:
    """Infrastructure mode's cells carry its own frames, not M2MP: packet= would be
    silently meaningless there, so it is an error."""
    from m2mc.infra_runtime.net import multicast_spec

    assert multicast_spec("udp-multicast://239.255.1.2:4000").packet == MAX_PACKET
    with pytest.raises(ConfigError, match="infrastructure mode does not use M2MP"):
        multicast_spec("udp-multicast://239.255.1.2:4000?packet=1472")
