"""The sans-IO M2MP layer: message transfer and flow control sublayers (seeds/002 section 5).

Inputs: :meth:`M2MPLayer.send`, :meth:`M2MPLayer.receive_datagram`,
:meth:`M2MPLayer.on_timer`. Outputs: :meth:`M2MPLayer.datagrams_to_send` (what the
driver must put on the channel now) and :meth:`M2MPLayer.events` (messages for
the application, abandoned messages). :meth:`M2MPLayer.next_deadline` tells the
driver when to call ``on_timer``. No sockets, clocks or threads.

Flow control (seeds/002 "Flow Control Sublayer"): after the N copies of a
packet go out, the packet is outstanding until its looped-back copy has come in
or ``flow_timeout`` has passed. At most ``flow_window`` packets are outstanding
at once; with ``flow_window=1`` this is the seed's stop-and-wait (the next
packet waits for the previous one's loopback). A larger window lets a sender
run a few packets ahead of its own receive path (docs/decisions.md). Channels
that do not loop packets back (unicast ``udp://``) run with
``flow_control=False``.

Our own packets are recognised by message ID (kept a message timeout after
sending: wire/own_ids.py) and never delivered to ourselves (seeds/002 2.3).
"""

from __future__ import annotations

import random
import struct
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat

from m2mc.native import consecutive
from m2mc.wire.filters import MessageFilters
from m2mc.wire.loopbacks import OwnCopies, header_of
from m2mc.wire.m2mp_types import (
    M2MPConfig,
    M2MPEvent,
    M2MPStats,
    MessageAbandoned,
    MessageReceived,
)
from m2mc.wire.own_ids import OwnIds
from m2mc.wire.packet import (
    HEADER_SIZE,
    LAST_FLAG,
    MAX_DATAGRAM,
    MAX_FRAGMENT,
    MAX_FRAGMENT_NUMBER,
    MAX_PACKET,
    fragment_packets,
)
from m2mc.wire.reassembly import Abandoned, Reassembler, ReassemblyLimits
from m2mc.wire.run_end import RunEnd, make_received
from m2mc.wire.segments import Segments, split_block
from m2mc.wire.stream_layer import StreamReader
from m2mc.wire.streams import IncomingStreams, OutgoingFragments, StreamLimits

__all__ = ["M2MPConfig", "M2MPEvent", "M2MPLayer", "M2MPStats", "MessageAbandoned",
           "MessageReceived"]

_HEADER = struct.Struct(">II")  # message ID, last flag + fragment number (docs/interfaces.md §1)
_unpack_header = _HEADER.unpack_from
_pack_header = _HEADER.pack
# MessageReceived built without its __init__ on the receive path (m2mc.native.fastobj): a frozen
# dataclass's __init__ costs a Python frame and two object.__setattr__ calls per message.


