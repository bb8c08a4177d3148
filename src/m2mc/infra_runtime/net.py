"""Sockets of infrastructure mode: the backbone (TCP between hosts, FIFO and
reliable as seeds/001 2.1 assumes), and UDP for the cells (multicast downlink,
unicast uplink). Only loopback and multicast with iface 127.0.0.1, TTL 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Callable

from m2mc.errors import ConfigError
from m2mc.transport.multicast import open_multicast_socket
from m2mc.transport.url import MulticastSpec, parse_channel_url

log = logging.getLogger("m2mc.infra.net")
_LEN = struct.Struct(">I")
MAX_FRAME = 64 << 20


def parse_address(text: str, what: str = "address") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"{what}: expected HOST:PORT, got {text!r}")
    if not host.startswith("127."):
        raise ConfigError(f"{what}: only loopback (127.0.0.0/8) addresses, got {host!r}")
    n = int(port)
    if not 0 <= n <= 65535:
        raise ConfigError(f"{what}: port out of range in {text!r}")
    return host, n


def multicast_spec(url: str) -> MulticastSpec:
    spec = parse_channel_url(url)
    if not isinstance(spec, MulticastSpec):
        raise ConfigError(f"cell channel must be udp-multicast://, got {url!r}")
    return spec


# ----------------------------------------------------------------- backbone (TCP)
class _FrameProtocol(asyncio.Protocol):
    """Length-prefixed frames; the first frame of a connection names the sender."""

    def __init__(self, on_frame: Callable[[str, bytes], None],
                 on_lost: Callable[[_FrameProtocol], None]) -> None:
        self.on_frame = on_frame
        self.on_lost = on_lost
        self.peer: str | None = None
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if size > MAX_FRAME:
                log.warning("backbone frame of %d bytes: closing", size)
                if self.transport is not None:
                    self.transport.close()
                return
            if n - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            if self.peer is None:
                self.peer = frame.decode("utf-8", errors="replace")
            else:
                self.on_frame(self.peer, frame)
        del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_lost(self)


class Backbone:
    """A full mesh: one outgoing connection to every peer for sending, incoming
    connections for receiving. A broken connection is retried until closed."""

    def __init__(self, me: str, listen: tuple[str, int], peers: list[tuple[str, int]],
                 on_frame: Callable[[str, bytes], None], retry: float = 0.2) -> None:
        self.me = me
        self.listen = listen
        self.on_frame = on_frame
        self.retry = retry
        self._server: asyncio.Server | None = None
        self._out: dict[tuple[str, int], _FrameProtocol | None] = {p: None for p in peers}
        self._tasks: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._closed = False
        self.sent_frames = 0
        self.dropped_frames = 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _FrameProtocol(self.on_frame, lambda p: None), *self.listen,
            reuse_address=True)
        for addr in list(self._out):
            self.connect(addr)

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
                _, proto = await loop.create_connection(
                    lambda: _FrameProtocol(lambda s, d: None, on_lost), *addr)
            except OSError:
                await asyncio.sleep(self.retry)
                continue
            self._write(proto, self.me.encode())
            self._out[addr] = proto
            await lost
            self._out[addr] = None
            if not self._closed:
                await asyncio.sleep(self.retry)

    @staticmethod
    def _write(proto: _FrameProtocol, data: bytes) -> None:
        assert proto.transport is not None
        proto.transport.write(_LEN.pack(len(data)) + data)

    def send(self, addr: tuple[str, int], data: bytes) -> bool:
        proto = self._out.get(addr)
        if proto is None or proto.transport is None or proto.transport.is_closing():
            self.dropped_frames += 1
            return False
        self._write(proto, data)
        self.sent_frames += 1
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
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


# ----------------------------------------------------------------- cells (UDP)
class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, on_datagram: Callable[[bytes, tuple[str, int]], None]) -> None:
        self.on_datagram = on_datagram

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.on_datagram(data, addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("udp error: %s", exc)


class Udp:
    """One UDP endpoint (a bound unicast socket, or a joined multicast socket)."""

    def __init__(self, transport: asyncio.DatagramTransport, sock: socket.socket | None) -> None:
        self.transport = transport
        self.sock = sock

    @classmethod
    async def unicast(cls, bind: tuple[str, int],
                      on_datagram: Callable[[bytes, tuple[str, int]], None]) -> Udp:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        # multicast sends from this socket stay on loopback with TTL 1
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        try:
            sock.bind(bind)
        except OSError as exc:
            sock.close()
            raise ConfigError(f"cannot bind UDP {bind[0]}:{bind[1]}: {exc.strerror}") from None
        sock.setblocking(False)
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: _Datagrams(on_datagram), sock=sock)
        return cls(transport, sock)

    @classmethod
    async def multicast(cls, url: str,
                        on_datagram: Callable[[bytes, tuple[str, int]], None]) -> Udp:
        sock = open_multicast_socket(multicast_spec(url))
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: _Datagrams(on_datagram), sock=sock)
        return cls(transport, sock)

    @property
    def address(self) -> tuple[str, int]:
        addr = self.transport.get_extra_info("sockname")
        return str(addr[0]), int(addr[1])

    def send(self, data: bytes, addr: tuple[str, int]) -> None:
        self.transport.sendto(data, addr)

    def close(self) -> None:
        self.transport.close()


def format_address(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"
