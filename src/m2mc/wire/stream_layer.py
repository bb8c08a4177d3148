"""How :class:`~m2mc.wire.m2mp.M2MPLayer` reads messages in pieces (seeds/002
section 4; :mod:`m2mc.wire.streams` has the state machines): :class:`StreamReader`.

Sending in pieces is the layer's own (:meth:`~m2mc.wire.m2mp.M2MPLayer.open_message`,
:meth:`~m2mc.wire.m2mp.M2MPLayer.write_message`,
:meth:`~m2mc.wire.m2mp.M2MPLayer.close_message`): it puts on the layer's queue
exactly the packets a whole message of the same bytes would get. Receiving, with
``M2MPConfig.stream_threshold`` set: a message whose first ``stream_threshold``
bytes are contiguous and that is not complete yet is handed over from reassembly
to :class:`~m2mc.wire.streams.IncomingStreams`, and its bytes come out as
:class:`~m2mc.wire.streams.StreamChunk` events in order, ending in one flagged
``end`` or in a :class:`~m2mc.wire.m2mp.MessageAbandoned`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m2mc.wire.m2mp_types import M2MPEvent, M2MPStats, MessageAbandoned
from m2mc.wire.packet import MAX_FRAGMENT

if TYPE_CHECKING:
    from m2mc.wire.filters import MessageFilters
    from m2mc.wire.reassembly import Reassembler
    from m2mc.wire.streams import IncomingStreams

__all__ = ["StreamReader"]


class StreamReader:
    """The messages :class:`~m2mc.wire.m2mp.M2MPLayer` reads as streams (``streams``:
    None, every message whole); the layer binds :meth:`start`, :meth:`collect` and
    :meth:`drop` once."""

    __slots__ = ("_events", "_filters", "_reassembler", "stats", "streams")

    def __init__(self, stats: M2MPStats, events: list[M2MPEvent], reassembler: Reassembler,
                 streams: IncomingStreams | None, filters: MessageFilters) -> None:
        self.stats = stats
        self._events = events  # the layer's (M2MPLayer.events empties it in place)
        self._reassembler = reassembler
        self.streams = streams
        self._filters = filters

    def drop(self, message_id: int, now: float) -> bool:
        """Give up a message being read as a stream (its reader fell behind): a
        :class:`~m2mc.wire.m2mp.MessageAbandoned` with reason ``overflow`` follows, and
        its later packets are ignored. False if it is not being read (finished)."""
        streams = self.streams
        if streams is None or message_id not in streams.streams:
            return False
        streams.abandon(message_id, "overflow")
        self.collect(now)
        return True

    @property
    def open_count(self) -> int:
        """Messages being read as streams now (at most ``max_streams``)."""
        return len(self.streams.streams) if self.streams is not None else 0

    @property
    def held_bytes(self) -> int:
        """Bytes the open streams hold: their early fragments (at most
        ``stream_window`` each)."""
        return self.streams.held_bytes if self.streams is not None else 0

    def start(self, message_id: int, now: float) -> None:
        """Read a partial message as a stream from now on (its contiguous prefix has
        reached ``stream_threshold``), if its first bytes match a filter."""
        assert self.streams is not None
        filters = self._filters
        parts, last = self._reassembler.take_partial(message_id)
        head = b"".join(parts[i] for i in range(-(-filters.longest // MAX_FRAGMENT))
                        if i in parts)
        if not filters.matches(head):  # only a filter longer than fragment 0 gets here
            self.stats.filtered_out += 1
            self._reassembler.mark_done(message_id, now)
            filters.remember_filtered(message_id, head, now)
            return
        self.stats.streams_in += 1
        self.streams.start(message_id, parts, last, now)
        self.collect(now)

    def collect(self, now: float) -> None:
        """Events of the streams: their new bytes, their ends and abandonments."""
        streams = self.streams
        assert streams is not None
        if streams.abandoned or streams.finished or streams.has_output:
            events = self._events
            events.extend(streams.take_chunks())
            mark_done = self._reassembler.mark_done
            for message_id in streams.take_finished():
                mark_done(message_id, now)  # later copies are duplicates
                self.stats.messages_in += 1
            counts = self.stats.abandoned
            for end in streams.take_abandoned():
                mark_done(end.message_id, now)
                counts[end.reason] = counts.get(end.reason, 0) + 1
                events.append(MessageAbandoned(end.message_id, end.reason, end.bytes))
