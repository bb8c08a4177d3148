"""Any :class:`~m2mc.core.SansIOStack` on one datagram channel, run by the one
:class:`~m2mc.runtime.driver.Driver`: the group node under :class:`m2mc.api.Node`.

The stack's one link is the channel (runtime/channel_link.py: batch receive,
``send_nowait`` first then a writer task, sink mode, reading on while datagrams
wait). A stack that takes a batch at once (``receive_datagrams``, the group node)
gets each batch whole. A stack with durable state (``take_save``) has its save
carried out before each output (``commit`` is its store's). A stack with
``network_changed(now)`` (the group layer) is told when the channel's interface
comes back up (``Channel.watch_link``; docs/group.md section 4). ``on_input`` is
called after each turn of work so the owner can drain the stack's events; while
``paused()`` returns True the link stops taking datagrams (see channel_link.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from m2mc.core import SansIOStack
from m2mc.errors import LogWriteError
from m2mc.runtime.channel_link import ChannelLink, PacketTrace
from m2mc.runtime.driver import Driver
from m2mc.trace.schema import TraceJournal, TraceSink
from m2mc.transport.channel import Channel


class StackDriver:
    """The adapter of a stack with one channel, and its driver."""

    def __init__(self, stack: SansIOStack, channel: Channel, *,
                 on_input: Callable[[], None] | None = None,
                 paused: Callable[[], bool] | None = None,
                 packet_trace: PacketTrace | None = None,
                 commit: Callable[[Any], None] | None = None,
                 trace: TraceSink | None = None, journal: TraceJournal | None = None,
                 on_failure: Callable[[BaseException], None] | None = None) -> None:
        self.stack = stack
        self.channel = channel
        self.link = ChannelLink(channel, _receiver(stack), paused=paused,
                                packet_trace=packet_trace,
                                blocks=getattr(stack, "takes_blocks", False) is True)
        # The adapter's output step is the stack's and the link's own: no call between
        # (this runs after every batch and every API call).
        self.take_output: Callable[[float], list[bytes]] = stack.datagrams_to_send
        self.transmit: Callable[[list[bytes], float], int] = self.link.send
        self.driver = Driver(stack, self, commit=commit, trace=trace, journal=journal,
                             on_output=on_input, on_failure=on_failure)
        self.watching_link = False  # the channel tells us when its interface comes back

    def raise_failure(self) -> None:
        """Raise LogWriteError if a commit of the stack's log failed: the driver
        stopped the stack there (fail-stop, runtime/driver.py)."""
        failure = self.driver.failure
        if failure is not None:
            raise LogWriteError(f"node stopped: its log could not be written: {failure}"
                                ) from failure

    # ---------------------------------------------------------------- adapter
    async def open_links(self, driver: Driver) -> None:
        await self.link.open(driver)
        # Coming back into range: a stack that takes the network's word for it
        # (GroupNode.network_changed) hears when the channel's interface comes back.
        self.watching_link = (callable(getattr(self.stack, "network_changed", None))
                              and self.link.watch_link(self.network_changed))

    async def close_links(self) -> None:
        await self.link.close()

    # ------------------------------------------------------------------ owner
    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.driver.loop

    def now(self) -> float:
        return self.driver.now()

    async def start(self) -> None:
        await self.driver.start()

    async def close(self) -> None:
        await self.driver.close()

    def poke(self) -> None:
        """After an API call into the stack: save, transmit, re-arm the timer."""
        self.driver.poke()

    def resume(self) -> None:
        """The owner made room (see ``paused``): let the reader go on."""
        self.link.resume()

    def network_changed(self) -> None:
        """The channel's interface came back (or the owner knows the network changed)."""
        change = getattr(self.stack, "network_changed", None)
        if change is None or not self.driver.started or self.driver.closed:
            return
        change(self.driver.now())
        self.driver.poke()

    @property
    def backlog(self) -> int:
        return self.link.backlog

    async def wait_sent(self) -> None:
        """Wait until the channel took everything handed to it so far."""
        await self.link.wait_sent()

    @property
    def error(self) -> BaseException | None:
        return self.link.error

    @property
    def datagrams_out(self) -> int:
        return self.link.datagrams_out

    @property
    def dropped_paused(self) -> int:
        return self.link.dropped_paused


def _receiver(stack: SansIOStack) -> Callable[[Sequence[bytes], float], None]:
    """A stack that takes a batch at once (GroupNode) saves its per-call work."""
    receive_many: Callable[[Sequence[bytes], float], None] | None = getattr(
        stack, "receive_datagrams", None)
    if receive_many is not None:
        return receive_many
    receive = stack.receive_datagram

    def each(batch: Sequence[bytes], now: float) -> None:
        for datagram in batch:
            receive(datagram, now)

    return each
