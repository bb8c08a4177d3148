"""A datagram :class:`~m2mc.transport.channel.Channel` as a stack's link: what the
group node and the M2MP endpoint run on (runtime/driver.py runs the stack).

Input: datagrams come in batches, pushed by the channel's reader callback where
the channel can (``set_sink``: no task switch per wake-up) or read by a task. Each
batch goes into the core (``receive``, with one ``now``), then through the
driver's output step, and then the link reads on while the OS already holds
more (``read_on``), up to a bound, before it returns to the event loop.
Reading on instead of returning after each read matters twice: each packet sent
under M2MP flow control brings its looped-back copy straight back, and on a busy
machine every return to the event loop may cost a wait for the CPU. Two ways to
read on: :func:`read_burst` (whatever waits, one read at a time, up to 64: the
group node) and :func:`read_copies` (as many datagrams as were just sent, the
looped-back copies: the M2MP endpoint).

Output: :meth:`ChannelLink.send` tries ``send_many_nowait`` first (no task, no
await, when the socket has room) and leaves the rest, in order, to a writer task.

Back-pressure: while ``paused()`` returns True the link stops taking datagrams
off the channel: a reader task waits (the channel's bounded inbox then drops, like
a full socket buffer), and in sink mode at most ``MAX_HELD_BACK`` datagrams are
kept for :meth:`ChannelLink.resume`, the rest dropped and counted (the group
layer's repair fetches what was lost).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from m2mc.runtime.driver import Waiters
from m2mc.transport.channel import Channel, ChannelClosedError
from m2mc.wire.segments import split_blocks

if TYPE_CHECKING:
    from m2mc.runtime.driver import Driver

MAX_PER_TURN = 4096  # reads' items taken in before yielding (a joined read, wire/segments.py,
# counts as one: up to 64 packets)
# ...or this much time: the owner gets the turn's events (deliveries) only when it ends,
# so a receiver catching up on a full socket buffer must not sit on them for 100 ms.
MAX_TURN_SECONDS = 0.004
MAX_HELD_BACK = 8192  # datagrams kept while the owner is paused (sink mode); more are dropped

ReadOn = Callable[[Channel, int], list[bytes]]
PacketTrace = Callable[[str, float, bytes], None]


def read_burst(channel: Channel, sent: int) -> list[bytes]:
    """Whatever the OS already holds, one read at a time, up to 64 datagrams."""
    batch = channel.poll()
    if not batch:
        return batch
    while len(batch) < 64:
        more = channel.poll()
        if not more:
            break
        batch.extend(more)
    return batch


def read_copies(channel: Channel, sent: int) -> list[bytes]:
    """The looped-back copies of the ``sent`` datagrams just sent (reading past the
    last one costs a syscall and an exception: the event loop reads the rest)."""
    return channel.poll(sent) if sent else []


def _never() -> bool:
    return False


class ChannelLink:
    """One channel, its reader and its writer. ``receive(batch, now)`` takes each
    batch into the core; ``on_drained`` is called when the writer emptied the
    backlog, ``on_lost`` when the channel went away under us."""

    def __init__(self, channel: Channel, receive: Callable[[Sequence[bytes], float], None], *,
                 read_on: ReadOn = read_burst, paused: Callable[[], bool] | None = None,
                 packet_trace: PacketTrace | None = None,
                 on_drained: Callable[[], None] | None = None,
                 on_lost: Callable[[ChannelClosedError], None] | None = None,
                 blocks: bool = False) -> None:
        self.channel = channel
        # ``receive`` takes wire.segments.Segments (the M2MP layer): offered to the channel
        # unless every datagram is traced one by one.
        self._blocks = blocks and packet_trace is None
        self._receive = receive
        self._read_on = read_on
        self._paused = paused or _never
        # ("packet_in" | "packet_out", now, datagram) for every datagram, when tracing them
        self._packet_trace = packet_trace
        self._on_drained = on_drained
        self._on_lost = on_lost
        self._driver: Driver | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._pending: deque[bytes] = deque()
        self._sent = Waiters()
        self._resume: asyncio.Event | None = None
        self._held_back: list[bytes] = []  # sink mode: input taken while paused
        self.dropped_paused = 0
        self.datagrams_out = 0
        self.error: BaseException | None = None

    # --------------------------------------------------------------- lifecycle
    async def open(self, driver: Driver) -> None:
        self._driver = driver
        self._resume = asyncio.Event()
        await self.channel.start()
        # Channels that can push datagrams from their reader callback save a task
        # switch per wake-up; the others are read by a task.
        if not self.channel.set_sink(self._on_datagrams):
            self._reader = driver.loop.create_task(self._read_loop())
        elif self._blocks:
            self.channel.offer_blocks()

    def watch_link(self, on_up: Callable[[], None]) -> bool:
        """Be told when the channel's interface comes back (Channel.watch_link)."""
        return self.channel.watch_link(on_up)

    async def close(self) -> None:
        self.channel.set_sink(None)
        for task in (self._reader, self._writer):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self.channel.close()
        self._sent.wake()

    # ------------------------------------------------------------------ output
    @property
    def backlog(self) -> int:
        """Datagrams handed to the link that the channel has not taken yet."""
        return len(self._pending)

    async def wait_sent(self) -> None:
        """Wait until the channel took everything handed to the link so far."""
        while self._pending:
            await self._sent.wait()

    def send(self, out: list[bytes], now: float) -> int:
        """Transmit ``out`` in order: at once what the channel takes without waiting,
        the rest by the writer task. Returns how many went at once."""
        if not out:
            return 0
        trace = self._packet_trace
        if trace is not None:
            for datagram in out:
                trace("packet_out", now, datagram)
        sent = 0
        pending = self._pending
        if not pending:
            try:
                sent = self.channel.send_many_nowait(out)
            except ChannelClosedError as exc:
                self.error = exc
                return 0
            self.datagrams_out += sent
            if sent == len(out):
                return sent
        pending.extend(out[sent:] if sent else out)
        if self._writer is None or self._writer.done():
            assert self._driver is not None
            self._writer = self._driver.loop.create_task(self._write_pending())
        return sent

    async def _write_pending(self) -> None:
        pending, channel = self._pending, self.channel
        try:
            while pending:
                await channel.send(pending[0])
                pending.popleft()
                self.datagrams_out += 1
                if not pending and self._on_drained is not None:
                    self._on_drained()  # (may hand over more: the loop goes on)
        except ChannelClosedError as exc:
            self._lost(exc)
        self._sent.wake()

    # ------------------------------------------------------------------- input
    def resume(self) -> None:
        """The owner made room (see ``paused``): let the reader go on."""
        if self._resume is not None:
            self._resume.set()
        if self._held_back and not self._paused():
            held, self._held_back = self._held_back, []
            self._process(held)

    def _on_datagrams(self, batch: list[bytes]) -> None:
        """Sink mode: called by the channel's reader callback."""
        if self._paused():
            # The channel's own bound is bypassed in sink mode: keep ours, in datagrams.
            if self._blocks:
                batch = split_blocks(batch)
            room = MAX_HELD_BACK - len(self._held_back)
            if len(batch) > room:
                self.dropped_paused += len(batch) - max(room, 0)
                batch = batch[:max(room, 0)]
            self._held_back.extend(batch)
            return
        self._process(batch)

    async def _read_loop(self) -> None:
        """Task mode, for channels without a sink."""
        channel = self.channel
        resume = self._resume
        assert resume is not None
        try:
            while True:
                while self._paused():
                    resume.clear()
                    await resume.wait()
                self._process(await channel.recv_many())
        except ChannelClosedError as exc:
            self._lost(exc)
        except Exception as exc:  # a bug in a stack must not die silently
            self.error = exc
            raise

    def _process(self, batch: list[bytes]) -> None:
        """Take in ``batch``, then whatever else the OS already holds, up to a bound."""
        driver = self._driver
        assert driver is not None
        channel, receive, read_on, paused = self.channel, self._receive, self._read_on, self._paused
        flush = driver.flush
        clock = driver.loop.time
        trace = self._packet_trace
        taken = 0
        started = clock()
        while True:
            now = clock()
            if trace is not None:
                for datagram in batch:
                    trace("packet_in", now, datagram)
            receive(batch, now)
            taken += len(batch)
            sent = flush(now)
            if taken >= MAX_PER_TURN or paused() or clock() - started >= MAX_TURN_SECONDS:
                break
            batch = read_on(channel, sent)
            if not batch:
                break
        driver.settle()

    def _lost(self, exc: ChannelClosedError) -> None:
        self.error = exc
        self._sent.wake()
        if self._on_lost is not None:
            self._on_lost(exc)
