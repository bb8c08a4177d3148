"""``udp-multicast://`` channel: IP multicast, loopback interface and TTL 1 by default.

Every process on the machine that joins GROUP:PORT receives every datagram any
of them sends, the sender included (IP_MULTICAST_LOOP), which is the loopback
the M2MP flow control needs (seeds/002 section 5). SO_REUSEADDR/SO_REUSEPORT let
several processes share the port; binding to the group address (not 0.0.0.0)
keeps datagrams of other groups on the same port out.

``iface=`` is an address or an interface name (:mod:`m2mc.transport.iface`): by
name on Linux the socket joins and sends by interface index, so it keeps working
when the interface's address changes, and it opens on an interface that is not
ready yet (down, no link, no address) with a warning.

Where the kernel has UDP segmentation offload (``offload=1``, the default) a run
of full packets goes out in one system call and a read may return several
datagrams at once (:mod:`m2mc.transport.offload`); the datagrams are the same.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Callable

from m2mc.errors import ConfigError
from m2mc.transport.channel import DEFAULT_MAX_INBOUND, RECV_SIZE, Channel, ChannelClosedError
from m2mc.transport.iface import describe_interfaces, resolve_interface
from m2mc.transport.linkwatch import LinkWatcher, rejoin_group, watch_interface
from m2mc.transport.offload import (
    GRO_ANCILLARY,
    GRO_READ_SIZE,
    disable_gso,
    enable_gro,
    enable_gso,
    run_end,
    segments_per_send,
    split_segments,
)
from m2mc.transport.url_syntax import MulticastSpec, format_channel_url

log = logging.getLogger("m2mc.transport.multicast")

# Datagrams read per readiness callback before yielding to other tasks.
_READ_BATCH = 256

try:  # POSIX: bytes of the next waiting datagram (0 if none)
    import fcntl
    import termios

    _FIONREAD: int | None = termios.FIONREAD
except ImportError:  # pragma: no cover - not POSIX
    _FIONREAD = None


def open_multicast_socket(spec: MulticastSpec) -> socket.socket:
    """A non-blocking UDP socket joined to the group on the interface, ready to send to it.

    ConfigError (one line) if the interface is unknown or the group cannot be joined.
    """
    try:
        iface = resolve_interface(spec.iface)
    except ConfigError as exc:
        raise ConfigError(f"cannot open {format_channel_url(spec)}: {exc}") from None
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        with contextlib.suppress(OSError):  # a smaller buffer only means more loss
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, spec.rcvbuf)
        sock.bind((spec.group, spec.port))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, iface.membership(spec.group))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, iface.multicast_if())
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, spec.ttl)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        hint = ""
        if not iface.index and exc.errno in (errno.EADDRNOTAVAIL, errno.ENODEV):
            hint = f" (no interface has that address; interfaces: {describe_interfaces()})"
        raise ConfigError(
            f"cannot join multicast group {spec.group}:{spec.port} on {spec.iface}: "
            f"{exc.strerror or exc}{hint}") from None
    if iface.problem:
        log.warning("interface %s %s: nothing is sent or received on %s until it is up "
                    "with an IPv4 address", iface.label, iface.why, format_channel_url(spec))
    return sock


class MulticastChannel(Channel):
    def __init__(self, spec: MulticastSpec, url: str, *,
                 max_inbound: int = DEFAULT_MAX_INBOUND) -> None:
        super().__init__(url, max_inbound=max_inbound)
        self.spec = spec
        self.packet_size = spec.packet
        self._most = segments_per_send(spec.packet)  # packets per joined send
        self._destination = (spec.group, spec.port)
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fionread = array.array("i", [0])
        self._fd = -1
        self._watcher: LinkWatcher | None = None
        self.gso = False  # runs of full packets go out joined (transport/offload.py)
        self.gro = False  # reads may return several datagrams
        self._blocks = False  # the sink takes wire.segments.Segments (offer_blocks)

    @property
    def loops_back(self) -> bool:
        return True

    async def _open(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._sock = open_multicast_socket(self.spec)
        self._fd = self._sock.fileno()
        if self.spec.offload:
            # Joined sends of full packets of the channel's packet size, as many as
            # one send carries (offload.py); none past 32,753 bytes (one per send).
            self.gso = self._most > 1 and enable_gso(self._sock, self.packet_size)
            self.gro = enable_gro(self._sock)
        self._loop.add_reader(self._fd, self._on_readable)

    def offer_blocks(self) -> bool:
        self._blocks = True
        return True

    @property
    def receive_buffer(self) -> int | None:
        sock = self._sock
        return None if sock is None else sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    def watch_link(self, on_up: Callable[[], None]) -> bool:
        # Rejoin the group on the interface first (linkwatch.py), then tell the owner.
        if self._loop is None or self._sock is None:
            return False

        def back() -> None:
            # Joined as open_multicast_socket joins: by index for a name, so the same
            # membership whatever address the interface came back with.
            sock, spec = self._sock, self.spec
            if sock is not None:
                try:
                    mreq = resolve_interface(spec.iface).membership(spec.group)
                except (ConfigError, AssertionError) as exc:
                    log.warning("interface %s is back but cannot be used: %s", spec.iface, exc)
                else:
                    rejoin_group(sock, mreq, f"{spec.group} on {spec.iface}")
            on_up()

        self._watcher = watch_interface(self.spec.iface, back, self._loop)
        return self._watcher is not None

    def _shutdown(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        sock, self._sock = self._sock, None
        if sock is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(sock.fileno())
            sock.close()

    def poll(self, limit: int = 1) -> list[bytes]:
        # Ask for as many as the driver expects back (the copies of what it just sent):
        # reading past the last one costs a syscall and an exception; the event loop
        # reads the rest.
        sock = self._sock
        if sock is None:
            return []
        if self.gro:
            return self._poll_segments(sock, limit)
        recv = sock.recv
        batch: list[bytes] = []
        try:
            if limit == 1:
                batch.append(recv(RECV_SIZE))
            else:
                append = batch.append
                for _ in range(limit):
                    append(recv(RECV_SIZE))
        except OSError:
            pass
        self.stats.datagrams_in += len(batch)
        return batch

    def _poll_segments(self, sock: socket.socket, limit: int) -> list[bytes]:
        # poll() with GRO on: one read may bring several datagrams.
        batch: list[bytes] = []
        self.stats.datagrams_in += _read_gro(sock, batch, limit, self._blocks)
        return batch

    def set_sink(self, sink: Callable[[list[bytes]], None] | None) -> bool:
        return self._install_sink(sink)

    def _on_readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        if self.gro:
            self._read_segments(sock)
            return
        recv = sock.recv
        try:
            batch = [recv(RECV_SIZE)]
        except OSError:
            return  # nothing after all (or an ICMP error surfaced on the socket)
        if self._more_waiting():
            append = batch.append
            try:
                for _ in range(_READ_BATCH - 1):
                    append(recv(RECV_SIZE))
            except OSError:
                pass  # BlockingIOError: all read
        sink = self._sink
        if sink is not None:  # _deliver_many's common case, without the extra call
            self.stats.datagrams_in += len(batch)
            sink(batch)
        else:
            self._deliver_many(batch)

    def _more_waiting(self) -> bool:
        # With flow control, packets often arrive one per wake-up. Asking the kernel
        # whether another waits is cheaper than a read that fails (and raises).
        if _FIONREAD is None:
            return True
        waiting = self._fionread
        try:
            fcntl.ioctl(self._fd, _FIONREAD, waiting, True)
        except OSError:
            return True
        return waiting[0] > 0

    def _read_segments(self, sock: socket.socket) -> None:
        # _on_readable with GRO on: up to _READ_BATCH datagrams (a read that brings
        # several may pass it by up to 63).
        batch: list[bytes] = []
        blocks = self._blocks and self._sink is not None
        count = _read_gro(sock, batch, 1, blocks)
        if not batch:
            return  # nothing after all (or an ICMP error surfaced on the socket)
        if self._more_waiting():
            count += _read_gro(sock, batch, _READ_BATCH - count, blocks)
        sink = self._sink
        if sink is not None:
            self.stats.datagrams_in += count
            sink(batch)
        else:
            self._deliver_many(batch)

    def send_nowait(self, datagram: bytes) -> bool:
        sock = self._sock
        if sock is None:
            raise ChannelClosedError(f"channel {self.url} is closed")
        try:
            sock.sendto(datagram, self._destination)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            self.stats.send_errors += 1
            return True
        self.stats.datagrams_out += 1
        return True

    def send_many_nowait(self, datagrams: list[bytes]) -> int:
        sock = self._sock
        if sock is None:
            raise ChannelClosedError(f"channel {self.url} is closed")
        if not self.gso or len(datagrams) == 1:
            return self._send_each(sock, datagrams)
        # Each run of full packets (plus the one after) in one sendto; the kernel cuts it.
        sendto, destination, stats = sock.sendto, self._destination, self.stats
        sent = 0
        total = len(datagrams)
        while sent < total:
            end = run_end(datagrams, sent, self.packet_size, self._most)
            count = end - sent
            try:
                sendto(datagrams[sent] if count == 1 else b"".join(datagrams[sent:end]),
                       destination)
            except (BlockingIOError, InterruptedError):
                break  # nothing of the run went (a UDP send is all or nothing)
            except OSError as exc:
                if count == 1:
                    stats.send_errors += 1
                    sent = end
                    continue
                # The join or the route? Send the run one datagram at a time to find out.
                errors = stats.send_errors
                went = self._send_each(sock, datagrams[sent:end])
                if went == count and stats.send_errors == errors:
                    # One by one they all went: this route cannot segment (a device
                    # without checksum offload, IPsec); stop joining on this socket.
                    self.gso = False
                    disable_gso(sock)
                    log.info("%s: the kernel refused a segmented send (%s); one datagram "
                             "per send from now on", self.url, exc.strerror or exc)
                    return sent + went + self._send_each(sock, datagrams[end:])
                sent += went
                if went < count:
                    break  # the socket is full: the caller keeps the rest
                continue
            stats.datagrams_out += count
            sent = end
        return sent

    def _send_each(self, sock: socket.socket, datagrams: list[bytes]) -> int:
        # The sender's per-packet path: one tight loop of sendto, no call per datagram.
        sendto, destination, stats = sock.sendto, self._destination, self.stats
        sent = 0
        for datagram in datagrams:
            try:
                sendto(datagram, destination)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                stats.send_errors += 1
                stats.datagrams_out -= 1  # counted below with the others
            sent += 1
        stats.datagrams_out += sent
        return sent

    async def send(self, datagram: bytes) -> None:
        if self.send_nowait(datagram):
            return
        sock, loop = self._sock, self._loop
        assert sock is not None and loop is not None
        try:
            await loop.sock_sendto(sock, datagram, self._destination)
        except OSError:
            self.stats.send_errors += 1
            return
        self.stats.datagrams_out += 1


def _read_gro(sock: socket.socket, batch: list[bytes], limit: int, blocks: bool = False) -> int:
    """Read into ``batch`` until ``limit`` datagrams were read or the socket is empty
    (GRO on: each ``recvmsg`` may bring several, cut apart by their segment size, or
    kept joined as wire.segments.Segments with ``blocks``); return how many were read."""
    recvmsg, append = sock.recvmsg, batch.append
    count = 0
    try:
        while count < limit:
            data, ancillary, _flags, _address = recvmsg(GRO_READ_SIZE, GRO_ANCILLARY)
            if ancillary:
                count += split_segments(data, ancillary, append, RECV_SIZE, blocks)
            else:  # cut as recv(RECV_SIZE) would (offload.split_segments)
                append(data if len(data) <= RECV_SIZE else data[:RECV_SIZE])
                count += 1
    except OSError:
        pass  # BlockingIOError: all read (or an ICMP error surfaced on the socket)
    return count
