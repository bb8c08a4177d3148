"""How :class:`~m2mc.wire.m2mp.M2MPLayer` recognises the looped-back copies of its
own packets, which release its flow control (seeds/002 section 5): by header alone,
compared in C against the outstanding packets' headers, oldest first, whether the
copies were read one by one or joined (wire/segments.py)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import islice, repeat
from operator import itemgetter

from m2mc.wire.m2mp_types import M2MPStats
from m2mc.wire.packet import HEADER_SIZE, MAX_DATAGRAM, MAX_PACKET
from m2mc.wire.segments import Segments, header_slices, segment_count

__all__ = ["OwnCopies", "header_of"]

header_of = itemgetter(slice(None, HEADER_SIZE))  # a packet's first 8 bytes, in C


class OwnCopies:
    """The layer's sent packets whose looped-back copy is awaited, and the taking of
    those copies (the layer binds :meth:`take_loopbacks` and :meth:`release` once)."""

    __slots__ = ("deadlines", "outstanding", "stats")

    def __init__(self, stats: M2MPStats) -> None:
        self.stats = stats
        # Headers (8 bytes) of our packets whose copy is awaited, oldest first (at most
        # flow_window), and their flow deadlines alongside. The layer appends to both
        # when it sends, and pops a packet whose copy is overdue.
        self.outstanding: deque[bytes] = deque()
        self.deadlines: deque[float] = deque()

    def take_loopbacks(self, datagrams: Sequence[bytes]) -> Sequence[bytes]:
        """Consume the leading datagrams that are copies of our oldest outstanding packets
        (the sender's common case, recognised by header alone), read one by one or
        joined (Segments); return the rest."""
        while datagrams and self.outstanding:
            if type(datagrams[0]) is Segments:
                if not self._take_own_block(datagrams[0]):
                    break
                datagrams = datagrams[1:]
                continue
            rest = self._take_own_packets(datagrams)
            if len(rest) == len(datagrams):
                break
            datagrams = rest
        return datagrams

    def _take_own_block(self, block: bytes) -> bool:
        """Take a Segments that is the copies of our oldest outstanding packets, all of
        it (else False: the receive loop takes it apart)."""
        count = segment_count(block)
        outstanding = self.outstanding
        if count > len(outstanding) or list(map(block.__getitem__, header_slices(count))) != list(
                islice(outstanding, count)):
            return False
        popleft, pop_deadline = outstanding.popleft, self.deadlines.popleft
        for _ in repeat(None, count):
            popleft()
            pop_deadline()
        stats = self.stats
        stats.packets_in += count
        stats.bytes_in += len(block)
        stats.looped_back += count
        return True

    def _take_own_packets(self, datagrams: Sequence[bytes]) -> Sequence[bytes]:
        outstanding, deadlines = self.outstanding, self.deadlines
        count = min(len(datagrams), len(outstanding))
        head = datagrams[:count]
        if count and max(map(len, head)) > MAX_PACKET:
            # Up to the first Segments (taken by _take_own_block) or oversized datagram
            # (no packet: the slow path counts it); a packet of a larger packet size
            # (ours, at packet=N) is a copy like any other.
            count = next((i for i, d in enumerate(head)
                          if len(d) > MAX_DATAGRAM or type(d) is Segments), count)
            head = head[:count]
        # Compared in C; on a mismatch (a copy lost, another sender's packet between
        # ours) only the matching prefix is taken.
        if list(map(header_of, head)) != list(islice(outstanding, count)):
            count = 0
            for datagram, header in zip(head, outstanding, strict=False):
                if datagram[:HEADER_SIZE] != header:
                    break
                count += 1
            head = head[:count]
        if not count:
            return datagrams  # nothing to take here
        popleft, pop_deadline = outstanding.popleft, deadlines.popleft
        for _ in repeat(None, count):
            popleft()
            pop_deadline()
        stats = self.stats
        stats.packets_in += count
        stats.bytes_in += sum(map(len, head))
        stats.looped_back += count
        return datagrams[count:]

    def release(self, header: bytes) -> None:
        """A looped-back copy of ours that is not the oldest outstanding packet's."""
        outstanding = self.outstanding
        if header not in outstanding:
            return  # a redundant copy, or a straggler already given up on
        # Packets are not reordered (seeds/002 section 1, assumption 4): the copy of a
        # later packet means the ones sent before it lost theirs.
        deadlines = self.deadlines
        while outstanding.popleft() != header:
            deadlines.popleft()
            self.stats.loopbacks_missed += 1
        deadlines.popleft()