class M2MPLayer:
    """One instance of the M2MP layer (one per process, or one in the daemon).

    Its parts, each an object it holds (and whose methods the receive loop calls
    bound once, here: no extra call per packet): the filters
    (:class:`~m2mc.wire.filters.MessageFilters`), the looped-back copies of its own
    packets (:class:`~m2mc.wire.loopbacks.OwnCopies`), the end of a run
    (:class:`~m2mc.wire.run_end.RunEnd`) and the messages read as streams
    (:class:`~m2mc.wire.stream_layer.StreamReader`).
    """

    takes_blocks = True  # receive_datagrams takes wire.segments.Segments (m2mc.core)

    def __init__(self, config: M2MPConfig | None, rng: random.Random) -> None:
        self.config = config or M2MPConfig()
        self.config.validate()
        # The caller's generator (a core draws nothing from the OS): a driver seeds it
        # from OS entropy, since a fixed seed would make two processes draw the same
        # message IDs and drop each other's messages as their own.
        self._rng = rng
        cfg = self.config
        self._reassembler = Reassembler(ReassemblyLimits(
            message_timeout=cfg.message_timeout,
            max_partial_messages=cfg.max_partial_messages,
            max_partial_bytes=cfg.max_partial_bytes,
            max_message_bytes=cfg.max_message_bytes,
            completed_cache=cfg.completed_cache,
        ))
        self._filters = filters = MessageFilters(cfg.own_id_cache)
        # Our message IDs, to spot looped-back copies (wire/own_ids.py: forgotten oldest
        # first, past own_id_cache or a message timeout after they were sent).
        self._outgoing: dict[int, OutgoingFragments] = {}
        self._own_ids = own_ids = OwnIds(cfg.own_id_cache, cfg.message_timeout, self._outgoing)
        self._own = own_ids.ids
        self._own_order = own_ids.order
        self._own_cap = own_ids.cap
        self._queue: deque[bytes] = deque()  # encoded packets waiting for flow control
        self._queued_bytes = 0  # their bytes (headers included): the sender's byte backlog
        self._events: list[M2MPEvent] = []  # emptied in place (events): its parts hold it
        self.stats = stats = M2MPStats()
        # Sent packets whose looped-back copy is awaited, oldest first (at most
        # flow_window): their 8-byte headers, and their flow deadlines alongside.
        own_copies = OwnCopies(stats)
        self._outstanding = own_copies.outstanding
        self._flow_deadlines = own_copies.deadlines
        self._take_loopbacks = own_copies.take_loopbacks
        self._release = own_copies.release
        self._flow_window = cfg.flow_window or 1
        # Live views of the reassembler's tables, for the one-packet fast path.
        self._done_ids = self._reassembler.done_ids
        self._partial_ids = self._reassembler.partial_ids
        self._message_timeout = cfg.message_timeout
        # Messages read as streams (None: every message whole) and written in pieces.
        self._streams = streams = (
            IncomingStreams(StreamLimits(cfg.message_timeout, cfg.stream_window,
                                         cfg.max_streams))
            if cfg.stream_threshold else None)
        self._stream_ids: Mapping[int, object] = streams.streams if streams is not None else {}
        self._stream_reader = reader = StreamReader(stats, self._events, self._reassembler,
                                                    streams, filters)
        self._collect_streams = reader.collect
        # Sending: packets of cfg.packet_size bytes (508 unless a user named more).
        self._packet_size = cfg.packet_size
        self._fragment = cfg.packet_size - HEADER_SIZE
        run_end = RunEnd(cfg, stats, self._events, self._reassembler, streams, filters,
                         self._receive_fragment, reader.start)
        self._end_run = run_end.end_run
        self._complete_run = run_end.complete_run
        # Runs (receive_datagrams) stop before the fragment number at which the slow
        # path must act: a message too large, or one to read as a stream from here on.
        self._run_end = cfg.max_message_bytes // MAX_FRAGMENT + 1
        if cfg.stream_threshold:
            self._run_end = min(self._run_end, -(-cfg.stream_threshold // MAX_FRAGMENT))

    # ----------------------------------------------------------------- filters
    def add_filter(self, prefix: bytes) -> None:
        """Register a message filter (seeds/002 2.3); an empty prefix matches everything."""
        self._filters.add(prefix)

    def remove_filter(self, prefix: bytes) -> None:
        self._filters.remove(prefix)

    @property
    def filters(self) -> tuple[bytes, ...]:
        return self._filters.registered

    def matches(self, message: bytes) -> bool:
        return self._filters.matches(message)

    def watch_filtered(self, watcher: Callable[[bytes, float], None] | None) -> None:
        """``watcher(head, now)`` is told of each message the filters turn away, once (at
        its first fragment, or whole): ``head`` holds at least the longest filter's length
        of its first bytes, or the whole message."""
        self._filters.watcher = watcher

    # ----------------------------------------------------------------- sending
    def send(self, payload: bytes, now: float, copies: int = 1) -> int:
        """Queue one message; return its random message ID. Drain with datagrams_to_send.
        ``copies`` > 1 queues each of its packets that many times (on top of the
        layer's redundancy): a group node's repair of a many-packet record, which is
        lost whole if any packet is (docs/decisions.md)."""
        # A fresh random ID, remembered to recognise our looped-back packets (inline,
        # as OwnIds.new does: this runs once per message).
        own = self._own
        getrandbits = self._rng.getrandbits
        message_id = getrandbits(32)
        while message_id in own:
            message_id = getrandbits(32)
        own.add(message_id)
        own_order = self._own_order
        own_order.append(message_id)
        if len(own_order) > self._own_cap:
            self._own_ids.forget_oldest()
        size = len(payload)
        if copies > 1:  # (rare: repairs only) each copy is a queued packet of its own
            packets = fragment_packets(message_id, payload, self._packet_size)
            self._queue.extend(p for p in packets for _ in range(copies))
            self._queued_bytes += copies * (size + HEADER_SIZE * len(packets))
        elif size <= self._fragment:  # one packet: skip the generator (small messages)
            self._queue.append(_pack_header(message_id, LAST_FLAG) + payload)
            self._queued_bytes += size + HEADER_SIZE
        else:
            packets = fragment_packets(message_id, payload, self._packet_size)
            self._queue.extend(packets)
            self._queued_bytes += size + HEADER_SIZE * len(packets)
        self.stats.messages_out += 1
        return message_id

    def datagrams_to_send(self, now: float) -> list[bytes]:
        """Datagrams the driver must transmit now, copies included, in order."""
        queue = self._queue
        if not queue:
            return []
        config = self.config
        redundancy = config.redundancy
        if config.flow_control:
            # Up to flow_window packets (N copies each) await their looped-back copy.
            outstanding = self._outstanding
            room = self._flow_window - len(outstanding)
            if room <= 0:
                return []
            deadline = now + config.flow_timeout
            if room >= len(queue):
                packets = list(queue)
                queue.clear()
                self._queued_bytes = 0
            else:
                popleft = queue.popleft
                packets = [popleft() for _ in range(room)]
                self._queued_bytes -= sum(map(len, packets))
            outstanding.extend(map(header_of, packets))
            self._flow_deadlines.extend(repeat(deadline, len(packets)))
            out = packets if redundancy == 1 else [
                p for p in packets for _ in range(redundancy)]
        else:
            out = list(queue) if redundancy == 1 else [
                p for p in queue for _ in range(redundancy)]
            queue.clear()
            self._queued_bytes = 0
        self.stats.packets_out += len(out)
        self.stats.bytes_out += sum(map(len, out))
        if not queue and now >= self._own_ids.next_check:
            self._own_ids.queue_empty(now)  # (every message_timeout / 4 at most)
        return out

    @property
    def flow_window(self) -> int:
        """Packets whose looped-back copy may be awaited at once (flow control)."""
        return self._flow_window

    @flow_window.setter
    def flow_window(self, packets: int) -> None:
        # A runtime sets it once its channel is open and the socket's receive buffer
        # known (runtime/endpoint.py, flow_window_for). A smaller window than the
        # packets outstanding only holds the next ones back until enough copies came.
        if packets < 1:
            raise ValueError(f"flow_window must be >= 1, got {packets}")
        self._flow_window = packets

    @property
    def flow_blocked(self) -> bool:
        """True while a sent packet's looped-back copy is awaited (flow control)."""
        return bool(self._outstanding)

    @property
    def flow_room(self) -> int:
        """Packets flow control would let go now (0 while the window is full)."""
        if not self.config.flow_control:
            return len(self._queue)
        return max(0, self._flow_window - len(self._outstanding))

    @property
    def queued_packets(self) -> int:
        """Packets held back by flow control (the driver may apply back-pressure on this)."""
        return len(self._queue)

    @property
    def queued_bytes(self) -> int:
        """Bytes of the packets held back by flow control, headers included (each packet
        once, whatever the redundancy; a message sent with ``copies`` counts each
        copy): what a sender's byte bound counts."""
        return self._queued_bytes

    # ------------------------------------------------- sending in pieces (streams)
    def open_message(self, now: float) -> int:
        """Start a message written in pieces (:meth:`write_message`, then
        :meth:`close_message`); return its random message ID. Its packets are those of
        the whole message (interfaces.md section 1); receivers abandon it if a piece comes
        later than their message timeout after the previous one (seeds/002 2.2)."""
        message_id = self._own_ids.new(self._rng, self._outgoing)
        self._outgoing[message_id] = OutgoingFragments(message_id, self._fragment)
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

    # ---------------------------------------------------------------- receiving
    def receive_datagram(self, datagram: bytes, now: float) -> None:
        """Take in one datagram from the channel (see :meth:`receive_datagrams`)."""
        self.receive_datagrams((datagram,), now)

    def receive_datagrams(self, datagrams: Sequence[bytes], now: float) -> None:
        """Take in datagrams from the channel, in arrival order.

        The per-packet hot path of every driver: the header is read in place (no
        Packet object), a one-packet message skips reassembly, and the busiest
        counters are kept in locals for the batch. A run of one message's fragments
        in order (what a large message is, read many packets per system call) is
        collected in a list and handed to the reassembler at once (``Reassembler.add_run``,
        ``complete_run``), bounded by the batch. A :class:`~m2mc.wire.segments.Segments`
        (``takes_blocks``) is its packets in order: a run takes it whole when they
        are the run's next fragments, else they go one by one.
        """
        self._receive_batch(datagrams, now)
        if self._streams is not None:
            self._collect_streams(now)

    def _receive_batch(self, datagrams: Sequence[bytes], now: float) -> None:
        stats = self.stats
        own = self._own
        outstanding = self._outstanding
        if outstanding:
            # Our own looped-back copies come first on a sender: the copy of the oldest
            # outstanding packet is recognised by its header alone.
            datagrams = self._take_loopbacks(datagrams)
        done, partial, streams = self._done_ids, self._partial_ids, self._stream_ids
        reassembler = self._reassembler
        remember_done = reassembler.remember_done
        expiry = now + self._message_timeout
        filters = self._filters
        accept_all = filters.accept_all
        prefixes = filters.prefixes
        append = self._events.append
        unpack = _unpack_header
        size_in = looped = delivered = 0
        # The open run: its message ID (-1: none), packets, the positions in it after
        # which a redundant copy came, its first fragment number, the word its next
        # packet must carry, and the fragment number it must stop before (where the
        # slow path would have to do more than add: a bound, a stream to begin).
        run_id = -1
        run: list[bytes] = []
        copies: list[int] = []
        run_first = run_next = run_stop = 0
        run_end = self._run_end
        extra = 0  # packets in Segments past the one each counts as
        try:
            for datagram in datagrams:
                size = len(datagram)
                size_in += size
                if size < HEADER_SIZE or size > MAX_PACKET:
                    if type(datagram) is not Segments:
                        if size < HEADER_SIZE or size > MAX_DATAGRAM:
                            stats.malformed += 1  # the only way a datagram can fail to be a packet
                            continue
                        # A packet of more than 508 bytes (its sender set a larger packet
                        # size): after the run so far, it goes below, in no run.
                        if run_id != -1:
                            self._end_run(run_id, run_first, run, copies, now)
                            run_id = -1
                    else:
                        # Packets of one read, kept joined: the next fragments of a run (as
                        # the loop below takes them one by one), or else one by one.
                        message_id, word = unpack(datagram)
                        count = -(-size // MAX_PACKET)
                        last = -1 if message_id in own else consecutive(datagram, count, message_id,
                                                                         word)
                        body = count - last  # fragments before the last
                        if last >= 0:
                            if run_id != message_id or run_next != word:
                                if run_id != -1:
                                    self._end_run(run_id, run_first, run, copies, now)
                                    run_id = -1
                                if word + 1 < run_end and (
                                        (word == 0 and message_id not in done
                                         and message_id not in partial and message_id not in streams
                                         and (accept_all or datagram.startswith(
                                             prefixes, HEADER_SIZE, MAX_PACKET)))
                                        or (word and message_id in partial)):
                                    stop = reassembler.run_stop(message_id, word, run_end)
                                    if word + body < stop or (not last and word + body == stop):
                                        run_id, run_first, run_next, run_stop = (
                                            message_id, word, word, stop)
                                        run = []
                                        copies = []
                            if run_id == message_id and run_next == word and (
                                    word + body < run_stop
                                    or (not last and word + body == run_stop)):
                                extra += count - 1
                                run.append(datagram)
                                if not last:
                                    run_next = word + body
                                    if run_next == run_stop:
                                        self._end_run(run_id, run_first, run, copies, now)
                                        run_id = -1
                                    continue
                                self._complete_run(run_id, run_first, run, copies, now)
                                run_id = -1
                                continue
                        # One by one, as a batch of their own after the run so far (a run
                        # ended early leaves what it would have left).
                        if run_id != -1:
                            self._end_run(run_id, run_first, run, copies, now)
                            run_id = -1
                        size_in -= size
                        extra -= 1  # (counted by that batch)
                        self._receive_batch(split_block(datagram), now)
                        continue
                message_id, word = unpack(datagram)
                if message_id == run_id:
                    if word == run_next:
                        run.append(datagram)
                        run_next += 1
                        if run_next < run_stop:
                            continue
                        # At a bound, the packets after this one take the slow path.
                        self._end_run(run_id, run_first, run, copies, now)
                        run_id = -1
                        continue
                    if word == run_next | LAST_FLAG:
                        run.append(datagram)
                        self._complete_run(run_id, run_first, run, copies, now)
                        run_id = -1
                        continue
                    if word == run_next - 1:  # a redundant copy of the packet just taken
                        copies.append(len(run) - 1)
                        continue
                    self._end_run(run_id, run_first, run, copies, now)  # else: slow path
                    run_id = -1
                if message_id in own:
                    # Our own looped-back packet: releases flow control (seeds/002
                    # section 5), never delivered to ourselves (seeds/002 2.3).
                    looped += 1
                    if outstanding:
                        self._release(datagram[:HEADER_SIZE])
                    continue
                if (word == LAST_FLAG and message_id not in done and message_id not in partial
                        and message_id not in streams):
                    # A whole message in one packet, new: no reassembly (small messages).
                    remember_done(message_id, expiry)
                    message = datagram[HEADER_SIZE:]
                else:
                    if run_id == -1 and word + 1 < run_end and size <= MAX_PACKET and (
                            (word == 0 and message_id not in done and message_id not in partial
                             and message_id not in streams
                             and (accept_all or datagram.startswith(prefixes, HEADER_SIZE)))
                            or (word and message_id in partial)):
                        # The first packet of a message wanted here, or the next one of
                        # a message assembled in order so far: a run may begin.
                        run_stop = reassembler.run_stop(message_id, word, run_end)
                        if run_stop > word + 1:
                            run_id, run_first, run_next = message_id, word, word + 1
                            run = [datagram]
                            copies = []
                            continue
                    if run_id != -1:
                        # The reassembler sees every change in arrival order, as it
                        # would without runs (which partial is idlest, bounds).
                        self._end_run(run_id, run_first, run, copies, now)
                        run_id = -1
                    found = self._receive_fragment(message_id, word, datagram, now)
                    if found is None:
                        continue
                    message = found
                if accept_all or message.startswith(prefixes):
                    delivered += 1
                    append(make_received(message_id, message))
                else:
                    stats.filtered_out += 1
                    filters.remember_filtered(message_id, message, now)
            if run_id != -1:
                self._end_run(run_id, run_first, run, copies, now)
        finally:
            # A bug raising mid-batch would leave packets_in counting the whole batch.
            stats.packets_in += len(datagrams) + extra
            stats.bytes_in += size_in
            stats.looped_back += looped
            stats.messages_in += delivered

    def _receive_fragment(self, message_id: int, word: int, datagram: bytes,
                          now: float) -> bytes | None:
        """Reassembly of anything but a new one-packet message; the message if complete."""
        stats = self.stats
        reassembler = self._reassembler
        fragment = word & MAX_FRAGMENT_NUMBER
        data = datagram[HEADER_SIZE:]
        streams = self._streams
        if streams is not None:
            if message_id in streams.streams:
                before = streams.duplicates
                streams.receive(message_id, fragment, word >= LAST_FLAG, data, now)
                stats.duplicates += streams.duplicates - before
                if streams.finished or streams.abandoned:
                    # Marked done at once, not at the end of the batch: a later copy in
                    # this batch would otherwise start the message again at offset 0.
                    self._collect_streams(now)
                return None
            if (fragment >= reassembler.contiguous(message_id) + self.config.stream_window
                    and not reassembler.is_done(message_id, now)):
                # An early fragment past the window: one before it is lost for good.
                reassembler.abandon(message_id, "gap", now)
                self._collect_abandoned()
                return None
        before = reassembler.duplicates
        message = reassembler.receive_fragment(message_id, fragment, word >= LAST_FLAG, data,
                                               now)
        if reassembler.duplicates != before:
            if message_id in self._filters.filtered_ids:
                stats.filtered_fragments += 1
            else:
                stats.duplicates += 1
            return None
        if message is None:
            # Early filtering: once fragment 0 is in, we know whether anyone wants it.
            if fragment == 0 and len(data) >= self._filters.longest and not self.matches(data):
                stats.filtered_out += 1
                reassembler.mark_done(message_id, now)
                self._filters.remember_filtered(message_id, data, now)
            if reassembler.abandoned:
                self._collect_abandoned()
            if (streams is not None and reassembler.contiguous(message_id) * MAX_FRAGMENT
                    >= self.config.stream_threshold):
                self._stream_reader.start(message_id, now)
        return message

    # ------------------------------------------------------------------ timers
    def on_timer(self, now: float) -> None:
        self._reassembler.on_timer(now)
        if not self._queue and now >= self._own_ids.next_check:
            self._own_ids.queue_empty(now)
        self._collect_abandoned()
        if self._streams is not None:
            self._streams.on_timer(now)
            self._collect_streams(now)
        outstanding, deadlines = self._outstanding, self._flow_deadlines
        while deadlines and deadlines[0] <= now:
            outstanding.popleft()  # its loopback got lost: let the next packet go
            deadlines.popleft()
            self.stats.flow_timeouts += 1

    def next_deadline(self) -> float | None:
        reassembly = self._reassembler.next_deadline()
        if self._streams is not None:
            streaming = self._streams.next_deadline()
            if streaming is not None and (reassembly is None or streaming < reassembly):
                reassembly = streaming
        flow = self._flow_deadlines[0] if self._flow_deadlines else None
        if reassembly is None:
            return flow
        return reassembly if flow is None else min(reassembly, flow)

    # ------------------------------------------------------------------ events
    def events(self) -> list[M2MPEvent]:
        events = self._events  # (the list its parts append to: emptied, never replaced)
        out = events[:]
        events.clear()
        return out

    # ------------------------------------------------------------------ streams
    def drop_stream(self, message_id: int, now: float) -> bool:
        """Give up a message being read as a stream (its reader fell behind): a
        :class:`MessageAbandoned` with reason ``overflow`` follows, and its later
        packets are ignored. False if it is not being read (finished)."""
        return self._stream_reader.drop(message_id, now)

    @property
    def streams_open(self) -> int:
        """Messages being read as streams now (at most ``max_streams``)."""
        return self._stream_reader.open_count

    @property
    def stream_held_bytes(self) -> int:
        """Bytes the open streams hold: their early fragments (at most
        ``stream_window`` each)."""
        return self._stream_reader.held_bytes

    @property
    def partial_messages(self) -> int:
        return self._reassembler.partial_messages

    @property
    def partial_bytes(self) -> int:
        return self._reassembler.partial_bytes

    def _collect_abandoned(self) -> None:
        for item in self._reassembler.take_abandoned():
            self._note_abandoned(item)

    def _note_abandoned(self, item: Abandoned) -> None:
        counts = self.stats.abandoned
        counts[item.reason] = counts.get(item.reason, 0) + 1
        # Tell the reader only about a message it could have been reading: fragment 0
        # arrived (seeds/002 section 5 compares the first fragment to the filters) and
        # does not prove that no filter wanted it. Stray fragments are only counted.
        if not item.head:
            return
        filters = self._filters
        if len(item.head) >= filters.longest and not filters.matches(item.head):
            return
        self._events.append(MessageAbandoned(item.message_id, item.reason, item.bytes))
