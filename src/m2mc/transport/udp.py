"""``udp://`` channel: unicast to a fixed list of peers (docs/interfaces.md §2).

Each datagram goes to every peer, except our own bound address if it is in the
list, so nothing loops back and the M2MP flow control is off on this channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

from m2mc.errors import ConfigError
from m2mc.transport.channel import DEFAULT_MAX_INBOUND, RECV_SIZE, Channel, ChannelClosedError
from m2mc.transport.url_syntax import Address, UdpSpec

_READ_BATCH = 256


class UdpChannel(Channel):
    def __init__(self, spec: UdpSpec, url: str, *,
                 max_inbound: int = DEFAULT_MAX_INBOUND) -> None:
        super().__init__(url, max_inbound=max_inbound)
        self.spec = spec
        self.packet_size = spec.packet
        self._peers: tuple[Address, ...] = spec.peers
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loops_back(self) -> bool:
        return False

    @property
    def local_address(self) -> Address:
        if self._sock is None:
            raise ChannelClosedError(f"channel {self.url} is not open")
        host, port = self._sock.getsockname()
        return str(host), int(port)

    @property
    def receive_buffer(self) -> int | None:
        sock = self._sock
        return None if sock is None else sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    async def _open(self) -> None:
        self._loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        try:
            with contextlib.suppress(OSError):  # a smaller buffer only means more loss
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.spec.rcvbuf)
            sock.bind(self.spec.bind)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            host, port = self.spec.bind
            raise ConfigError(f"cannot bind UDP {host}:{port}: {exc.strerror or exc}") from None
        self._sock = sock
        me = self.local_address
        self._peers = tuple(p for p in self.spec.peers if not _same(p, me))
        self._loop.add_reader(sock.fileno(), self._on_readable)

    def _shutdown(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(sock.fileno())
            sock.close()

    def set_sink(self, sink: Callable[[list[bytes]], None] | None) -> bool:
        return self._install_sink(sink)

    def _on_readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        batch: list[bytes] = []
        for _ in range(_READ_BATCH):
            try:
                batch.append(sock.recv(RECV_SIZE))
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                continue  # ICMP port unreachable from a peer that is down: skip it
        if batch:
            self._deliver_many(batch)

    def send_nowait(self, datagram: bytes) -> bool:
        # Unicast to several peers cannot be half-done and retried cleanly, so a full
        # socket buffer drops the copy for that peer (counted): the medium is lossy.
        sock = self._sock
        if sock is None:
            raise ChannelClosedError(f"channel {self.url} is closed")
        for peer in self._peers:
            try:
                sock.sendto(datagram, peer)
            except OSError:
                self.stats.send_errors += 1
        self.stats.datagrams_out += 1
        return True

    async def send(self, datagram: bytes) -> None:
        self.send_nowait(datagram)


def _same(peer: Address, me: Address) -> bool:
    host, port = peer
    if port != me[1]:
        return False
    return host == me[0] or (me[0] == "0.0.0.0" and host.startswith("127."))
