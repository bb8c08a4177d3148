"""Trace events of a real run (CONTRACTS section 4): ``<trace_dir>/<pid>.jsonl``
(``<pid>.1.jsonl``, ... for later incarnations of the same process)
with ``t`` in wall-clock seconds, so traces of several processes line up.

The stacks stamp events with the driver's monotonic clock; :class:`WallClockSink`
shifts them by the offset between the two clocks taken once at start, so ``t``
never jumps backwards if the system clock is adjusted during the run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from m2mc.trace.schema import NullSink, TraceEvent, TraceSink
from m2mc.trace.writer import TraceWriter, safe_file_stem


class WallClockSink:
    def __init__(self, inner: TraceSink, offset: float) -> None:
        self.inner = inner
        self.offset = offset
        self.enabled = inner.enabled

    def emit(self, event: TraceEvent) -> None:
        self.inner.emit(dataclasses.replace(event, t=round(event.t + self.offset, 6)))


def open_trace(trace_dir: str | Path | None, pid: str, run_id: str,
               monotonic: Callable[[], float], *, flush_every: int = 8192
               ) -> tuple[TraceSink, Callable[[], None] | None]:
    """The sink for ``pid`` and a function that flushes and closes it."""
    if trace_dir is None:
        return NullSink(), None
    # A restarted process must not overwrite what its earlier incarnation wrote.
    stem = safe_file_stem(pid)
    path = Path(trace_dir) / f"{stem}.jsonl"
    n = 0
    while path.exists():
        n += 1
        path = Path(trace_dir) / f"{stem}.{n}.jsonl"
    writer = TraceWriter(path, run=run_id, node=pid,
                         flush_every=flush_every, flush_interval=0.5)
    return WallClockSink(writer, time.time() - monotonic()), writer.close
