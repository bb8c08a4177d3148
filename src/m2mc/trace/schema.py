"""Trace schema version 1 (docs/interfaces.md §4): one row per event.

Both drivers (asyncio runtime, simulator) and every protocol core produce
:class:`TraceEvent` values; a :class:`TraceSink` stores them. Cores never write
files: they hand events to the sink the driver gave them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from m2mc.kinds import Order

SCHEMA_VERSION = 1

EVENTS = frozenset({
    "send", "recv", "dup", "deliver", "join", "leave", "view", "sync_req", "sync_resp",
    "nack", "retransmit", "drop", "crash", "restart", "elect", "packet_out", "packet_in",
    "skip",
})

ORDERS = frozenset(Order)

# Column order of the schema; writers keep it so files diff cleanly.
COLUMNS = ("run", "node", "t", "event", "group", "mid", "parent", "order", "gseq", "bytes",
           "peer", "detail")


@dataclass(frozen=True, slots=True)
class TraceEvent:
    run: str
    node: str
    t: float
    event: str
    group: str | None = None
    mid: str | None = None
    parent: str | None = None
    order: str | None = None
    gseq: int | None = None
    bytes: int | None = None
    peer: str | None = None
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in COLUMNS}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), separators=(",", ":"))


def detail_json(**fields: Any) -> str:
    """Encode event-specific fields for the ``detail`` column, deterministically."""
    return json.dumps(fields, separators=(",", ":"), sort_keys=True)


class TraceSink(Protocol):
    """Where events go. ``enabled`` lets hot paths skip building events at all."""

    enabled: bool

    def emit(self, event: TraceEvent) -> None: ...


class TraceJournal(TraceSink, Protocol):
    """A sink that a stack with a durable log keeps in step with its commits: the
    stack renders each batch, stores the text with the commit, then appends it."""

    def render(self, events: Iterable[TraceEvent]) -> str: ...

    def append(self, text: str) -> None: ...


class NullSink:
    """Trace switched off."""

    enabled = False

    def emit(self, event: TraceEvent) -> None:
        return None


class ListSink:
    """Keeps events in memory (tests, small runs)."""

    enabled = True

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def emit(self, event: TraceEvent) -> None:
        self.events.append(event)
