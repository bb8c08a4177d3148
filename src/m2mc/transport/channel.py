"""The channel abstraction: a datagram medium under the M2MP layer (seeds/002 2.4).

A :class:`Channel` moves whole datagrams. ``loops_back`` says whether a datagram
we send also comes back to us, as on a broadcast medium (seeds/002 section 5,
"Flow Control Sublayer"); the M2MP flow control only runs on channels that do.

Subclasses push what arrives into the bounded inbox with :meth:`Channel._deliver`
(from a reader callback) and implement :meth:`Channel.send`. The inbox is the
one buffer of a channel an outsider can fill: at ``max_inbound`` datagrams the
newest arrival is dropped and counted, as a full socket buffer would do.
"""

from __future__ import annotations

import abc
import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from m2mc.errors import M2MCError
from m2mc.wire.packet import MAX_DATAGRAM, MAX_PACKET

DEFAULT_MAX_INBOUND = 8192
# Datagrams longer than this are truncated on receipt. A receiver takes M2MP packets of
# up to MAX_DATAGRAM bytes whatever its own packet size (a sender may be set to more
# than 508, docs/m2mp.md); a truncated datagram is longer still, so the layer above
# counts it malformed.
RECV_SIZE = MAX_DATAGRAM + 1
# The inbox's bound in bytes, besides its count: a datagram may now be up to
# RECV_SIZE bytes, and 8192 of those would be half a gigabyte. 32 MiB is what the
# count alone bounded when reads were cut at 4 KiB.
DEFAULT_MAX_INBOUND_BYTES = 32 << 20


class ChannelClosedError(M2MCError):
    """The channel (or the endpoint using it) was closed, or its peer went away."""


