"""The part of :class:`~m2mc.wire.m2mp.M2MPLayer` that writes and reads messages in
pieces (seeds/002 section 4; :mod:`m2mc.wire.streams` has the state machines).

Sending: :meth:`StreamingLayer.open_message`, :meth:`~StreamingLayer.write_message`,
:meth:`~StreamingLayer.close_message` put on the layer's queue exactly the packets
a whole message of the same bytes would get. Receiving, with
``M2MPConfig.stream_threshold`` set: a message whose first ``stream_threshold``
bytes are contiguous and that is not complete yet is handed over from reassembly
to :class:`~m2mc.wire.streams.IncomingStreams`, and its bytes come out as
:class:`~m2mc.wire.streams.StreamChunk` events in order, ending in one flagged
``end`` or in a :class:`~m2mc.wire.m2mp.MessageAbandoned`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

from m2mc.wire.m2mp_types import M2MPConfig, M2MPEvent, M2MPStats, MessageAbandoned
from m2mc.wire.packet import MAX_FRAGMENT
from m2mc.wire.streams import IncomingStreams, OutgoingFragments

if TYPE_CHECKING:
    import random

    from m2mc.wire.reassembly import Reassembler

__all__ = ["StreamingLayer"]


class StreamingLayer:
    """Mixed into :class:`~m2mc.wire.m2mp.M2MPLayer`, whose state it uses."""

    config: M2MPConfig
    stats: M2MPStats
    _rng: random.Random
    _own: set[int]
    _own_order: deque[int]
    _own_cache: int
    _queue: deque[bytes]
    _queued_bytes: int
    _events: list[M2MPEvent]
    _reassembler: Reassembler
    _longest_filter: int
    _streams: IncomingStreams | None
    _stream_ids: Mapping[int, object]
    _outgoing: dict[int, OutgoingFragments]

    def matches(self, message: bytes) -> bool:
        raise NotImplementedError

    def _forget_own(self) -> None:
        raise NotImplementedError

    def _remember_filtered(self, message_id: int) -> None:
        raise NotImplementedError

    # ------------------------------------------------- sending in pieces (streams)
    def open_message(self, now: float) -> int:
        """Start a message written in pieces (:meth:`write_message`, then
        :meth:`close_message`); return its random message ID. Its packets are those of
        the whole message (interfaces.md section 1); receivers abandon it if a piece comes
        later than their message timeout after the previous one (seeds/002 2.2)."""
        own, getrandbits = self._own, self._rng.getrandbits
        message_id = getrandbits(32)
        while message_id in own or message_id in self._outgoing:
            message_id = getrandbits(32)
        own.add(message_id)
        self._own_order.append(message_id)
        if len(self._own_order) > self._own_cache:
            self._forget_own()
        self._outgoing[message_id] = OutgoingFragments(message_id)
        return message_id

    def write_message(self, message_id: int, data: bytes, now: float) -> None:
        """Queue the next bytes of a message opened with :meth:`open_message`."""
        packets = self._outgoing[message_id].write(data)
        if packets:
            self._queue.extend(packets)
            self._queued_bytes += sum(map(len, packets))

    def close_message(self, message_id: int, now: float) -> None:
        """End the message: its last packet (with the last flag) is queued."""
        packet = self._outgoing.pop(message_id).close()
        self._queue.append(packet)
        self._queued_bytes += len(packet)
        self.stats.messages_out += 1

    def abort_message(self, message_id: int) -> None:
        """Give up a message being written: nothing more is sent, so its receivers
        abandon it after their message timeout (seeds/002 2.2: an unclosed stream)."""
        self._outgoing.pop(message_id, None)

    def drop_stream(self, message_id: int, now: float) -> bool:
        """Give up a message being read as a stream (its reader fell behind): a
        :class:`~m2mc.wire.m2mp.MessageAbandoned` with reason ``overflow`` follows, and
        its later packets are ignored. False if it is not being read (finished)."""
        streams = self._streams
        if streams is None or message_id not in streams.streams:
            return False
        streams.abandon(message_id, "overflow")
        self._collect_streams(now)
        return True

    @property
    def streams_open(self) -> int:
        """Messages being read as streams now (at most ``max_streams``)."""
        return len(self._streams.streams) if self._streams is not None else 0

    @property
    def stream_held_bytes(self) -> int:
        """Bytes the open streams hold: their early fragments (at most
        ``stream_window`` each)."""
        return self._streams.held_bytes if self._streams is not None else 0

    def _start_stream(self, message_id: int, now: float) -> None:
        """Read a partial message as a stream from now on (its contiguous prefix has
        reached ``stream_threshold``), if its first bytes match a filter."""
        assert self._streams is not None
        parts, last = self._reassembler.take_partial(message_id)
        head = b"".join(parts[i] for i in range(-(-self._longest_filter // MAX_FRAGMENT))
                        if i in parts)
        if not self.matches(head):  # only a filter longer than fragment 0 gets here
            self.stats.filtered_out += 1
            self._reassembler.mark_done(message_id, now)
            self._remember_filtered(message_id)
            return
        self.stats.streams_in += 1
        self._streams.start(message_id, parts, last, now)
        self._collect_streams(now)

    def _collect_streams(self, now: float) -> None:
        """Events of the streams: their new bytes, their ends and abandonments."""
        streams = self._streams
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

