"""The one asyncio driver of every sans-IO stack (the aioquic ``asyncio/`` pattern):
the group node, the M2MP endpoint, infrastructure hosts and members.

A :class:`Driver` owns the event loop's clock and one timer; an :class:`Adapter`
owns the stack's links (a datagram channel; TCP streams and UDP sockets for
infrastructure mode) and maps the core's outputs onto them and the links'
inputs into the core. Everything that is the same for every stack is here,
once:

* the loop is taken when the driver starts (never in a constructor);
* one timer, armed for the core's earliest deadline (a later deadline keeps the
  armed timer, which fires first and re-arms), and one ``now`` per turn that is
  never before the deadline that fired: the loop may run a timer up to its clock
  resolution early, and the core must still see its deadline as passed;
* the output step (:meth:`Driver.flush`): the adapter takes the core's output
  (nothing has left yet), the driver carries out the core's save with
  :func:`m2mc.core.carry_out` (commit, then the trace the commit makes true), and
  only then the adapter transmits the output: nothing leaves the process that
  the store does not hold;
* batching: :meth:`Driver.poke` services the core now (after an API call, or a
  batch of datagrams), :meth:`Driver.poke_soon` once per loop iteration for
  everything that arrived meanwhile (inputs that come one datagram at a time);
* shutdown: no timer and no output after :meth:`Driver.close`;
* a failed commit stops the stack (fail-stop): the turn's output is dropped, and the
  driver takes no more turns, arms no timer and calls ``on_failure``. Going on would
  send later output built on state that is not on disk (a save left out of the log,
  the next one acknowledging past it), which a restart would then contradict.

Back-pressure lives with the links (runtime/channel_link.py) and the stack's own
face (the application's queues); :class:`Waiters` is the one way a task waits
for room there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from m2mc.core import carry_out
from m2mc.trace.schema import NullSink, TraceJournal, TraceSink


class Core(Protocol):
    """What the driver itself calls on a core (its inputs are the adapter's)."""

    def on_timer(self, now: float) -> None: ...

    def next_deadline(self) -> float | None: ...


class Adapter(Protocol):
    """A stack's I/O: its links, and the map between them and the core.

    ``open_links`` opens the links; their inputs go into the core with
    ``driver.now()`` and are followed by ``driver.poke()`` (a batch) or
    ``driver.poke_soon()`` (one datagram at a time). ``take_output`` takes what
    the core wants out (its datagrams or frames, and events), ``transmit`` hands
    that to the links and the owner once the driver carried out the core's save,
    and returns how many datagrams went at once. ``close_links`` closes them.
    """

    async def open_links(self, driver: Driver) -> None: ...

    def take_output(self, now: float) -> Any: ...

    def transmit(self, output: Any, now: float) -> int: ...

    async def close_links(self) -> None: ...


def _nothing() -> None:
    return None


class Driver:
    """Runs ``core`` with the links of ``adapter`` on the running event loop.

    ``commit``: the store's commit, for a core with durable state (its saves'
    records go there); ``trace``/``journal``: where a save's trace goes (the sink
    and journal the core was given). ``on_output``: called after each turn of work,
    for the owner to take the core's events. ``on_failure``: called with the error
    once a commit failed (module docstring; ``failure`` keeps it).
    """

    def __init__(self, core: Core, adapter: Adapter, *,
                 commit: Callable[[Any], None] | None = None,
                 trace: TraceSink | None = None, journal: TraceJournal | None = None,
                 on_output: Callable[[], None] | None = None,
                 on_failure: Callable[[BaseException], None] | None = None) -> None:
        self.core = core
        self.adapter = adapter
        take = getattr(core, "take_save", None)
        self._take_save: Callable[[float], Any] | None = take if callable(take) else None
        self._commit = commit
        self._trace: TraceSink = trace or NullSink()
        self._journal = journal
        self._take_output = adapter.take_output
        self._transmit = adapter.transmit
        self._on_output = on_output or _nothing
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0
        self._soon = False
        self.closed = False
        self._on_failure = on_failure
        self.failure: BaseException | None = None  # the commit's error, if one failed

    # --------------------------------------------------------------- lifecycle
    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("driver not started")
        return self._loop

    @property
    def started(self) -> bool:
        return self._loop is not None

    def now(self) -> float:
        return self.loop.time()

    async def start(self) -> None:
        """Take the running loop and open the adapter's links."""
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        await self.adapter.open_links(self)

    async def close(self) -> None:
        """No timer and no output from now on; the adapter's links are closed."""
        if self.closed:
            return
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._loop is not None:
            await self.adapter.close_links()

    # ------------------------------------------------------------------ output
    def flush(self, now: float) -> int:
        """The output step: take the core's output, carry out its save (commit, then
        trace), then transmit the output; returns what went at once."""
        output = self._take_output(now)
        take = self._take_save
        if take is not None:
            try:
                carry_out(take(now), self._commit, self._trace, self._journal)
            except Exception as exc:  # (whatever the store raised: it did not commit)
                self._failed(exc)
                return 0  # the output is dropped; the owner was told
        return self._transmit(output, now)

    def _failed(self, exc: BaseException) -> None:
        """A commit failed: no more turns, no timer, the owner told (fail-stop)."""
        self.closed = True
        self.failure = exc
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._on_failure is not None:
            self._on_failure(exc)

    def settle(self) -> None:
        """After a turn of work: re-arm the timer, let the owner take the events."""
        self.arm_timer()
        self._on_output()

    def poke(self) -> None:
        """Service the core now (after an API call into it, or a batch of input)."""
        loop = self._loop
        if loop is None or self.closed:
            return
        self.flush(loop.time())
        self.settle()

    def poke_soon(self) -> None:
        """Service the core once this loop iteration is over: everything that arrives
        meanwhile is batched into one output step."""
        if not self._soon and not self.closed:
            self._soon = True
            self.loop.call_soon(self._poked)

    def _poked(self) -> None:
        self._soon = False
        self.poke()

    # ------------------------------------------------------------------ timers
    def arm_timer(self) -> None:
        """One timer, for the core's earliest deadline."""
        if self.closed:
            return
        deadline = self.core.next_deadline()
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
        if self.closed:
            return
        now = max(self.loop.time(), self._timer_when)
        self.core.on_timer(now)
        self.flush(now)
        self.settle()


class Waiters:
    """Tasks waiting for something the driver's side makes true (room in a queue,
    an empty backlog): :meth:`wait` in the task, :meth:`wake` where it happened."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    def __bool__(self) -> bool:
        return bool(self._futures)

    async def wait(self) -> None:
        future = asyncio.get_running_loop().create_future()
        self._futures.append(future)
        await future

    def wake(self) -> None:
        futures, self._futures = self._futures, []
        for future in futures:
            if not future.done():
                future.set_result(None)
