"""UDP segmentation offload on the multicast channel (transport/offload.py).

What a user relies on: the datagrams that arrive are exactly the packets sent, in
order, whether the kernel joined them or not; anyone else on the group (a plain
socket, another implementation) still gets one datagram of at most 508 bytes per
packet; a route that refuses joined sends costs nothing but the join.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from m2mc.transport.channel import RECV_SIZE
from m2mc.transport.multicast import MulticastChannel, open_multicast_socket
from m2mc.transport.offload import (
    MAX_SEGMENTS,
    SEGMENT,
    SOL_UDP,
    UDP_GRO,
    UDP_SEGMENT,
    run_end,
    split_segments,
)
from m2mc.transport.url import MulticastSpec, format_channel_url, open_channel, parse_channel_url
from m2mc.wire.packet import MAX_DATAGRAM
from m2mc.wire.segments import Segments, segment_count, split_blocks

DEADLINE = 5.0

# Datagram sizes as M2MP makes them: mostly full packets, some shorter (a message's last).
sizes = st.lists(st.one_of(st.just(SEGMENT), st.integers(0, SEGMENT)), max_size=300)


def runs(datagrams: list[bytes]) -> list[list[bytes]]:
    out, start = [], 0
    while start < len(datagrams):
        end = run_end(datagrams, start)
        out.append(datagrams[start:end])
        start = end
    return out


@given(sizes)
def test_runs_cover_the_datagrams_in_order_and_are_what_the_kernel_accepts(
        lengths: list[int]) -> None:
    datagrams = [bytes([i % 251]) * n for i, n in enumerate(lengths)]
    cut = runs(datagrams)
    assert [d for run in cut for d in run] == datagrams
    for i, run in enumerate(cut):
        assert 1 <= len(run) <= MAX_SEGMENTS
        assert all(len(d) == SEGMENT for d in run[:-1])  # all but the last are full
        # maximal: a run ends at the limit, after a shorter packet, or at the end
        if i + 1 < len(cut):
            assert len(run) == MAX_SEGMENTS or len(run[-1]) < SEGMENT


@given(sizes)
def test_a_joined_run_read_back_with_its_segment_size_is_the_run(lengths: list[int]) -> None:
    datagrams = [bytes([i % 251]) * n for i, n in enumerate(lengths)]
    for run in runs(datagrams):
        got: list[bytes] = []
        ancillary = [(SOL_UDP, UDP_GRO, struct.pack("=i", SEGMENT))] if len(run) > 1 else []
        assert split_segments(b"".join(run), ancillary, got.append) == len(got)
        if len(run) > 1 and len(run[-1]) == 0:
            run = run[:-1]  # an empty last segment adds nothing to the joined bytes
        assert got == run


@given(sizes)
def test_with_blocks_a_read_of_full_packets_stays_joined(lengths: list[int]) -> None:
    datagrams = [bytes([i % 251]) * max(n, 1) for i, n in enumerate(lengths)]
    for run in runs(datagrams):
        got: list[bytes] = []
        ancillary = [(SOL_UDP, UDP_GRO, struct.pack("=i", SEGMENT))] if len(run) > 1 else []
        assert split_segments(b"".join(run), ancillary, got.append, blocks=True) == len(run)
        if len(run) > 1:
            assert got == [b"".join(run)] and type(got[0]) is Segments
            assert split_blocks(got) == run
        else:
            assert got == run and type(got[0]) is bytes


def test_a_read_without_a_segment_size_is_one_datagram() -> None:
    got: list[bytes] = []
    assert split_segments(b"x" * 1200, [], got.append) == 1
    assert split_segments(b"y" * 10, [(SOL_UDP, UDP_GRO, struct.pack("=i", 508))],
                          got.append) == 1
    assert got == [b"x" * 1200, b"y" * 10]


def test_offload_is_on_by_default_and_off_with_offload_0() -> None:
    spec = parse_channel_url("udp-multicast://239.255.1.2:4000?iface=127.0.0.1")
    assert isinstance(spec, MulticastSpec) and spec.offload
    off = parse_channel_url("udp-multicast://239.255.1.2:4000?iface=127.0.0.1&offload=0")
    assert isinstance(off, MulticastSpec) and not off.offload
    assert format_channel_url(off).endswith("&offload=0")
    assert "offload" not in format_channel_url(spec)
    with pytest.raises(Exception, match=r"offload must be in 0\.\.1"):
        parse_channel_url("udp-multicast://239.255.1.2:4000?offload=2")


def packets_of(count: int, size: int) -> list[bytes]:
    """``count`` messages of ``size`` bytes as M2MP packets (full ones, then the rest)."""
    out = []
    for m in range(count):
        body = bytes([m % 256]) * size
        chunks = [body[i:i + 500] for i in range(0, len(body), 500)]
        out += [struct.pack("!II", m, i | (1 << 31 if i == len(chunks) - 1 else 0)) + c
                for i, c in enumerate(chunks)]
    return out


async def read(channel: Any, count: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < count:
        got += await asyncio.wait_for(channel.recv_many(), DEADLINE)
    return got


async def test_joined_sends_arrive_as_the_packets_sent(mcast_url: str) -> None:
    datagrams = packets_of(5, 9000)  # 18 full packets and one of 8 + 8 bytes each
    async with open_channel(mcast_url) as sender, open_channel(mcast_url) as receiver:
        assert isinstance(sender, MulticastChannel)
        if not sender.gso:
            pytest.skip("this kernel has no UDP segmentation offload")
        assert isinstance(receiver, MulticastChannel) and receiver.gro
        assert sender.send_many_nowait(datagrams) == len(datagrams)
        assert sender.stats.datagrams_out == len(datagrams)
        assert await read(receiver, len(datagrams)) == datagrams
        assert await read(sender, len(datagrams)) == datagrams  # its loopback copies too
        assert receiver.stats.datagrams_in == len(datagrams)


async def test_a_sink_that_takes_blocks_gets_the_packets_joined_and_in_order(
        mcast_url: str) -> None:
    """A sink that took ``offer_blocks`` (the M2MP layer's) gets each read's full
    packets as one Segments; taken apart they are the packets sent, and the
    channel counts packets, not reads."""
    datagrams = packets_of(5, 9000)
    got: list[bytes] = []
    arrived = asyncio.Event()

    def sink(batch: list[bytes]) -> None:
        got.extend(batch)
        if sum(segment_count(d) if type(d) is Segments else 1 for d in got) >= len(datagrams):
            arrived.set()

    async with open_channel(mcast_url) as sender, open_channel(mcast_url) as receiver:
        assert isinstance(sender, MulticastChannel) and isinstance(receiver, MulticastChannel)
        if not (sender.gso and receiver.gro):
            pytest.skip("this kernel has no UDP segmentation offload")
        assert receiver.set_sink(sink) and receiver.offer_blocks()
        assert sender.send_many_nowait(datagrams) == len(datagrams)
        await asyncio.wait_for(arrived.wait(), DEADLINE)
        assert any(type(d) is Segments for d in got)
        assert split_blocks(got) == datagrams
        assert receiver.stats.datagrams_in == len(datagrams)


async def test_a_plain_socket_on_the_group_gets_one_datagram_per_packet(mcast_url: str) -> None:
    """The wire contract: whatever the sender's kernel joined, a socket without GRO
    (another implementation, tcpdump's view on a real network) reads datagrams of at
    most 508 bytes, one per packet."""
    spec = parse_channel_url(mcast_url)
    assert isinstance(spec, MulticastSpec)
    plain = open_multicast_socket(spec)  # no offload options
    datagrams = packets_of(3, 20000)
    try:
        async with open_channel(mcast_url) as sender:
            assert sender.send_many_nowait(datagrams) == len(datagrams)
            got: list[bytes] = []
            loop = asyncio.get_running_loop()
            while len(got) < len(datagrams):
                got.append(await asyncio.wait_for(loop.sock_recv(plain, 65535), DEADLINE))
        assert got == datagrams
        assert max(map(len, got)) == SEGMENT
    finally:
        plain.close()


class RefusingSocket:
    """A socket whose route cannot segment: a joined send fails with EIO (a device
    without checksum offload), single datagrams go."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.options: list[tuple[int, int, int]] = []

    def sendto(self, data: bytes, address: object) -> int:
        if len(data) > SEGMENT:
            raise OSError(errno.EIO, "Input/output error")
        self.sent.append(data)
        return len(data)

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options.append((level, option, value))


def test_a_route_that_refuses_joined_sends_gets_one_datagram_per_send(
        caplog: pytest.LogCaptureFixture) -> None:
    channel = MulticastChannel(MulticastSpec("239.255.1.2", 4000), "udp-multicast://t")
    sock = RefusingSocket()
    channel._sock = sock  # type: ignore[assignment]
    channel.gso = True
    datagrams = [*packets_of(2, 3000), b"short"]
    with caplog.at_level(logging.INFO, logger="m2mc.transport.multicast"):
        assert channel.send_many_nowait(datagrams) == len(datagrams)
    assert sock.sent == datagrams  # nothing lost, nothing twice, in order
    assert not channel.gso and sock.options[-1][2] == 0  # asked once, not again
    assert channel.stats.datagrams_out == len(datagrams) and channel.stats.send_errors == 0
    assert "one datagram per send" in caplog.text
    sock.sent.clear()
    assert channel.send_many_nowait(datagrams) == len(datagrams)
    assert sock.sent == datagrams


def test_a_route_that_fails_every_send_counts_errors_and_keeps_joining() -> None:
    class Down(RefusingSocket):
        def sendto(self, data: bytes, address: object) -> int:
            raise OSError(errno.ENETUNREACH, "Network is unreachable")

    channel = MulticastChannel(MulticastSpec("239.255.1.2", 4000), "udp-multicast://t")
    channel._sock = Down()  # type: ignore[assignment]
    channel.gso = True
    datagrams = packets_of(1, 2000)
    assert channel.send_many_nowait(datagrams) == len(datagrams)  # dropped, counted
    assert channel.stats.send_errors == len(datagrams) and channel.stats.datagrams_out == 0
    assert channel.gso  # the route was down: the join was not the problem


def test_a_full_socket_keeps_the_rest_for_the_caller() -> None:
    class Full(RefusingSocket):
        def sendto(self, data: bytes, address: object) -> int:
            if self.sent:
                raise BlockingIOError(errno.EAGAIN, "full")
            self.sent.append(data)
            return len(data)

    channel = MulticastChannel(MulticastSpec("239.255.1.2", 4000), "udp-multicast://t")
    sock = Full()
    channel._sock = sock  # type: ignore[assignment]
    channel.gso = True
    datagrams = packets_of(2, 1600)  # 3 full + 1 short, twice
    assert channel.send_many_nowait(datagrams) == 4  # the first run went whole
    assert sock.sent == [b"".join(datagrams[:4])]


async def test_offload_0_sends_and_reads_one_datagram_per_call(mcast_url: str) -> None:
    async with open_channel(mcast_url + "&offload=0") as sender:
        assert isinstance(sender, MulticastChannel) and not sender.gso and not sender.gro
        sock = sender._sock
        assert sock is not None
        assert sock.getsockopt(SOL_UDP, UDP_SEGMENT) == 0  # untouched
        assert sock.getsockopt(SOL_UDP, UDP_GRO) == 0


@pytest.mark.parametrize("offload", ["", "&offload=0"])
async def test_an_outsiders_large_datagram_is_kept_whole(mcast_url: str, offload: str) -> None:
    """A datagram of up to MAX_DATAGRAM bytes may be a packet of a larger packet size:
    a read keeps it whole (RECV_SIZE is more), with GRO on or off. What the inbox may
    hold is bounded in bytes too (tests/transport/test_packet_size.py)."""
    spec = parse_channel_url(mcast_url)
    assert isinstance(spec, MulticastSpec)
    assert RECV_SIZE > MAX_DATAGRAM
    outsider = open_multicast_socket(spec)
    try:
        async with open_channel(mcast_url + offload) as channel:
            outsider.sendto(b"\x01" * 20000, (spec.group, spec.port))
            outsider.sendto(b"\x02" * MAX_DATAGRAM, (spec.group, spec.port))
            got = await read(channel, 2)
        assert got == [b"\x01" * 20000, b"\x02" * MAX_DATAGRAM]
    finally:
        outsider.close()


def test_joined_segments_are_cut_to_what_a_channel_keeps() -> None:
    got: list[bytes] = []
    ancillary = [(SOL_UDP, UDP_GRO, struct.pack("=i", 6000))]
    assert split_segments(b"a" * 6000 + b"b" * 100, ancillary, got.append, keep=4096) == 2
    assert got == [b"a" * 4096, b"b" * 100]
