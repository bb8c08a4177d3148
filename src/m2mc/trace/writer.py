"""Trace writers (docs/interfaces.md §4): buffered JSON Lines, optional Parquet, ``run.json``.

Both drivers use these: the asyncio runtime (wall-clock ``t``) and the simulator
(virtual ``t``). Writing never blocks the protocol for long: events are kept in
memory as JSON lines and appended to the file in batches, when ``flush_every``
events are buffered, when ``flush_interval`` seconds of the ``clock`` the caller
gives (the driver's) have passed since the last flush, and on
:meth:`TraceWriter.close`. The writer reads no clock of its own. The file is opened only
for the duration of a flush, so a run with thousands of nodes never holds
thousands of file descriptors, and a process that dies loses at most one interval.

Parquet is produced from the finished JSONL file on close (pyarrow is imported
lazily; without it only JSONL is written). Serialisation is deterministic: the
same events give byte-identical files.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
from collections.abc import Callable, Iterator, Mapping
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

from m2mc.trace.schema import COLUMNS, SCHEMA_VERSION, TraceEvent

# A row is the 12 schema columns in COLUMNS order.
Row = tuple[str, str, float, str, str | None, str | None, str | None, str | None,
            int | None, int | None, str | None, str | None]

_STR_KEYS = tuple('"' + name + '":' for name in COLUMNS)


def _q(value: str | None) -> str:
    return "null" if value is None else encode_basestring_ascii(value)


def _n(value: int | None) -> str:
    return "null" if value is None else str(int(value))


def row_to_json(row: Row) -> str:
    """One JSON object, keys in schema order, same text as ``json.dumps`` compact."""
    run, node, t, event, group, mid, parent, order, gseq, nbytes, peer, detail = row
    k = _STR_KEYS
    return "".join((
        "{", k[0], _q(run), ",", k[1], _q(node), ",", k[2], repr(float(t)), ",",
        k[3], _q(event), ",", k[4], _q(group), ",", k[5], _q(mid), ",", k[6], _q(parent), ",",
        k[7], _q(order), ",", k[8], _n(gseq), ",", k[9], _n(nbytes), ",", k[10], _q(peer), ",",
        k[11], _q(detail), "}",
    ))


def event_row(event: TraceEvent, run: str = "", node: str = "", t: float | None = None) -> Row:
    """The row of ``event``; empty ``run``/``node`` are filled, ``t`` replaced if given."""
    return (event.run or run, event.node or node, event.t if t is None else t, event.event,
            event.group, event.mid, event.parent, event.order, event.gseq, event.bytes,
            event.peer, event.detail)


def parquet_available() -> bool:
    """True when pyarrow can be imported (the ``pipeline`` extra)."""
    return importlib.util.find_spec("pyarrow") is not None


class TraceWriter:
    """A :class:`~m2mc.trace.schema.TraceSink` that appends JSON lines to one file.

    ``run``/``node`` fill the columns an event leaves empty. ``enabled=False``
    turns the writer into a sink that drops everything (and creates no file).
    ``parquet_path`` (needs pyarrow) gets a Parquet copy of the file on close.
    ``flush_interval`` (seconds) needs the ``clock`` to measure it with.
    """

    def __init__(self, path: Path, *, run: str = "", node: str = "",
                 flush_every: int = 8192, flush_interval: float | None = None,
                 clock: Callable[[], float] | None = None,
                 parquet_path: Path | None = None, enabled: bool = True) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every must be >= 1, got {flush_every}")
        if flush_interval is not None and clock is None:
            raise ValueError("flush_interval needs the caller's clock")
        self.path = Path(path)
        self.run = run
        self.node = node
        self.enabled = enabled
        self.parquet_path = parquet_path
        self.events_written = 0
        self._flush_every = flush_every
        self._flush_interval = flush_interval
        self._clock = clock or _no_clock
        self._last_flush = self._clock() if flush_interval is not None else 0.0
        self._lines: list[str] = []
        self._closed = False
        self._fd: int | None = None  # kept open by append_text (one file per real node)
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(b"")  # a node with no events still has its (empty) file

    # ------------------------------------------------------------------ input
    def emit(self, event: TraceEvent) -> None:
        if self.enabled:
            self.write_row(event_row(event, self.run, self.node))

    def write_row(self, row: Row) -> None:
        """Append one row (hot path of the drivers: no TraceEvent object needed)."""
        if not self.enabled:
            return
        lines = self._lines
        lines.append(row_to_json(row))
        if len(lines) >= self._flush_every:
            self.flush()
        elif self._flush_interval is not None:
            self.maybe_flush()

    def maybe_flush(self) -> None:
        """Flush if ``flush_interval`` has passed; a runtime may call this from a periodic timer."""
        if self._flush_interval is not None and self._lines and (
                self._clock() - self._last_flush >= self._flush_interval):
            self.flush()

    # ----------------------------------------------------------------- output
    def flush(self) -> None:
        if self._flush_interval is not None:
            self._last_flush = self._clock()
        if not self._lines or not self.enabled:
            return
        lines, self._lines = self._lines, []
        with self.path.open("a", encoding="ascii", newline="\n") as handle:
            handle.write("\n".join(lines))
            handle.write("\n")
        self.events_written += len(lines)

    def append_text(self, text: str) -> None:
        """Write ``text`` (whole JSON lines, each ending in a newline) after everything
        emitted so far, now: one ``write`` on a descriptor kept open, so a process killed
        afterwards has it in the file (the kernel keeps it; no fsync)."""
        if not self.enabled or not text:
            return
        self.flush()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = text.encode("ascii")
        while data:
            data = data[os.write(self._fd, data):]
        self.events_written += text.count("\n")

    def close(self) -> None:
        """Flush what is buffered and write the Parquet copy if one was asked for."""
        if self._closed:
            return
        self._closed = True
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.enabled and self.parquet_path is not None and parquet_available():
            jsonl_to_parquet(self.path, self.parquet_path)


class TraceDirectory:
    """One :class:`TraceWriter` per node under ``directory`` (``<node>.jsonl``).

    Registers an ``atexit`` hook so buffered events reach the disk when the
    process exits without calling :meth:`close`.
    """

    def __init__(self, directory: Path, run: str, *, parquet: bool = False,
                 enabled: bool = True, flush_every: int = 8192,
                 flush_interval: float | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.directory = Path(directory)
        self.run = run
        self.parquet = parquet and parquet_available()
        self.enabled = enabled
        self._flush_every = flush_every
        self._flush_interval = flush_interval
        self._clock = clock
        self._writers: dict[str, TraceWriter] = {}
        atexit.register(self.close)

    def writer(self, node: str) -> TraceWriter:
        found = self._writers.get(node)
        if found is None:
            name = safe_file_stem(node)
            found = TraceWriter(
                self.directory / f"{name}.jsonl", run=self.run, node=node,
                flush_every=self._flush_every, flush_interval=self._flush_interval,
                clock=self._clock, enabled=self.enabled,
                parquet_path=self.directory / f"{name}.parquet" if self.parquet else None)
            self._writers[node] = found
        return found

    def flush(self) -> None:
        for writer in self._writers.values():
            writer.flush()

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        atexit.unregister(self.close)

    @property
    def events_written(self) -> int:
        return sum(w.events_written for w in self._writers.values())


def _no_clock() -> float:
    return 0.0  # never read: without flush_interval the writer flushes by count


def safe_file_stem(node: str) -> str:
    """A file name for a node id: keeps ``[A-Za-z0-9._-]``, replaces the rest with ``_``."""
    stem = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in node)
    return stem.lstrip(".") or "_"


# -------------------------------------------------------------------- run.json
def write_run_json(path: Path, info: Mapping[str, Any]) -> None:
    """Write ``run.json`` deterministically (sorted keys, 2-space indent, trailing newline).

    ``info`` should hold at least ``run``, ``scenario``, ``seed``, ``version``,
    ``orderings`` and ``start``; ``schema`` is added.
    """
    body = {"schema": SCHEMA_VERSION, **info}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")


# ------------------------------------------------------------------- reading
def read_jsonl(path: Path) -> Iterator[TraceEvent]:
    """Events of one JSONL trace file, in file order."""
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                fields = json.loads(line)
                yield TraceEvent(**{name: fields.get(name) for name in COLUMNS})


def _arrow_schema() -> Any:
    import pyarrow as pa

    strings = ("run", "node", "event", "group", "mid", "parent", "order", "peer", "detail")
    types = {name: pa.string() for name in strings}
    types.update(t=pa.float64(), gseq=pa.int64(), bytes=pa.int64())
    return pa.schema([pa.field(name, types[name]) for name in COLUMNS])


def jsonl_to_parquet(jsonl_path: Path, parquet_path: Path) -> None:
    """Convert one JSONL trace file to Parquet with the schema v1 column types."""
    import pyarrow as pa
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    if Path(jsonl_path).stat().st_size == 0:
        table = pa.Table.from_pylist([], schema=schema)
    else:
        table = pajson.read_json(
            jsonl_path,
            parse_options=pajson.ParseOptions(explicit_schema=schema,
                                              unexpected_field_behavior="error"))
        table = table.select(list(COLUMNS))
    pq.write_table(table, parquet_path)
