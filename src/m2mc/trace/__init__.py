"""The trace every node writes (CONTRACTS section 4, schema version 1)."""

from m2mc.trace.schema import EVENTS, SCHEMA_VERSION, TraceEvent, TraceSink

__all__ = ["EVENTS", "SCHEMA_VERSION", "TraceEvent", "TraceSink"]
