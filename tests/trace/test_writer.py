"""Trace writers: JSONL rows exactly as docs/interfaces.md §4, buffering, Parquet, run.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from m2mc.trace.schema import COLUMNS, TraceEvent
from m2mc.trace.writer import (
    TraceDirectory,
    TraceWriter,
    event_row,
    jsonl_to_parquet,
    parquet_available,
    read_jsonl,
    row_to_json,
    safe_file_stem,
    write_run_json,
)

texts = st.none() | st.text(max_size=12)
ints = st.none() | st.integers(min_value=-(2**62), max_value=2**62)
events = st.builds(
    TraceEvent,
    run=st.text(max_size=8), node=st.text(max_size=8),
    t=st.floats(allow_nan=False, allow_infinity=False),
    event=st.sampled_from(["send", "recv", "deliver", "drop"]),
    group=texts, mid=texts, parent=texts, order=texts, gseq=ints, bytes=ints, peer=texts,
    detail=texts,
)


@given(events)
def test_row_json_equals_json_dumps_of_the_schema_dict(event: TraceEvent) -> None:
    line = row_to_json(event_row(event))
    assert line == json.dumps(event.as_dict(), separators=(",", ":"))
    assert list(json.loads(line)) == list(COLUMNS)


def test_writer_fills_run_and_node_and_keeps_explicit_ones(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "a.jsonl", run="r1", node="A", flush_interval=None)
    writer.emit(TraceEvent("", "", 1.5, "send", group="g", mid="A:1", parent=""))
    writer.emit(TraceEvent("other", "B", 2.0, "deliver", group="g", mid="A:1", parent=""))
    writer.close()
    rows = list(read_jsonl(tmp_path / "a.jsonl"))
    assert [(r.run, r.node, r.t, r.event) for r in rows] == [
        ("r1", "A", 1.5, "send"), ("other", "B", 2.0, "deliver")]
    assert rows[0].parent == ""  # root parent stays "" (not null)


def test_events_are_buffered_until_flush_every(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    writer = TraceWriter(path, run="r", node="n", flush_every=3, flush_interval=None)
    for i in range(2):
        writer.emit(TraceEvent("", "", float(i), "send"))
    assert path.read_text() == ""  # still in memory: no write per event
    writer.emit(TraceEvent("", "", 2.0, "send"))
    assert len(path.read_text().splitlines()) == 3
    writer.emit(TraceEvent("", "", 3.0, "send"))
    writer.close()
    assert len(path.read_text().splitlines()) == 4
    assert writer.events_written == 4


def test_interval_flush_uses_the_injected_clock(tmp_path: Path) -> None:
    now = [0.0]
    path = tmp_path / "n.jsonl"
    writer = TraceWriter(path, flush_every=1000, flush_interval=1.0, clock=lambda: now[0])
    writer.emit(TraceEvent("r", "n", 0.0, "send"))
    assert path.read_text() == ""
    now[0] = 1.5
    writer.maybe_flush()  # what a runtime's periodic timer calls
    assert len(path.read_text().splitlines()) == 1
    now[0] = 3.0
    writer.emit(TraceEvent("r", "n", 3.0, "send"))  # the interval has passed: written at once
    assert len(path.read_text().splitlines()) == 2


def test_disabled_writer_writes_nothing(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "off.jsonl", enabled=False)
    writer.emit(TraceEvent("r", "n", 0.0, "send"))
    writer.close()
    assert not (tmp_path / "off.jsonl").exists()


def test_trace_directory_one_file_per_node_and_safe_names(tmp_path: Path) -> None:
    directory = TraceDirectory(tmp_path / "trace", "run-1", flush_interval=None)
    directory.writer("A").emit(TraceEvent("", "", 0.0, "join", group="g"))
    directory.writer("../evil node").emit(TraceEvent("", "", 0.0, "join", group="g"))
    directory.close()
    names = sorted(p.name for p in (tmp_path / "trace").iterdir())
    assert names == ["A.jsonl", "_evil_node.jsonl"]
    (row,) = list(read_jsonl(tmp_path / "trace" / "_evil_node.jsonl"))
    assert row.node == "../evil node" and row.run == "run-1"
    assert safe_file_stem("...") == "_"


@pytest.mark.skipif(not parquet_available(), reason="pyarrow missing")
def test_parquet_copy_has_schema_types_and_same_rows(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "n.jsonl"
    writer = TraceWriter(path, run="r", node="n", flush_interval=None,
                         parquet_path=tmp_path / "n.parquet")
    writer.emit(TraceEvent("", "", 0.1 + 0.2, "deliver", group="g", mid="n:1", parent="",
                           order="total", gseq=7, bytes=12, peer="m", detail='{"a":1}'))
    writer.emit(TraceEvent("", "", 1.0, "drop"))
    writer.close()
    table = pq.read_table(tmp_path / "n.parquet")
    assert table.column_names == list(COLUMNS)
    assert str(table.schema.field("t").type) == "double"
    assert str(table.schema.field("gseq").type) == "int64"
    assert table.to_pylist() == [e.as_dict() for e in read_jsonl(path)]
    # deterministic: converting again gives the same bytes
    jsonl_to_parquet(path, tmp_path / "again.parquet")
    digest = [hashlib.sha256((tmp_path / n).read_bytes()).hexdigest()
              for n in ("n.parquet", "again.parquet")]
    assert digest[0] == digest[1]


@pytest.mark.skipif(not parquet_available(), reason="pyarrow missing")
def test_parquet_of_an_empty_trace_has_the_schema(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    writer = TraceWriter(tmp_path / "e.jsonl", parquet_path=tmp_path / "e.parquet")
    writer.close()
    table = pq.read_table(tmp_path / "e.parquet")
    assert table.num_rows == 0 and table.column_names == list(COLUMNS)


def test_run_json_is_sorted_and_carries_schema(tmp_path: Path) -> None:
    write_run_json(tmp_path / "run.json", {"seed": 3, "run": "x", "scenario": "s",
                                           "version": "0.1.0", "orderings": {"g": "sb"},
                                           "start": 0.0})
    text = (tmp_path / "run.json").read_text()
    data = json.loads(text)
    assert data["schema"] == 1 and data["orderings"] == {"g": "sb"}
    assert list(data) == sorted(data)
    assert text.endswith("\n")
