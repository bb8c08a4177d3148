"""M2MP messages written and read in pieces (seeds/002 section 4: a message is an
output stream the sender writes and an input stream the receiver reads).

The wire is exactly that of a whole message (interfaces.md section 1): fragments of
500 bytes, the last one shorter or empty, the last flag on it. What changes is who
holds the bytes.

* :class:`OutgoingFragments` cuts a message into packets as it is written, without
  knowing its length: it keeps the bytes after the last whole fragment (1 to 500)
  until more come or the message is closed, so the fragment that ends the message
  is the one that carries the last flag, as for a whole message.
* :class:`IncomingStreams` hands a long message to the reader in order as its
  fragments become contiguous. It holds only fragments that came early (a window
  of ``stream_window`` fragments past the next one due): a fragment further ahead
  means one before it was lost in every copy (M2MP never sends again), so the
  message is abandoned at once (reason ``gap``) rather than after the window filled
  memory. A message is abandoned too when its next fragment is later than
  ``message_timeout`` (``timeout``), when more than ``max_streams`` are open
  (``bound``, the idlest first) or when its fragments contradict each other
  (``malformed``); the reader is told (an error, never a silent truncation).

:class:`~m2mc.wire.m2mp.M2MPLayer` decides when a message becomes a stream (its
contiguous prefix reached ``stream_threshold`` bytes) and checks the filters on
that prefix; shorter messages are still delivered whole.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from m2mc.wire.packet import LAST_FLAG, MAX_FRAGMENT, MAX_FRAGMENT_NUMBER

__all__ = ["IncomingStreams", "OutgoingFragments", "StreamChunk", "StreamLimits"]

_pack_header = struct.Struct(">II").pack


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """The next bytes of a message read as a stream: ``data`` starts at ``offset``
    (0: the message's first bytes, which matched a filter); ``end`` is True on the
    chunk that completes the message (its data may be empty)."""

    message_id: int
    offset: int
    data: bytes
    end: bool


class OutgoingFragments:
    """The packets of one message written in pieces (its ID chosen by the layer)."""

    __slots__ = ("closed", "fragment", "message_id", "next_fragment", "tail", "written")

    def __init__(self, message_id: int, fragment: int = MAX_FRAGMENT) -> None:
        self.message_id = message_id
        self.fragment = fragment  # bytes per packet but the last: the packet size - 8
        self.next_fragment = 0
        self.tail = b""  # bytes not cut into a packet yet: 0 to 500 (1 to 500 once written)
        self.written = 0
        self.closed = False

    def write(self, data: bytes) -> list[bytes]:
        """Take ``data``; return the packets that can go now (each but the newest whole
        fragment: it may turn out to be the last one)."""
        if self.closed:
            raise ValueError(f"message {self.message_id} is closed")
        if not data:
            return []
        buf = self.tail + bytes(data)
        self.written += len(data)
        step = self.fragment
        whole = (len(buf) - 1) // step  # leave 1 to 500 bytes behind
        if not whole:
            self.tail = buf
            return []
        if self.next_fragment + whole > MAX_FRAGMENT_NUMBER:
            raise ValueError("message longer than the fragment numbers allow (about 1 TB)")
        view = memoryview(buf)
        mid, first = self.message_id, self.next_fragment
        packets = [_pack_header(mid, first + i) + view[i * step:(i + 1) * step]
                   for i in range(whole)]
        self.next_fragment = first + whole
        self.tail = buf[whole * step:]
        return packets

    def close(self) -> bytes:
        """The last packet: what is left (possibly nothing), with the last flag."""
        if self.closed:
            raise ValueError(f"message {self.message_id} is closed")
        self.closed = True
        packet = _pack_header(self.message_id, self.next_fragment | LAST_FLAG) + self.tail
        self.next_fragment += 1
        self.tail = b""
        return packet


@dataclass(slots=True)
class StreamLimits:
    message_timeout: float = 5.0
    stream_window: int = 512  # fragments held past the next one due (256,000 bytes)
    max_streams: int = 32  # messages being read as streams at once


@dataclass(slots=True)
class _Stream:
    deadline: float
    next: int = 0  # the next fragment due to the reader
    offset: int = 0  # bytes handed to the reader so far (including ``out``)
    last: int = -1  # the last fragment's number, once seen
    held: int = 0  # bytes in ``parts``
    parts: dict[int, bytes] = field(default_factory=dict)  # early fragments
    out: list[bytes] = field(default_factory=list)  # in order, not handed out yet
    out_at: int = 0  # offset of out[0]


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """A stream given up: ``reason`` as for an abandoned message, ``bytes`` read so far."""

    message_id: int
    reason: str
    bytes: int


class IncomingStreams:
    """The messages being read as streams; sans-IO, bounded (module docstring)."""

    def __init__(self, limits: StreamLimits) -> None:
        self.limits = limits
        # Insertion order is the order of last activity (move_to_end on each fragment).
        self.streams: OrderedDict[int, _Stream] = OrderedDict()
        self.held_bytes = 0  # early fragments of every stream
        self.duplicates = 0
        self.finished: list[int] = []  # completed since the last take_finished()
        self.abandoned: list[StreamEnd] = []
        self._flush: list[int] = []  # streams with bytes in ``out``
        self._done: dict[int, _Stream] = {}  # completed, their last chunk not taken yet

    # ------------------------------------------------------------ input
    def start(self, message_id: int, parts: dict[int, bytes], last: int, now: float) -> None:
        """Read ``message_id`` as a stream from now on: ``parts`` are the fragments it
        has (0 and the ones after it, contiguous, and maybe early ones); ``last`` the
        last fragment's number or -1."""
        stream = _Stream(deadline=now + self.limits.message_timeout, last=last)
        self.streams[message_id] = stream
        stream.parts = parts
        stream.held = sum(map(len, parts.values()))
        self.held_bytes += stream.held
        self._advance(message_id, stream)
        if len(self.streams) > self.limits.max_streams:
            self.abandon(next(iter(self.streams)), "bound")

    def receive(self, message_id: int, fragment: int, last: bool, data: bytes,
                now: float) -> None:
        """One fragment of a stream (``message_id in streams``)."""
        stream = self.streams[message_id]
        if fragment < stream.next or fragment in stream.parts:
            self.duplicates += 1
            return
        if last:
            if stream.last not in (-1, fragment) or (
                    stream.parts and max(stream.parts) > fragment):
                self.abandon(message_id, "malformed")
                return
            stream.last = fragment
        elif stream.last != -1 and fragment > stream.last:
            self.abandon(message_id, "malformed")
            return
        if fragment >= stream.next + self.limits.stream_window:
            self.abandon(message_id, "gap")  # one before it is lost in every copy
            return
        stream.deadline = now + self.limits.message_timeout
        self.streams.move_to_end(message_id)
        if fragment != stream.next:
            if stream.held + len(data) > self.limits.stream_window * MAX_FRAGMENT:
                # Early fragments over 500 bytes (a larger packet size): the window
                # bounds their bytes as it would 500-byte ones.
                self.abandon(message_id, "bound")
                return
            stream.parts[fragment] = data
            stream.held += len(data)
            self.held_bytes += len(data)
            return
        if not stream.out:
            stream.out_at = stream.offset
            self._flush.append(message_id)
        stream.out.append(data)
        stream.offset += len(data)
        stream.next += 1
        if stream.parts:
            self._advance(message_id, stream)
        elif stream.next > stream.last >= 0:
            self._complete(message_id)

    def on_timer(self, now: float) -> None:
        """Abandon every stream whose next fragment is late."""
        while self.streams:
            message_id, stream = next(iter(self.streams.items()))
            if stream.deadline > now:
                break
            self.abandon(message_id, "timeout")

    def next_deadline(self) -> float | None:
        if not self.streams:
            return None
        return next(iter(self.streams.values())).deadline

    # ----------------------------------------------------------- output
    @property
    def has_output(self) -> bool:
        return bool(self._flush)

    def take_chunks(self) -> Iterator[StreamChunk]:
        """The bytes that became contiguous since the last call, one chunk per stream
        (in the order the streams advanced), the completing chunk flagged ``end``."""
        flush, self._flush = self._flush, []
        finished = set(self.finished)
        for message_id in flush:
            stream = self.streams.get(message_id)
            if stream is None:  # completed (kept for this call) or abandoned
                stream = self._done.pop(message_id, None)
                if stream is None:
                    continue
            out, stream.out = stream.out, []
            if out or message_id in finished:
                yield StreamChunk(message_id, stream.out_at, b"".join(out),
                                  message_id in finished)

    def take_finished(self) -> list[int]:
        finished, self.finished = self.finished, []
        return finished

    def take_abandoned(self) -> list[StreamEnd]:
        abandoned, self.abandoned = self.abandoned, []
        return abandoned

    def abandon(self, message_id: int, reason: str) -> None:
        stream = self.streams.pop(message_id)
        self.held_bytes -= stream.held
        stream.out = []  # bytes the reader will not get: it gets the error instead
        self.abandoned.append(StreamEnd(message_id, reason, stream.out_at))

    # ---------------------------------------------------------- internal
    def _advance(self, message_id: int, stream: _Stream) -> None:
        """Move the early fragments that are now contiguous to ``out``."""
        parts = stream.parts
        if stream.next in parts and not stream.out:
            stream.out_at = stream.offset
            self._flush.append(message_id)
        while stream.next in parts:
            data = parts.pop(stream.next)
            stream.held -= len(data)
            self.held_bytes -= len(data)
            stream.out.append(data)
            stream.offset += len(data)
            stream.next += 1
        if stream.next > stream.last >= 0:
            self._complete(message_id)

    def _complete(self, message_id: int) -> None:
        stream = self.streams.pop(message_id)
        self.held_bytes -= stream.held
        if not stream.out:  # its last bytes went out already (an empty last fragment)
            stream.out_at = stream.offset
            self._flush.append(message_id)
        self._done[message_id] = stream
        self.finished.append(message_id)
