"""The trace every node writes (docs/interfaces.md §4, schema version 1)."""

from m2mc.trace.schema import EVENTS, SCHEMA_VERSION, TraceEvent, TraceSink
from m2mc.trace.writer import TraceDirectory, TraceWriter, read_jsonl, write_run_json

__all__ = ["EVENTS", "SCHEMA_VERSION", "TraceDirectory", "TraceEvent", "TraceSink",
           "TraceWriter", "read_jsonl", "write_run_json"]
