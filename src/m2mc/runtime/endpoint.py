"""The asyncio driver of the sans-IO M2MP layer: :class:`M2MPEndpoint`.

    async with M2MPEndpoint("udp-multicast://239.255.77.77:7777", filters=[b""]) as ep:
        message_id = await ep.send(b"hello")
        message = await ep.receive()          # MessageReceived(message_id, payload)
        async for message in ep: ...

The endpoint is the M2MP layer's face and adapter: the one asyncio driver
(runtime/driver.py) owns the clock (``loop.time()``) and the timer, the channel is
its link (runtime/channel_link.py, reading on for the looped-back copies of what
it just sent), and the :class:`~m2mc.wire.m2mp.M2MPLayer` decides everything
else. The layer's message IDs come from ``rng``, seeded from OS entropy unless
given. Flow control runs only if the channel loops datagrams back (seeds/002
section 5). Buffers:
``max_send_queue`` packets wait for the channel (``send`` blocks beyond that:
back-pressure); ``max_receive_queue`` events wait for the application (beyond
that the oldest is dropped and counted, as the seed's layer times out a message
nobody accepts, seeds/002 2.3).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
from collections import deque
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING

from m2mc.errors import UsageError
from m2mc.log import node_logger
from m2mc.runtime.channel_link import ChannelLink, read_copies
from m2mc.runtime.driver import Driver, Waiters
from m2mc.runtime.stream_io import (
    IncomingMessage,
    MessageAbandonedError,
    OutgoingMessage,
    StreamInbox,
)
from m2mc.transport.channel import DEFAULT_MAX_INBOUND, Channel, ChannelClosedError
from m2mc.transport.url import open_channel
from m2mc.wire.m2mp import M2MPConfig, M2MPEvent, M2MPLayer, MessageAbandoned, MessageReceived
from m2mc.wire.m2mp_types import packet_size_for
from m2mc.wire.packet import MAX_FRAGMENT, MAX_PACKET, fragment_count

if TYPE_CHECKING:
    from m2mc.config import M2MPSettings

__all__ = ["BUFFER_PER_WINDOW_PACKET", "DEFAULT_FLOW_WINDOW", "MAX_FLOW_WINDOW", "M2MPEndpoint",
           "MessageAbandonedError", "flow_window_for"]  # the error: from stream_io, its reader's

_NONE: list[bytes] = []  # (never appended to)
# Packets in flight under flow control when the configuration leaves it open
# (M2MPConfig.flow_window=None): a sender runs at most this far ahead of its own
# receive path instead of stopping after every packet (docs/decisions.md). A Node's
# window grows with its socket's receive buffer once the channel is open, up to
# MAX_FLOW_WINDOW (flow_window_for); an M2MPEndpoint's stays at this one (measured:
# the M2MP stream of ``m2mc send``/``listen`` ran slower with the larger window).
DEFAULT_FLOW_WINDOW = 64
MAX_FLOW_WINDOW = 256
# Receive buffer (the kernel's count, which includes each datagram's overhead: up to
# about 2 KiB for a 508-byte packet read without offload) per packet of the window:
# a window's burst fills at most a quarter of a buffer like ours.
BUFFER_PER_WINDOW_PACKET = 8192


def flow_window_for(receive_buffer: int | None, packet_size: int = MAX_PACKET) -> int:
    """A Node's flow window on a channel whose socket holds ``receive_buffer`` bytes
    (None: not a socket, or not known): DEFAULT_FLOW_WINDOW at Linux's default buffer
    (208 KiB, which the kernel reports as 416), MAX_FLOW_WINDOW at the 4 MiB a
    multicast channel asks for, so that a 64 KiB message (132 packets) leaves in one
    go rather than in three, each waiting for the copies of the last
    (docs/decisions.md). At a larger packet size, as many packets as hold about the
    same bytes (:func:`window_at`)."""
    if not receive_buffer:
        return window_at(DEFAULT_FLOW_WINDOW, packet_size)
    return window_at(max(DEFAULT_FLOW_WINDOW,
                         min(MAX_FLOW_WINDOW, receive_buffer // BUFFER_PER_WINDOW_PACKET)),
                     packet_size)


def window_at(window: int, packet_size: int) -> int:
    """A flow window of ``window`` 508-byte packets, for packets of ``packet_size``
    bytes: no more bytes in flight (at least one packet), so a sender's burst of
    larger packets does not overflow its own receive buffer with their copies."""
    if packet_size == MAX_PACKET:
        return window
    return max(1, window * MAX_PACKET // packet_size)


class M2MPEndpoint:
    """One M2MP layer instance on one channel, driven by asyncio."""

    def __init__(self, channel: str | Channel, config: M2MPConfig | None = None, *,
                 filters: Iterable[bytes] = (), rng: random.Random | None = None,
                 max_send_queue: int = 4096, max_receive_queue: int = 1024,
                 max_inbound: int = DEFAULT_MAX_INBOUND, node: str = "-",
                 max_stream_buffer: int = 4 << 20) -> None:
        if max_send_queue < 1 or max_receive_queue < 1:
            raise UsageError("max_send_queue and max_receive_queue must be >= 1")
        self._channel = (open_channel(channel, max_inbound=max_inbound)
                         if isinstance(channel, str) else channel)
        base = config or M2MPConfig()
        # Flow control waits for looped-back copies; on a channel without loopback it
        # would stall every packet for flow_timeout, so it is off there.
        self.config = dataclasses.replace(
            base, flow_control=base.flow_control and self._channel.loops_back,
            packet_size=packet_size_for(base.packet_size, self._channel.packet_size))
        if base.flow_window is None:
            self.config.flow_window = window_at(DEFAULT_FLOW_WINDOW, self.config.packet_size)
        # Message IDs must differ between processes: never a fixed default seed here.
        self._layer = M2MPLayer(self.config, rng or random.Random(os.urandom(16)))
        for prefix in filters:
            self._layer.add_filter(prefix)
        self._max_send_queue = max_send_queue
        self._max_receive_queue = max_receive_queue
        self._log = node_logger("m2mc.runtime.endpoint", node)
        self._link = ChannelLink(self._channel, self._layer.receive_datagrams,
                                 read_on=read_copies, on_drained=self._on_drained,
                                 on_lost=self._on_lost, blocks=self._layer.takes_blocks)
        self._driver = Driver(self._layer, self, on_output=self._take_events)
        self._inbox: deque[M2MPEvent] = deque()
        self._inbox_waiter: asyncio.Future[None] | None = None
        self._progress = Waiters()  # send() waiting for room
        self._drained = Waiters()  # drain() waiting for an empty queue
        self._error: ChannelClosedError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the driver's, once started
        self.receive_overflow = 0
        # Messages read in pieces (config.stream_threshold set): accept(), stream_io.py.
        self._streams: StreamInbox | None = None
        if self.config.stream_threshold:
            self._streams = StreamInbox(max_stream_buffer, max_receive_queue,
                                        self._drop_stream)

    @classmethod
    def from_settings(cls, settings: M2MPSettings, *, channel: str | Channel | None = None,
                      filters: Iterable[bytes] = (), rng: random.Random | None = None,
                      node: str = "-", config: M2MPConfig | None = None) -> M2MPEndpoint:
        """An endpoint configured by ``load_config().m2mp`` (channel from it unless given;
        ``config``: the layer's settings, if not ``settings.layer_config()``)."""
        return cls(settings.channel if channel is None else channel,
                   settings.layer_config() if config is None else config,
                   filters=filters, rng=rng, max_send_queue=settings.max_send_queue,
                   max_receive_queue=settings.max_receive_queue,
                   max_inbound=settings.max_inbound_datagrams, node=node,
                   max_stream_buffer=settings.max_stream_buffer)

    # --------------------------------------------------------------- lifecycle
    @property
    def channel(self) -> Channel:
        return self._channel

    @property
    def layer(self) -> M2MPLayer:
        return self._layer

    async def start(self) -> None:
        await self._driver.start()

    async def close(self) -> None:
        if self._error is None:
            self._error = ChannelClosedError("endpoint closed")
        await self._driver.close()
        self._wake_all()

    async def __aenter__(self) -> M2MPEndpoint:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    # ----------------------------------------------------------------- filters
    def add_filter(self, prefix: bytes) -> None:
        self._layer.add_filter(prefix)

    def remove_filter(self, prefix: bytes) -> None:
        self._layer.remove_filter(prefix)

    @property
    def filters(self) -> tuple[bytes, ...]:
        return self._layer.filters

    # ----------------------------------------------------------------- sending
    async def send(self, payload: bytes) -> int:
        """Queue one message and return its message ID; waits while the send queue is full."""
        loop = self._loop
        if loop is None or self._error is not None:
            loop = self._running()  # raises
        size = len(payload)
        if size > self.config.max_message_bytes:
            raise UsageError(f"message of {size} bytes exceeds "
                             f"max_message_bytes={self.config.max_message_bytes}")
        layer, link = self._layer, self._link
        backlog = layer.queued_packets + link.backlog
        if backlog:
            need = 1 if size <= MAX_FRAGMENT else fragment_count(size, self.config.packet_size)
            while backlog and backlog + need > self._max_send_queue:
                await self._wait_progress(self._progress)
                backlog = layer.queued_packets + link.backlog
        now = loop.time()
        message_id = layer.send(payload if type(payload) is bytes else bytes(payload), now)
        if not backlog:
            # Otherwise packets are already waiting for a loopback (the reader sends on)
            # or for the channel (the writer task sends on): nothing can go now.
            driver = self._driver
            driver.flush(now)
            driver.arm_timer()
        return message_id

    async def drain(self) -> None:
        """Wait until every queued packet has been handed to the channel."""
        self._running()
        while self._backlog():
            await self._wait_progress(self._drained)

    def _backlog(self) -> int:
        return self._layer.queued_packets + self._link.backlog

    def open_message(self) -> OutgoingMessage:
        """A message to write in pieces (seeds/002 2.2): ``async with
        ep.open_message() as out: await out.write(...)``; the same packets as
        ``send`` of the whole, sent as the pieces come (stream_io.py)."""
        loop = self._running()
        return OutgoingMessage(self, self._layer.open_message(loop.time()))

    async def write_piece(self, message_id: int, data: bytes, end: bool) -> None:
        """Queue a piece of a message being written (``end``: its end), with ``send``'s
        back-pressure: what an :class:`~m2mc.runtime.stream_io.OutgoingMessage` from
        :meth:`open_message` calls (its :class:`~m2mc.runtime.stream_io.MessageWriter`)."""
        loop = self._running()
        layer = self._layer
        backlog = self._backlog()
        need = len(data) // MAX_FRAGMENT + 1
        while backlog and backlog + need > self._max_send_queue:
            await self._wait_progress(self._progress)
            backlog = self._backlog()
        now = loop.time()
        if end:
            layer.close_message(message_id, now)
        else:
            layer.write_message(message_id, data, now)
        if not backlog:
            driver = self._driver
            driver.flush(now)
            driver.arm_timer()

    def abort_message(self, message_id: int) -> None:
        """Send nothing more of a message being written (the other half of the
        :class:`~m2mc.runtime.stream_io.MessageWriter` port)."""
        self._layer.abort_message(message_id)

    # --------------------------------------------------------------- receiving
    async def accept(self) -> IncomingMessage:
        """The next incoming message, to read in pieces (stream mode:
        ``M2MPConfig.stream_threshold`` set); one abandoned part-way raises
        :class:`MessageAbandonedError` to its reader."""
        if self._streams is None:
            raise UsageError("accept() reads messages as streams: set "
                             "M2MPConfig.stream_threshold (or use receive())")
        return await self._streams.accept()

    def _drop_stream(self, message_id: int) -> bool:
        assert self._loop is not None
        return self._layer.drop_stream(message_id, self._loop.time())

    async def receive_event(self) -> M2MPEvent:
        """The next event: a message, or a message abandoned part-way."""
        self._whole_messages()
        inbox = self._inbox
        while not inbox:
            if self._error is not None:
                raise self._error
            waiter = self._inbox_waiter
            if waiter is None or waiter.done():
                waiter = self._inbox_waiter = self._running().create_future()
            await waiter
        return inbox.popleft()

    async def receive(self) -> MessageReceived:
        """The next message; raises :class:`MessageAbandonedError` for an abandoned one."""
        event = await self.receive_event()
        if isinstance(event, MessageAbandoned):
            raise MessageAbandonedError(event)
        assert isinstance(event, MessageReceived)  # (stream mode has accept() instead)
        return event

    def _whole_messages(self) -> None:
        if self._streams is not None:
            raise UsageError("this endpoint reads messages as streams: use accept()")

    def __aiter__(self) -> M2MPEndpoint:
        return self

    async def __anext__(self) -> MessageReceived:
        """Messages until the endpoint closes; abandoned ones are skipped (see ``stats``)."""
        # receive_event() inlined: this runs once per message, and once per wake-up.
        self._whole_messages()
        inbox = self._inbox
        while True:
            while inbox:
                event = inbox.popleft()
                if isinstance(event, MessageReceived):
                    return event
            if self._error is not None:
                raise StopAsyncIteration
            waiter = self._inbox_waiter
            if waiter is None or waiter.done():
                waiter = self._inbox_waiter = self._running().create_future()
            await waiter

    # ------------------------------------------------------------------- stats
    @property
    def stats(self) -> dict[str, object]:
        stats = self._layer.stats.as_dict()
        stats.update({f"channel_{k}": v for k, v in self._channel.stats.as_dict().items()})
        stats.update(receive_overflow=self.receive_overflow,
                     partial_messages=self._layer.partial_messages,
                     partial_bytes=self._layer.partial_bytes,
                     send_backlog=self._backlog())
        if self._streams is not None:
            stats.update(streams_open=self._layer.streams_open,
                         stream_held_bytes=self._layer.stream_held_bytes,
                         stream_buffered=self._streams.buffered,
                         stream_overflow=self._streams.overflow,
                         stream_unaccepted_dropped=self._streams.dropped)
        return stats

    # ------------------------------------------------------ adapter (driver.py)
    async def open_links(self, driver: Driver) -> None:
        self._loop = driver.loop
        await self._link.open(driver)

    def take_output(self, now: float) -> list[bytes]:
        """The layer's ready datagrams. While the channel is backed up the layer keeps
        its packets (the writer task asks again once it caught up): back-pressure."""
        layer = self._layer
        if self._link.backlog or not layer.queued_packets:
            return _NONE
        return layer.datagrams_to_send(now)

    def transmit(self, output: list[bytes], now: float) -> int:
        """Hand the datagrams to the channel, in order; return how many went at once."""
        sent = self._link.send(output, now) if output else 0
        # Wake blocked senders only below the low-water mark, and drain() only when
        # empty: waking them for every packet that leaves costs a task switch each.
        if self._progress or self._drained:
            backlog = self._backlog()
            if backlog <= self._max_send_queue // 2:
                self._progress.wake()
            if not backlog:
                self._drained.wake()
        return sent

    async def close_links(self) -> None:
        await self._link.close()

    # ---------------------------------------------------------------- driving
    def _running(self) -> asyncio.AbstractEventLoop:
        if self._error is not None:
            raise self._error
        if not self._driver.started:
            raise UsageError("endpoint not started: use 'async with' or await start()")
        return self._driver.loop

    def _on_drained(self) -> None:
        """The channel caught up with the writer: what the layer holds may go now."""
        self._driver.poke()

    def _on_lost(self, exc: ChannelClosedError) -> None:
        if self._error is None:
            self._log.warning("channel %s closed under us", self._channel.url)
            self._error = ChannelClosedError(f"channel {self._channel.url} closed")
        self._wake_all()

    def _take_events(self) -> None:
        """After each turn of work: the layer's events into the application's inbox."""
        events = self._layer.events()
        if events:
            self._enqueue(events)

    def _enqueue(self, events: list[M2MPEvent]) -> None:
        streams = self._streams
        if streams is not None:
            while events:
                for event in events:
                    streams.on_event(event)
                events = self._layer.events()  # what a dropped stream left (overflow)
            return
        inbox, bound = self._inbox, self._max_receive_queue
        if len(inbox) + len(events) <= bound:
            inbox.extend(events)
        else:
            for event in events:
                if len(inbox) >= bound:
                    inbox.popleft()
                    self.receive_overflow += 1
                inbox.append(event)
        waiter = self._inbox_waiter
        if waiter is not None:
            self._inbox_waiter = None  # a reader that finds the inbox empty makes a new one
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_progress(self, waiters: Waiters) -> None:
        self._running()
        await waiters.wait()
        if self._error is not None:
            raise self._error

    def _wake_all(self) -> None:
        self._progress.wake()
        self._drained.wake()
        if self._streams is not None and self._error is not None:
            self._streams.close(self._error)
        waiter = self._inbox_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
