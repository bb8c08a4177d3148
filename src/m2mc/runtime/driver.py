"""The asyncio driver of any :class:`~m2mc.core.SansIOStack` over a
:class:`~m2mc.transport.channel.Channel`: the thin glue between real sockets and
real time and a sans-IO core (the aioquic ``asyncio/`` pattern).

It reads datagrams in batches and feeds them to the stack, calls ``on_timer``
when ``next_deadline`` passes, and after every input hands ``datagrams_to_send``
to the channel (``send_nowait`` first, a writer task for the rest). ``poke()``
is for the owner after an API call into the stack. A stack with
``network_changed(now)`` (the group layer) is told when the channel's interface
comes back up (``Channel.watch_link``; docs/group.md section 4). ``on_input`` is called after
each batch of work so the owner can drain the stack's events.

Back-pressure: while ``paused()`` returns True the reader stops taking
datagrams off the channel (its bounded inbox then drops, like a full socket
buffer, and the group layer's repair fetches what was lost).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable

from m2mc.core import SansIOStack
from m2mc.transport.channel import Channel, ChannelClosedError

_MAX_PER_TURN = 4096  # datagrams taken in before yielding to the event loop
_MAX_HELD_BACK = 8192  # datagrams kept while the owner is paused (sink mode); more are dropped


class StackDriver:
    def __init__(self, stack: SansIOStack, channel: Channel, *,
                 on_input: Callable[[], None] | None = None,
                 paused: Callable[[], bool] | None = None,
                 packet_trace: Callable[[str, float, bytes], None] | None = None) -> None:
        self.stack = stack
        self.channel = channel
        # ("packet_in" | "packet_out", now, datagram) for every datagram, when tracing them
        self._packet_trace = packet_trace
        self._on_input = on_input or (lambda: None)
        self._paused = paused or (lambda: False)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._pending: deque[bytes] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0
        self._resume = asyncio.Event()
        self._held_back: list[bytes] = []  # sink mode: input taken while paused
        self.dropped_paused = 0
        self._sent_waiters: list[asyncio.Future[None]] = []
        self.error: BaseException | None = None
        self.datagrams_out = 0
        self.watching_link = False  # the channel tells us when its interface comes back

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("driver not started")
        return self._loop

    def now(self) -> float:
        return self.loop.time()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.channel.start()
        # Channels that can push datagrams from their reader callback save a task
        # switch per wake-up; the others are read by a task.
        if not self.channel.set_sink(self._on_datagrams):
            self._reader = self._loop.create_task(self._read_loop())
        # Coming back into range: a stack that takes the network's word for it
        # (GroupNode.network_changed) hears when the channel's interface comes back.
        self.watching_link = (callable(getattr(self.stack, "network_changed", None))
                              and self.channel.watch_link(self.network_changed))

    def network_changed(self) -> None:
        """The channel's interface came back (or the owner knows the network changed)."""
        change = getattr(self.stack, "network_changed", None)
        if change is None or self._loop is None:
            return
        now = self.now()
        change(now)
        self._flush(now)
        self._arm_timer()
        self._on_input()

    async def close(self) -> None:
        self.channel.set_sink(None)
        for task in (self._reader, self._writer):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await self.channel.close()
        self._wake_sent()

    # ----------------------------------------------------------------- output
    def poke(self) -> None:
        """After an API call into the stack: transmit what it wants sent, re-arm the timer."""
        self._flush(self.now())
        self._arm_timer()
        self._on_input()

    def resume(self) -> None:
        """The owner made room (see ``paused``): let the reader go on."""
        self._resume.set()
        if self._held_back and not self._paused():
            held, self._held_back = self._held_back, []
            self._process(held)

    @property
    def backlog(self) -> int:
        return len(self._pending)

    async def wait_sent(self) -> None:
        """Wait until the channel took everything handed to it so far."""
        while self._pending:
            future = self.loop.create_future()
            self._sent_waiters.append(future)
            await future

    def _flush(self, now: float) -> int:
        out = self.stack.datagrams_to_send(now)
        if not out:
            return 0
        if self._packet_trace is not None:
            for datagram in out:
                self._packet_trace("packet_out", now, datagram)
        sent = 0
        if not self._pending:
            send_nowait = self.channel.send_nowait
            try:
                for datagram in out:
                    if not send_nowait(datagram):
                        break
                    sent += 1
            except ChannelClosedError as exc:
                self.error = exc
                return sent
        if sent < len(out):
            self._pending.extend(out[sent:])
            if self._writer is None or self._writer.done():
                self._writer = self.loop.create_task(self._write_pending())
        self.datagrams_out += sent
        return sent

    async def _write_pending(self) -> None:
        pending = self._pending
        try:
            while pending:
                await self.channel.send(pending[0])
                pending.popleft()
                self.datagrams_out += 1
        except ChannelClosedError as exc:
            self.error = exc
        self._wake_sent()

    def _wake_sent(self) -> None:
        waiters, self._sent_waiters = self._sent_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    # ------------------------------------------------------------------ input
    def _on_datagrams(self, batch: list[bytes]) -> None:
        """Sink mode: called by the channel's reader callback."""
        if self._paused():
            # The channel's own bound is bypassed in sink mode: keep ours.
            room = _MAX_HELD_BACK - len(self._held_back)
            if len(batch) > room:
                self.dropped_paused += len(batch) - max(room, 0)
                batch = batch[:max(room, 0)]
            self._held_back.extend(batch)
            return
        self._process(batch)

    async def _read_loop(self) -> None:
        """Task mode, for channels without a sink."""
        channel = self.channel
        try:
            while True:
                while self._paused():
                    self._resume.clear()
                    await self._resume.wait()
                self._process(await channel.recv_many())
        except ChannelClosedError as exc:
            self.error = exc
        except Exception as exc:  # a bug in a stack must not die silently
            self.error = exc
            raise

    def _process(self, batch: list[bytes]) -> None:
        """Take in ``batch``, then whatever else the OS already holds, up to a bound.

        Reading on while datagrams wait, instead of returning to the event loop
        after each read, matters twice: each packet we send under M2MP flow control
        brings its looped-back copy straight back, and on a busy machine every
        return to the event loop may cost a wait for the CPU.
        """
        channel = self.channel
        stack = self.stack
        # A stack that takes a batch at once (GroupNode) saves its per-call work.
        receive_many = getattr(stack, "receive_datagrams", None)
        receive = stack.receive_datagram
        clock = self.loop.time
        taken = 0
        while True:
            now = clock()
            if self._packet_trace is not None:
                for datagram in batch:
                    self._packet_trace("packet_in", now, datagram)
            if receive_many is not None:
                receive_many(batch, now)
            else:
                for datagram in batch:
                    receive(datagram, now)
            taken += len(batch)
            self._flush(now)
            if taken >= _MAX_PER_TURN or self._paused():
                break
            batch = channel.poll() or []
            if not batch:
                break
            while len(batch) < 64:
                more = channel.poll()
                if not more:
                    break
                batch.extend(more)
        self._arm_timer()
        self._on_input()

    # ------------------------------------------------------------------ timers
    def _arm_timer(self) -> None:
        deadline = self.stack.next_deadline()
        if deadline is None:
            return
        if self._timer is not None:
            if self._timer_when <= deadline:
                return  # it fires first, then re-arms for whatever is next
            self._timer.cancel()
        self._timer_when = deadline
        self._timer = self.loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = max(self.loop.time(), self._timer_when)
        self.stack.on_timer(now)
        self._flush(now)
        self._arm_timer()
        self._on_input()
