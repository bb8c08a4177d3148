"""Trace events of a real run (docs/interfaces.md §4): ``<trace_dir>/<pid>.jsonl``
(``<pid>.1.jsonl``, ... for later incarnations of the same process)
with ``t`` in wall-clock seconds, so traces of several processes line up.

The stacks stamp events with the driver's monotonic clock; :class:`WallClockSink`
shifts them by the offset between the two clocks taken once at start, so ``t``
never jumps backwards if the system clock is adjusted during the run.

A node with a durable log keeps its trace exactly in step with the log, even
across ``kill -9`` (docs/decisions.md, "The trace of a node with a durable log
survives kill -9"): the group layer renders the events of each batch
(:meth:`WallClockSink.render`) and puts that text in the same SQLite commit as the
state the events describe; the driver commits, then appends it to the file
(:meth:`WallClockSink.append`; m2mc.core.carry_out). Only the window between the commit and that one
``write`` can lose events, and the next incarnation puts back whatever of the
last batch the file lacks (:meth:`WallClockSink.recover`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from m2mc.trace.schema import NullSink, TraceEvent, TraceSink, detail_json
from m2mc.trace.writer import TraceWriter, event_row, row_to_json, safe_file_stem


class WallClockSink:
    """Events shifted to wall-clock time, written by one :class:`TraceWriter`.

    ``previous`` is the file of this process's last incarnation that has events,
    if any (what :meth:`recover` compares the durable log's last batch with).
    """

    def __init__(self, inner: TraceWriter, offset: float,
                 previous: Path | None = None) -> None:
        self.inner = inner
        self.offset = offset
        self.enabled = inner.enabled
        self.previous = previous

    def emit(self, event: TraceEvent) -> None:
        self.inner.emit(dataclasses.replace(event, t=round(event.t + self.offset, 6)))

    # ---------------------------------------------------------------- journal
    def render(self, events: Iterable[TraceEvent]) -> str:
        """The JSON lines of ``events`` exactly as the file will hold them."""
        inner, offset = self.inner, self.offset
        return "".join(
            row_to_json(event_row(e, inner.run, inner.node, round(e.t + offset, 6))) + "\n"
            for e in events)

    def append(self, text: str) -> None:
        """Write rendered lines through to the file now (after the log commit)."""
        self.inner.append_text(text)

    def recover(self, last_batch: str | None) -> int:
        """Put back the lines of the durable log's last batch that the previous
        incarnation's file does not end with (it was killed between its commit and
        its write); returns how many lines were put back."""
        if not last_batch or not self.enabled:
            return 0
        tail = _file_tail(self.previous, len(last_batch)) if self.previous else ""
        lines = last_batch.splitlines(keepends=True)
        # The longest prefix of the batch that the file ends with made it to disk.
        for written in range(len(lines), 0, -1):
            if tail.endswith("".join(lines[:written])):
                break
        else:
            written = 0
        missing = "".join(lines[written:])
        self.append(missing)
        return len(lines) - written


def _file_tail(path: Path, size: int) -> str:
    with path.open("rb") as handle:
        handle.seek(0, 2)
        end = handle.tell()
        handle.seek(max(0, end - size))
        return handle.read().decode("ascii", errors="replace")


def open_trace(trace_dir: str | Path | None, pid: str, run_id: str,
               monotonic: Callable[[], float], *, flush_every: int = 8192
               ) -> tuple[TraceSink, Callable[[], None] | None]:
    """The sink for ``pid`` and a function that flushes and closes it."""
    if trace_dir is None:
        return NullSink(), None
    # A restarted process must not overwrite what its earlier incarnation wrote.
    stem = safe_file_stem(pid)
    path = Path(trace_dir) / f"{stem}.jsonl"
    previous: Path | None = None
    n = 0
    while path.exists():
        if path.stat().st_size > 0:
            previous = path
        n += 1
        path = Path(trace_dir) / f"{stem}.{n}.jsonl"
    writer = TraceWriter(path, run=run_id, node=pid, flush_every=flush_every,
                         flush_interval=0.5, clock=monotonic)
    return WallClockSink(writer, time.time() - monotonic(), previous), writer.close


def incarnation_events(journal: WallClockSink, last_batch: str | None, pid: str, run: str,
                       now: float, clean_close: bool) -> list[TraceEvent]:
    """``restart`` for a node that comes back to its durable log, after a ``crash``
    when the last incarnation did not close: dated at the last event the log
    recorded (``last_batch``: the trace lines of its last commit), the latest moment
    the old process is known to have been alive (ad hoc nodes and infrastructure
    members alike)."""
    events = []
    if not clean_close:
        crashed = now
        last = (last_batch or "").rstrip("\n").rpartition("\n")[2]
        if last:
            crashed = min(now, float(json.loads(last)["t"]) - journal.offset)
        events.append(TraceEvent(run, pid, crashed, "crash"))
    events.append(TraceEvent(run, pid, now, "restart", detail=detail_json(clean=clean_close)))
    return events
