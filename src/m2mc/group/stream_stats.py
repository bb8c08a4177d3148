"""The counters and the reading state of a node's streams (m2mc.group.streams;
docs/group.md section 12; their metrics: docs/operations.md)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StreamStats", "StreamStatus"]


@dataclass(frozen=True, slots=True)
class StreamStatus:
    available: int
    done: bool
    size: int | None
    error: str | None


@dataclass(slots=True)
class StreamStats:
    stream_sent: int = 0  # streamed messages this node sent
    stream_received: int = 0  # bodies received whole (and checked)
    stream_failed: int = 0  # bodies that will never be complete here (any reason)
    stream_chunks_sent: int = 0
    stream_chunks_received: int = 0
    stream_chunk_duplicates: int = 0
    stream_chunks_refused: int = 0  # past a stream's window (asked for again later)
    stream_refused: int = 0  # chunks of new streams past max_streams, or of non-members
    stream_nacks_sent: int = 0
    stream_acks_sent: int = 0  # STREAM_ACKs: how far we hold a body, for its sender
    stream_paced: int = 0  # times a stream we send waited for its receivers (stream_pace)
    stream_laggards: int = 0  # receivers it stopped waiting for: silent for the wait
    stream_nacks_suppressed: int = 0  # ours held off: another member asked first
    stream_chunks_repaired: int = 0  # chunks we sent again for others
    stream_repairs_suppressed: int = 0  # another member sent them first
    stream_repairs_refused: int = 0  # past max_stream_repairs
    stream_store_full: int = 0  # a body the store could not hold
