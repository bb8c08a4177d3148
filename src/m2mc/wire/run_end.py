"""What :class:`~m2mc.wire.m2mp.M2MPLayer`'s receive loop does with a run of one
message's fragments once it ends: hand it to the reassembler whole, or, where the
reassembler would have to give something up for it, take its packets through the
per-fragment path one by one as if there had been no run."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from m2mc.native import fast_constructor
from m2mc.wire.filters import MessageFilters
from m2mc.wire.m2mp_types import M2MPConfig, M2MPEvent, M2MPStats, MessageReceived
from m2mc.wire.packet import HEADER_SIZE, MAX_FRAGMENT
from m2mc.wire.segments import Segments, split_block
from m2mc.wire.streams import IncomingStreams

if TYPE_CHECKING:
    from m2mc.wire.reassembly import Reassembler

__all__ = ["RunEnd", "make_received"]

_HEADER = struct.Struct(">II")

make_received: Callable[[int, bytes], MessageReceived] = fast_constructor(MessageReceived)


class ReceiveFragment(Protocol):
    """The layer's slow path for one packet: reassembly; the message if complete."""

    def __call__(self, message_id: int, word: int, datagram: bytes,
                 now: float) -> bytes | None: ...


class RunEnd:
    """Ends the receive loop's runs; the layer binds :meth:`end_run` and
    :meth:`complete_run` once, and gives its own slow path (``receive_fragment``, for
    a replayed run) and the start of a stream (``start_stream``)."""

    __slots__ = ("_events", "_filters", "_reassembler", "_receive_fragment", "_start_stream",
                 "_streams", "config", "stats")

    def __init__(self, config: M2MPConfig, stats: M2MPStats, events: list[M2MPEvent],
                 reassembler: Reassembler, streams: IncomingStreams | None,
                 filters: MessageFilters, receive_fragment: ReceiveFragment,
                 start_stream: Callable[[int, float], None]) -> None:
        self.config = config
        self.stats = stats
        self._events = events  # the layer's (M2MPLayer.events empties it in place)
        self._reassembler = reassembler
        self._streams = streams
        self._filters = filters
        self._receive_fragment = receive_fragment
        self._start_stream = start_stream

    def end_run(self, message_id: int, first: int, run: list[bytes], copies: list[int],
                now: float) -> None:
        """Hand an unfinished run to the reassembler (which gives nothing up for it: it
        refuses a run that would pass a bound), then do what the slow path does after
        a fragment: read the message as a stream if its prefix reached the threshold."""
        if not self._reassembler.add_run(message_id, first, run, HEADER_SIZE, now):
            self._replay_run(message_id, run, copies, now)
            return
        if copies:
            self._count_copies(message_id, len(copies))
        if (self._streams is not None and self._reassembler.contiguous(message_id)
                * MAX_FRAGMENT >= self.config.stream_threshold):
            self._start_stream(message_id, now)

    def complete_run(self, message_id: int, first: int, run: list[bytes], copies: list[int],
                     now: float) -> None:
        """Hand a run that ends with the message's last fragment to the reassembler and
        deliver the message (its fragment 0 matched a filter when the run began), or
        replay the run where the reassembler would not take it whole."""
        found = self._reassembler.complete_run(message_id, first, run, HEADER_SIZE, now)
        if found is None:
            self._replay_run(message_id, run, copies, now)
            return
        if copies:
            self._count_copies(message_id, len(copies))
        self.stats.messages_in += 1
        self._events.append(make_received(message_id, found))

    def _count_copies(self, message_id: int, count: int) -> None:
        """Redundant copies a run skipped, counted as the slow path counts them."""
        if message_id in self._filters.filtered_ids:  # an ID reused after a filtered message's
            self.stats.filtered_fragments += count
        else:
            self.stats.duplicates += count

    def _replay_run(self, message_id: int, run: list[bytes], copies: list[int],
                    now: float) -> None:
        """A run the reassembler would not take whole (a bound would give something up):
        its packets and their copies through the slow path in arrival order, as if no
        run had been."""
        again = set(copies)
        for index, piece in enumerate(run):
            packets = split_block(piece) if type(piece) is Segments else [piece]
            times = [1] * len(packets)
            if index in again:  # copies of the piece's last packet came after it
                times[-1] += copies.count(index)
            for datagram, n in zip(packets, times, strict=True):
                self._replay(message_id, datagram, n, now)

    def _replay(self, message_id: int, datagram: bytes, times: int, now: float) -> None:
        """``datagram`` through the slow path, ``times`` times (a replayed run's)."""
        filters = self._filters
        accept_all, prefixes = filters.accept_all, filters.prefixes
        _, word = _HEADER.unpack_from(datagram)
        for _ in range(times):
            found = self._receive_fragment(message_id, word, datagram, now)
            if found is None:
                continue
            if accept_all or found.startswith(prefixes):
                self.stats.messages_in += 1
                self._events.append(make_received(message_id, found))
            else:
                self.stats.filtered_out += 1
                filters.remember_filtered(message_id, found, now)

