"""Sockets of infrastructure mode: the backbone (TCP between hosts, FIFO and
reliable as seeds/001 2.1 assumes), and UDP for the cells (multicast downlink,
unicast uplink), multicast with TTL 1.

Addresses are whatever the operator names: any unicast IPv4 address, and IPv6 (in
brackets, ``[::1]:7101``) on the backbone, where TCP allows it; the cells are IPv4
multicast, so uplinks are IPv4. Loopback is only the default. What the network
tells us (a status's address, a beacon's uplink) is not trusted for its address
class but for who said it: see :class:`~m2mc.infra_runtime.host_driver.HostDriver`
(backbone peers) and :meth:`~m2mc.infra.member.MemberCore.receive_frame` (uplinks),
and docs/security.md, "Infrastructure mode".
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
import struct
from collections.abc import Callable

from m2mc.errors import ConfigError, DecodeError
from m2mc.infra.config import InfraConfig
from m2mc.infra.pieces import (
    MAX_FRAME_BYTES,
    PieceStats,
    Reassembly,
    cut,
    datagram_limit,
    is_piece,
)
from m2mc.transport.iface import interface_mtu, resolve_interface
from m2mc.transport.multicast import open_multicast_socket
from m2mc.transport.url import MulticastSpec, format_channel_url, parse_channel_url
from m2mc.wire.packet import MAX_PACKET

log = logging.getLogger("m2mc.infra.net")
_LEN = struct.Struct(">I")
MAX_FRAME = 64 << 20


def parse_address(text: str, what: str = "address", *, ipv6: bool = True) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT`` for IPv6) with HOST a unicast IP address.

    Refused, with a one-line :class:`ConfigError` naming ``what``: a name that is not
    an IP address (``localhost`` is 127.0.0.1), the unspecified address (nobody can
    reach it), multicast and broadcast addresses (not one host), IPv6 when ``ipv6``
    is False (the cells' sockets are IPv4), a port outside 0..65535."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"{what}: expected HOST:PORT (or [IPv6]:PORT), got {text!r}")
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed:
        host = host[1:-1]
    if host == "localhost":
        host = "127.0.0.1"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ConfigError(f"{what}: {host!r} is not an IP address (expected HOST:PORT with an "
                          "IPv4 address, or [IPv6]:PORT)") from None
    if ip.version == 6 and not bracketed:
        raise ConfigError(f"{what}: write an IPv6 address in brackets, [{host}]:PORT")
    if ip.version == 4 and bracketed:
        raise ConfigError(f"{what}: brackets are for IPv6 addresses, got {text!r}")
    if ip.version == 6 and not ipv6:
        raise ConfigError(f"{what}: IPv6 is not supported here (cells are IPv4 multicast); "
                          "give an IPv4 address")
    if ip.is_unspecified:
        raise ConfigError(f"{what}: {host} is the unspecified address; give the address the "
                          "others reach this host at")
    if ip.is_multicast or (ip.version == 4 and ip == ipaddress.IPv4Address("255.255.255.255")):
        raise ConfigError(f"{what}: {host} is not a unicast address")
    n = int(port)
    if not 0 <= n <= 65535:
        raise ConfigError(f"{what}: port out of range in {text!r}")
    return str(ip), n


def multicast_spec(url: str) -> MulticastSpec:
    spec = parse_channel_url(url)
    if not isinstance(spec, MulticastSpec):
        raise ConfigError(f"cell channel must be udp-multicast://, got {url!r}")
    if spec.ttl > 1:
        raise ConfigError(f"cell channel: ttl must be 0 or 1, got {spec.ttl}")
    if spec.packet != MAX_PACKET:
        # Cells carry infrastructure frames, each whole in one datagram (max_datagram),
        # not M2MP packets: an M2MP packet size means nothing here (docs/m2mp.md).
        raise ConfigError(f"cell channel: packet= is an M2MP setting; infrastructure mode "
                          f"does not use M2MP on its cells, got {url!r}")
    return spec


def cell_on(url: str, iface: str) -> str:
    """The cell ``url`` (another host's, from a directory) as joined on our ``iface``."""
    spec = multicast_spec(url)
    if spec.iface == iface:
        return url
    return format_channel_url(MulticastSpec(spec.group, spec.port, iface, spec.ttl, spec.rcvbuf))


# ----------------------------------------------------------------- backbone (TCP)
MAX_PEER_NAME = 64  # bytes of the host name a connection announces (a sealed sender's bound)


class FrameReader:
    """The framing of one backbone connection, sans-IO: each frame is a 4-byte
    big-endian length and that many bytes; the first frame names the sending host
    (1 to ``MAX_PEER_NAME`` bytes of UTF-8).

    A length over ``max_frame`` (or over ``MAX_PEER_NAME`` for the name), or a name
    that is empty or not UTF-8, ends the stream: :attr:`closed` is set with a
    :attr:`reason`, the buffer is freed and nothing more is read (the connection is
    to be closed). Between calls the buffer holds less than one frame and its
    length, so it never exceeds ``max_frame + 3`` bytes.
    """

    __slots__ = ("_buf", "closed", "max_frame", "peer", "reason")

    def __init__(self, max_frame: int = MAX_FRAME, peer: str | None = None) -> None:
        self.max_frame = max_frame
        self.peer: str | None = peer  # given: the stream starts with frames, no name
        self.closed = False
        self.reason = ""
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        """The frames ``data`` completes (after the name), in order."""
        if self.closed:
            return []
        buf = self._buf
        buf += data
        pos = 0
        n = len(buf)
        out: list[bytes] = []
        while n - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if size > (self.max_frame if self.peer is not None else MAX_PEER_NAME):
                return self._close(f"frame of {size} bytes" if self.peer is not None
                                   else f"host name of {size} bytes", out)
            if n - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            if self.peer is None:
                try:
                    name = frame.decode()
                except UnicodeDecodeError:
                    return self._close("host name not UTF-8", out)
                if not name:
                    return self._close("empty host name", out)
                self.peer = name
            else:
                out.append(frame)
        del buf[:pos]
        return out

    def _close(self, reason: str, out: list[bytes]) -> list[bytes]:
        self.closed = True
        self.reason = reason
        self._buf = bytearray()
        return out


READ_CHUNK = 2 << 20  # bytes a backbone connection reads at most per turn of the loop


class _FrameProtocol(asyncio.BufferedProtocol):
    """Length-prefixed frames (:class:`FrameReader`); the first names the sender.

    The stream is read into a buffer of ``READ_CHUNK`` bytes, so one turn of the event
    loop takes up to that much of it (a plain protocol gets 256 KiB a turn: four 64 KiB
    multicasts, where a host's turn may wait for its disk)."""

    def __init__(self, on_frame: Callable[[str, bytes], None],
                 on_lost: Callable[[_FrameProtocol], None], max_frame: int = MAX_FRAME,
                 on_bad: Callable[[str], None] | None = None, peer: str | None = None) -> None:
        self.on_frame = on_frame
        self.on_lost = on_lost
        self.on_bad = on_bad
        self.reader = FrameReader(max_frame, peer)
        self.transport: asyncio.Transport | None = None
        self.remote_ip = ""  # where the connection comes from (TCP: not spoofable off-path)
        self._rx: bytearray | None = None  # the read buffer, made at the first read

    @property
    def peer(self) -> str | None:
        return self.reader.peer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and peer:
            self.remote_ip = str(peer[0])
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._rx is None:
            self._rx = bytearray(READ_CHUNK)
        return memoryview(self._rx)

    def buffer_updated(self, nbytes: int) -> None:
        assert self._rx is not None
        self.data_received(bytes(memoryview(self._rx)[:nbytes]))

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        if reader.closed:
            return
        frames = reader.feed(data)
        peer = reader.peer
        if peer is not None:
            for frame in frames:
                self.on_frame(peer, frame)
        if reader.closed:
            log.warning("backbone stream from %s: %s; closing", peer or "?", reader.reason)
            if self.on_bad is not None:
                self.on_bad(reader.reason)
            if self.transport is not None:
                self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_lost(self)


class _Inbound(_FrameProtocol):
    refuse = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self.refuse:
            transport.close()

    def data_received(self, data: bytes) -> None:
        if not self.refuse:
            super().data_received(data)


class Backbone:
    """A full mesh: one outgoing connection to every peer for sending, incoming
    connections for receiving. A broken connection is retried until closed."""

    def __init__(self, me: str, listen: tuple[str, int], peers: list[tuple[str, int]],
                 on_frame: Callable[[str, bytes], None], retry: float = 0.2, *,
                 max_frame: int = MAX_FRAME, max_connections: int = 64,
                 on_return: Callable[[tuple[str, int], bytes], None] | None = None) -> None:
        if not me or len(me.encode()) > MAX_PEER_NAME:
            raise ConfigError(f"host id must be 1 to {MAX_PEER_NAME} bytes, got {me!r}")
        self.me = me
        self.listen = listen
        self.on_frame = on_frame
        self.on_return = on_return  # frames coming back on our outgoing connections
        self.retry = retry
        self.max_frame = max_frame
        self.max_connections = max_connections
        self._inbound: set[_FrameProtocol] = set()
        self.refused_connections = 0
        self.bad_streams = 0  # connections closed for a frame over max_frame or a bad name
        self._server: asyncio.Server | None = None
        self._out: dict[tuple[str, int], _FrameProtocol | None] = {p: None for p in peers}
        self._tasks: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._closed = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._accept, *self.listen, reuse_address=True)
        for addr in list(self._out):
            self.connect(addr)

    def _accept(self) -> _FrameProtocol:
        """An incoming connection; beyond ``max_connections`` it is closed at once."""
        proto = _Inbound(self.on_frame, self._inbound.discard, self.max_frame, self._bad)
        if len(self._inbound) >= self.max_connections:
            self.refused_connections += 1
            proto.refuse = True
        else:
            self._inbound.add(proto)
        return proto

    def _bad(self, reason: str) -> None:
        self.bad_streams += 1

    def inbound_ips(self, name: str) -> set[str]:
        """Source addresses of the live incoming connections that announced ``name``:
        hosts that really reached us from there (a TCP handshake completed)."""
        return {p.remote_ip for p in self._inbound if p.peer == name and p.remote_ip}

    def write_back(self, name: str, data: bytes) -> bool:
        """Send a frame back on the live incoming connections that announced ``name``
        (an operator's command line has no listening address); False if none."""
        sent = False
        for proto in list(self._inbound):
            if proto.peer == name and proto.transport is not None \
                    and not proto.transport.is_closing():
                self._write(proto, data)
                sent = True
        return sent

    def forget(self, addr: tuple[str, int]) -> None:
        """Stop keeping an outgoing connection to ``addr`` (a host that moved away)."""
        task = self._tasks.pop(addr, None)
        if task is not None:
            task.cancel()
        proto = self._out.pop(addr, None)
        if proto is not None and proto.transport is not None:
            proto.transport.close()

    def connect(self, addr: tuple[str, int]) -> None:
        """Keep an outgoing connection to ``addr`` (a discovered host, too)."""
        if addr == self.listen or addr in self._tasks or self._closed:
            return
        self._out.setdefault(addr, None)
        self._tasks[addr] = asyncio.get_running_loop().create_task(self._keep(addr))

    async def _keep(self, addr: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            lost = loop.create_future()

            def on_lost(p: _FrameProtocol, fut: asyncio.Future[None] = lost) -> None:
                if not fut.done():
                    fut.set_result(None)

            try:
                # Frames coming back on our own connection (a host that cannot reach our
                # listening address answers there) are read too; the core trusts the
                # sealed sender, not this name.
                _, proto = await loop.create_connection(
                    lambda: _FrameProtocol(self._returned(addr), on_lost, self.max_frame,
                                           peer=format_address(addr)), *addr)
            except OSError:
                await asyncio.sleep(self.retry)
                continue
            self._write(proto, self.me.encode())
            self._out[addr] = proto
            await lost
            self._out[addr] = None
            if not self._closed:
                await asyncio.sleep(self.retry)

    def _returned(self, addr: tuple[str, int]) -> Callable[[str, bytes], None]:
        def on_frame(_: str, data: bytes) -> None:
            if self.on_return is not None:
                self.on_return(addr, data)
        return on_frame

    @staticmethod
    def _write(proto: _FrameProtocol, data: bytes) -> None:
        assert proto.transport is not None
        proto.transport.write(_LEN.pack(len(data)) + data)

    def send(self, addr: tuple[str, int], data: bytes) -> bool:
        proto = self._out.get(addr)
        if proto is None or proto.transport is None or proto.transport.is_closing():
            return False
        self._write(proto, data)
        return True

    def broadcast(self, data: bytes) -> None:
        for addr in self._out:
            self.send(addr, data)

    async def close(self) -> None:
        self._closed = True
        for task in self._tasks.values():
            task.cancel()
        for proto in self._out.values():
            if proto is not None and proto.transport is not None:
                proto.transport.close()
        for inbound in list(self._inbound):  # a closed host hears nothing more
            if inbound.transport is not None:
                inbound.transport.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


# ----------------------------------------------------------------- cells (UDP)
DRAIN_DATAGRAMS = 256  # datagrams read at most each time a cell socket is readable
_MAX_DATAGRAM = 65536
UNKNOWN_MTU = 1500  # Ethernet's, for an interface whose MTU this system does not say


def fitted_to_cell(cfg: InfraConfig, iface: str) -> InfraConfig:
    """``cfg`` with batches that fit one IP packet of the cell on ``iface``
    (:meth:`InfraConfig.fitted`); on loopback (MTU 65,536) the configured bound stands."""
    return cfg.fitted(cell_datagram_limit(iface, cfg.cell_mtu))


def cell_datagram_limit(iface: str, mtu: int = 0) -> int:
    """The largest cell datagram on ``iface`` that IP sends whole: ``mtu`` (the
    configuration's ``cell_mtu``) or the interface's own, less the IP and UDP
    headers; a larger frame goes in pieces (m2mc.infra.pieces)."""
    if not mtu:
        mtu = interface_mtu(iface) or UNKNOWN_MTU
    return min(datagram_limit(mtu), MAX_FRAME_BYTES)


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, on_datagram: Callable[[bytes, tuple[str, int]], None]) -> None:
        self.on_datagram = on_datagram

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.on_datagram(data, addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("udp error: %s", exc)


class Udp:
    """One UDP endpoint (a bound unicast socket, or a joined multicast socket).

    Sends go through asyncio's datagram transport (it queues what the socket cannot
    take at once); reads do not: each time the socket is readable the endpoint reads
    what waits there, up to ``DRAIN_DATAGRAMS`` datagrams, where the transport reads
    one per turn of the event loop. A host or member whose turn waits for its disk
    (a durable commit) would otherwise take one datagram per commit, and the rest
    would wait in the socket (docs/group.md section 11, infrastructure rows).

    A frame longer than ``limit`` leaves in pieces of at most ``limit`` bytes, and
    pieces read are put together (:mod:`m2mc.infra.pieces`) before the owner sees
    the frame: IP never fragments a cell datagram (docs/decisions.md, "Cell frames
    never rely on IP fragmentation")."""

    def __init__(self, transport: asyncio.DatagramTransport, sock: socket.socket | None,
                 reader: socket.socket | None = None,
                 on_datagram: Callable[[bytes, tuple[str, int]], None] | None = None,
                 limit: int = MAX_FRAME_BYTES, piece_stats: PieceStats | None = None
                 ) -> None:
        self.transport = transport
        self.sock = sock
        self._reader = reader
        self._on_datagram = on_datagram
        self._loop = asyncio.get_running_loop()
        self.limit = limit
        self.pieces = Reassembly(stats=piece_stats)
        self._frame_id = int.from_bytes(os.urandom(4), "big")
        if reader is not None:
            self._loop.add_reader(reader.fileno(), self._drain)

    @classmethod
    async def _open(cls, sock: socket.socket,
                    on_datagram: Callable[[bytes, tuple[str, int]], None],
                    limit: int, piece_stats: PieceStats | None) -> Udp:
        """The transport sends on a duplicate of ``sock`` (the same socket) and does not
        read; ``sock`` itself is read by :meth:`_drain`."""
        try:
            twin = sock.dup()
        except OSError:
            sock.close()
            raise
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: _Datagrams(on_datagram), sock=twin)
        transport.pause_reading()  # type: ignore[attr-defined]
        return cls(transport, sock, sock, on_datagram, limit, piece_stats)

    def _drain(self) -> None:
        sock, on = self._reader, self._on_datagram
        if sock is None or on is None:
            return
        recvfrom = sock.recvfrom
        for _ in range(DRAIN_DATAGRAMS):
            try:
                data, addr = recvfrom(_MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.debug("udp error: %s", exc)
                return
            if is_piece(data):
                try:
                    frame = self.pieces.feed(addr, data, self._loop.time())
                except DecodeError:
                    continue  # counted in pieces.stats.malformed
                if frame is None:
                    continue
                data = frame
            on(data, addr)
            if self._reader is None:
                return  # closed by what the datagram set off

    @classmethod
    async def unicast(cls, bind: tuple[str, int],
                      on_datagram: Callable[[bytes, tuple[str, int]], None],
                      iface: str = "127.0.0.1", mtu: int = 0,
                      piece_stats: PieceStats | None = None) -> Udp:
        """A socket bound on ``bind``; its multicast leaves by ``iface`` (the cell's, an
        address or a name: by index on Linux, as ad hoc channels send, so it does not
        depend on the interface's address); frames that do not fit ``iface``'s MTU
        (or ``mtu``) leave in pieces."""
        multicast_if = resolve_interface(iface).multicast_if()  # ConfigError: no such one
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        # multicast sends from this socket leave by the cell's interface, with TTL 1
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, multicast_if)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        try:
            sock.bind(bind)
        except OSError as exc:
            sock.close()
            raise ConfigError(f"cannot bind UDP {bind[0]}:{bind[1]}: {exc.strerror}") from None
        sock.setblocking(False)
        return await cls._open(sock, on_datagram, cell_datagram_limit(iface, mtu), piece_stats)

    @classmethod
    async def multicast(cls, url: str, on_datagram: Callable[[bytes, tuple[str, int]], None],
                        mtu: int = 0, piece_stats: PieceStats | None = None) -> Udp:
        spec = multicast_spec(url)
        return await cls._open(open_multicast_socket(spec), on_datagram,
                               cell_datagram_limit(spec.iface, mtu), piece_stats)

    @property
    def address(self) -> tuple[str, int]:
        addr = self.transport.get_extra_info("sockname")
        return str(addr[0]), int(addr[1])

    def send(self, data: bytes, addr: tuple[str, int]) -> None:
        if len(data) <= self.limit:
            self.transport.sendto(data, addr)
            return
        self._frame_id += 1
        self.pieces.stats.cut += 1
        for piece in cut(data, self._frame_id, self.limit):
            self.transport.sendto(piece, addr)

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(reader.fileno())
            reader.close()
        self.transport.close()


def format_address(addr: tuple[str, int] | tuple[str, int, int, int]) -> str:
    """``HOST:PORT``, with an IPv6 host in brackets (what :func:`parse_address` reads)."""
    host = str(addr[0])
    return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"