@dataclass(slots=True)
class ChannelStats:
    datagrams_in: int = 0
    datagrams_out: int = 0
    dropped_inbound: int = 0  # inbox full
    send_errors: int = 0  # the OS refused a datagram (counted, dropped: the medium is lossy)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class Channel(abc.ABC):
    """A datagram channel. Use ``async with channel:`` or ``start()``/``close()``."""

    def __init__(self, url: str, *, max_inbound: int = DEFAULT_MAX_INBOUND) -> None:
        if max_inbound < 1:
            raise ValueError(f"max_inbound must be >= 1, got {max_inbound}")
        self.url = url
        self.stats = ChannelStats()
        self._max_inbound = max_inbound
        self._max_inbound_bytes = max(DEFAULT_MAX_INBOUND_BYTES, max_inbound * 4096)
        self._inbox_bytes = 0  # bytes of the datagrams in the inbox
        # Bytes per M2MP packet the layer above sends on this channel (``packet=`` in
        # the URL); what it receives is any size up to MAX_DATAGRAM.
        self.packet_size = MAX_PACKET
        self._inbox: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._sink: Callable[[list[bytes]], None] | None = None
        self._started = False
        self._closed = False

    # ------------------------------------------------------------ subclass API
    @property
    @abc.abstractmethod
    def loops_back(self) -> bool:
        """True if every datagram we send is also received by us."""

    @abc.abstractmethod
    async def _open(self) -> None:
        """Acquire sockets/connections. Raise ConfigError with one line if impossible."""

    @abc.abstractmethod
    def _shutdown(self) -> None:
        """Release sockets/connections (idempotent, synchronous)."""

    @abc.abstractmethod
    async def send(self, datagram: bytes) -> None:
        """Transmit one datagram, waiting for room if the medium pushes back."""

    def send_nowait(self, datagram: bytes) -> bool:
        """Transmit now if that needs no waiting; return False to ask for :meth:`send`."""
        return False

    def send_many_nowait(self, datagrams: list[bytes]) -> int:
        """:meth:`send_nowait` for each datagram in order, stopping at the first that
        would wait; return how many went (the rest are the caller's to :meth:`send`)."""
        sent = 0
        send_nowait = self.send_nowait
        for datagram in datagrams:
            if not send_nowait(datagram):
                break
            sent += 1
        return sent

    # ------------------------------------------------------------- lifecycle
    @property
    def closed(self) -> bool:
        return self._closed

    async def start(self) -> None:
        if self._closed:
            raise ChannelClosedError(f"channel {self.url} is closed")
        if not self._started:
            await self._open()
            self._started = True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._shutdown()
        self._wake()
        await self._after_shutdown()

    async def _after_shutdown(self) -> None:
        """Wait for buffered output to leave (connection-oriented channels override)."""
        return None

    async def __aenter__(self) -> Channel:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    # -------------------------------------------------------------- receiving
    async def recv(self) -> bytes:
        """The next datagram. Raise :class:`ChannelClosedError` once closed and drained."""
        while not self._inbox:
            await self._wait()
        datagram = self._inbox.popleft()
        self._inbox_bytes -= len(datagram)
        return datagram

    async def recv_many(self, limit: int = 512) -> list[bytes]:
        """At least one and at most ``limit`` datagrams, all that are waiting."""
        while not self._inbox:
            await self._wait()
        return self.recv_nowait(limit)

    def recv_nowait(self, limit: int = 512) -> list[bytes]:
        """Up to ``limit`` datagrams already waiting (after :meth:`poll`); never waits."""
        inbox = self._inbox
        if len(inbox) <= limit:
            batch = list(inbox)
            inbox.clear()
            self._inbox_bytes = 0
            return batch
        batch = [inbox.popleft() for _ in range(limit)]
        self._inbox_bytes -= sum(map(len, batch))
        return batch

    def poll(self, limit: int = 1) -> list[bytes]:
        """Datagrams the OS already holds, ``limit`` of them if there are that many
        (``[]`` if none); never waits. A read may bring several at once (UDP
        segmentation offload, transport/offload.py), so a batch can pass ``limit`` by
        at most 63.

        Lets a driver pick up looped-back copies in the same turn it sent the packets
        (on loopback multicast a copy is there when ``sendto`` returns), instead
        of a trip through the event loop per packet. Bypasses the inbox and the
        sink. Channels without such a shortcut return ``[]``.
        """
        return []

    def set_sink(self, sink: Callable[[list[bytes]], None] | None) -> bool:
        """Ask for arriving datagrams to be pushed to ``sink`` (from the event loop's
        reader callback) instead of queued for :meth:`recv`; saves a task switch per
        datagram. Return False if this channel does not support it (then use recv).

        Only channels whose datagrams arrive from a reader callback support it:
        delivering inside :meth:`send` (``mem://``) would re-enter the caller.
        """
        return False

    def offer_blocks(self) -> bool:
        """Let this channel hand the sink :class:`~m2mc.wire.segments.Segments`
        (several datagrams of one read, kept joined) where it reads such; the sink
        must take them (the M2MP layer does). False where it never does."""
        return False

    @property
    def receive_buffer(self) -> int | None:
        """Bytes the OS holds for us before it drops (the socket's receive buffer, in
        the kernel's count); None where no such buffer applies or before opening."""
        return None

    def watch_link(self, on_up: Callable[[], None]) -> bool:
        """Ask to be called (from the event loop) each time the network interface this
        channel uses comes back: up again, or its address back (docs/group.md section 4,
        "Coming back into range"). Return False if this channel has no such signal (the
        default: in-process, unicast and daemon channels; not Linux)."""
        return False

    def _install_sink(self, sink: Callable[[list[bytes]], None] | None) -> bool:
        """For subclasses that support sinks: set it and hand over what is queued."""
        self._sink = sink
        if sink is not None and self._inbox:
            batch = list(self._inbox)
            self._inbox.clear()
            self._inbox_bytes = 0
            sink(batch)
        return True

    def _deliver(self, datagram: bytes) -> None:
        """Called by subclasses for every datagram that arrives."""
        self.stats.datagrams_in += 1
        if self._sink is not None:
            self._sink([datagram])
            return
        size = len(datagram)
        if (len(self._inbox) >= self._max_inbound
                or self._inbox_bytes + size > self._max_inbound_bytes):
            self.stats.dropped_inbound += 1
            return
        self._inbox.append(datagram)
        self._inbox_bytes += size
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _deliver_many(self, datagrams: list[bytes]) -> None:
        """:meth:`_deliver` for a batch read in one go (one wake-up for all)."""
        count = len(datagrams)
        self.stats.datagrams_in += count
        if self._sink is not None:
            self._sink(datagrams)
            return
        room = self._max_inbound - len(self._inbox)
        if count > room:
            self.stats.dropped_inbound += count - max(room, 0)
            datagrams = datagrams[:max(room, 0)]
        size = sum(map(len, datagrams))
        if self._inbox_bytes + size > self._max_inbound_bytes:
            datagrams = self._fitting(datagrams)
            size = sum(map(len, datagrams))
        self._inbox.extend(datagrams)
        self._inbox_bytes += size
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fitting(self, datagrams: list[bytes]) -> list[bytes]:
        """The first of ``datagrams`` that fit the inbox's byte bound; the rest are
        dropped and counted, as the newest arrivals are at its count bound."""
        room = self._max_inbound_bytes - self._inbox_bytes
        keep = 0
        for datagram in datagrams:
            room -= len(datagram)
            if room < 0:
                break
            keep += 1
        self.stats.dropped_inbound += len(datagrams) - keep
        return datagrams[:keep]

    def _lost(self) -> None:
        """Called by subclasses when the medium went away (peer closed the connection)."""
        self._closed = True
        self._shutdown()
        self._wake()

    async def _wait(self) -> None:
        if self._closed:
            raise ChannelClosedError(f"channel {self.url} is closed")
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = asyncio.get_running_loop().create_future()
        await waiter

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
