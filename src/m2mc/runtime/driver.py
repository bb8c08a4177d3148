"""The asyncio driver of any :class:`~m2mc.core.SansIOStack` over a
:class:`~m2mc.transport.channel.Channel`: the thin glue between real sockets and
real time and a sans-IO core (the aioquic ``asyncio/`` pattern).

It reads datagrams in batches and feeds them to the stack, calls ``on_timer``
when ``next_deadline`` passes, and after every input hands ``datagrams_to_send``
to the channel (``send_nowait`` first, a writer task for the rest). ``poke()``
is for the owner after an API call into the stack. ``on_input`` is called after
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

_SHORTCUT_ROUNDS = 64  # input rounds handled without yielding to the event loop


class StackDriver:
    def __init__(self, stack: SansIOStack, channel: Channel, *,
                 on_input: Callable[[], None] | None = None,
                 paused: Callable[[], bool] | None = None) -> None:
        self.stack = stack
        self.channel = channel
        self._on_input = on_input or (lambda: None)
        self._paused = paused or (lambda: False)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._pending: deque[bytes] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0
        self._resume = asyncio.Event()
        self._sent_waiters: list[asyncio.Future[None]] = []
        self.error: BaseException | None = None
        self.datagrams_out = 0

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
        self._reader = self._loop.create_task(self._read_loop())

    async def close(self) -> None:
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
    async def _read_loop(self) -> None:
        channel = self.channel
        stack = self.stack
        clock = self.loop.time
        try:
            while True:
                while self._paused():
                    self._resume.clear()
                    await self._resume.wait()
                batch = await channel.recv_many()
                rounds = 0
                while True:
                    now = clock()
                    receive = stack.receive_datagram
                    for datagram in batch:
                        receive(datagram, now)
                    sent = self._flush(now)
                    self._arm_timer()
                    self._on_input()
                    # While each packet we send brings its looped-back copy straight back
                    # (M2MP flow control) keep going without a trip through the event loop.
                    if not sent or rounds == _SHORTCUT_ROUNDS or self._paused():
                        break
                    rounds += 1
                    channel.poll()
                    batch = channel.recv_nowait()
                    if not batch:
                        break
        except ChannelClosedError as exc:
            self.error = exc
        except Exception as exc:  # a bug in a stack must not die silently
            self.error = exc
            raise

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
