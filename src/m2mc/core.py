"""The shape every sans-IO protocol stack shares, so both drivers can run any of them.

A driver (asyncio runtime or simulator) owns the clock and the channel. It calls
``receive_datagram`` for each datagram that arrives, ``on_timer`` when
``next_deadline`` has passed, and after every call transmits what
``datagrams_to_send`` returns. The stack never blocks, sleeps or reads a clock.
A stack may also have ``receive_datagrams(datagrams, now)``, the same as
``receive_datagram`` for each in order; the asyncio driver then hands it each
batch it reads at once. One with ``takes_blocks = True`` as well (the M2MP layer
and the group node) may be handed :class:`~m2mc.wire.segments.Segments` in a
batch: several datagrams of one read, kept joined, each to be taken as its
datagrams in order.

A stack with durable state (:class:`DurableStack`: the group node with its log,
an infrastructure member with its saved state) never commits anything itself.
Before each output the driver takes a :class:`Save` from it and carries it out
with :func:`carry_out` (commit, then write the trace the commit makes true), and
only then takes the datagrams (and events) the stack wants out: so nothing
leaves the process that the store does not hold (docs/architecture.md,
"Effects").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from m2mc.trace.schema import TraceEvent, TraceJournal, TraceSink

R = TypeVar("R")


class SansIOStack(Protocol):
    def receive_datagram(self, datagram: bytes, now: float) -> None: ...

    def on_timer(self, now: float) -> None: ...

    def next_deadline(self) -> float | None: ...

    def datagrams_to_send(self, now: float) -> list[bytes]: ...


@dataclass(frozen=True, slots=True)
class Save(Generic[R]):
    """What a stack asks its driver to make durable before anything it outputs
    from now on leaves the process.

    ``record``: what the driver's store commits (the group log: the time of the
    commit; a member: a :class:`~m2mc.infra.persist.MemberCommit`).
    ``trace_text``: with a trace journal, the rendered lines of the events this save
    makes true; the stack already put them in the store's pending writes, and the
    driver appends them to the trace file right after the commit
    (runtime/tracing.py). ``trace_events``: without a journal, the events the
    driver emits after the commit.
    """

    record: R
    trace_text: str = ""
    trace_events: Sequence[TraceEvent] = ()


class DurableStack(Protocol):
    def take_save(self, now: float) -> Save[Any] | None:
        """What must be durable before the next output leaves (None: nothing).
        The driver carries it out (:func:`carry_out`), then takes the output."""
        ...


def carry_out(save: Save[R] | None, commit: Callable[[R], None] | None, trace: TraceSink,
              journal: TraceJournal | None = None) -> None:
    """Carry out ``save`` in the one order every driver keeps: commit, then trace.

    ``commit`` is the store's (None: the stack has no store, only trace events wait).
    A save with ``trace_text`` needs the ``journal`` the stack rendered it with.
    """
    if save is None:
        return
    if commit is not None:
        commit(save.record)
    if save.trace_text:
        if journal is None:
            raise ValueError("a save with journal lines needs the trace journal")
        journal.append(save.trace_text)
    elif save.trace_events:
        emit = trace.emit
        for event in save.trace_events:
            emit(event)
