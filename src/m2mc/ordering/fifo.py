"""FIFO ordering: each sender's messages in sequence-number order, from 1.

A message ``<pid, seq>`` is delivered when ``seq`` is one more than the number
of ``pid``'s messages delivered so far; a later one waits in the hold-back
buffer; the arrival of the missing one releases the run that follows it.

Cost per message: O(1) amortised (dict look-ups; the held store is itself
the index by ``pid`` and ``seq``).
"""

from __future__ import annotations

from collections.abc import Iterable

from m2mc.ordering.base import DEFAULT_MAX_HELD, DEFAULT_MAX_MISSING, CoreBase
from m2mc.ordering.ids import Message, MessageId
from m2mc.ordering.intervals import IntervalList

__all__ = ["FifoOrder"]


class FifoOrder(CoreBase):
    """Per-sender FIFO receiver: a pure state machine."""

    __slots__ = ("_count",)

    order = "fifo"

    def __init__(self, *, max_held: int = DEFAULT_MAX_HELD,
                 max_missing: int = DEFAULT_MAX_MISSING) -> None:
        super().__init__(max_held=max_held, max_missing=max_missing)
        # pid -> how many of its messages are delivered, as a prefix 1..count.
        self._count: dict[str, int] = {}

    def receive(self, message: Message) -> list[Message]:
        if self._ready:
            ready = self.take_ready()
            return ready + self.receive(message)
        mid = message.mid
        pid = mid.pid
        seq = mid.seq
        if not pid or seq < 1:
            self.malformed += 1
            return []
        count = self._count.get(pid, 0)
        if seq != count + 1:
            if seq <= count:
                self.duplicates += 1
                return []
            if self.has(mid):  # held, or preloaded past the prefix
                self.duplicates += 1
                return []
            self._hold(message)
            return []
        ol = self._delivered.get(pid)
        if ol is None:
            ol = self._delivered[pid] = IntervalList()
        highs = ol.highs
        if highs and highs[-1] == count:
            highs[-1] = seq
            count = seq
        else:
            ol.add(seq)
            count = ol.highs[0]  # a preloaded run right after seq joins the prefix
        out = [message]
        if self._held_count:
            count = self._release(pid, count, ol, out)
        self._count[pid] = count
        return out

    def missing(self) -> list[MessageId]:
        """For each sender with held messages: the seqnos before the last held one
        that are neither delivered nor held."""
        out: list[MessageId] = []
        for pid in sorted(self._held):
            held = self._held[pid]
            ol = self._delivered.get(pid) or IntervalList()
            start = self._count.get(pid, 0) + 1
            for seq in ol.gaps(start, max(held), self.max_missing + len(held)):
                if len(out) >= self.max_missing:
                    return out
                if seq not in held:
                    out.append(MessageId(pid, seq))
        return out

    def preload(self, messages: Iterable[Message]) -> None:
        touched: set[str] = set()
        for message in messages:
            mid = message.mid
            if not mid.pid or mid.seq < 1:
                self.malformed += 1
                continue
            self._unhold(mid.pid, mid.seq)
            self._mark_delivered(mid)
            touched.add(mid.pid)
        for pid in sorted(touched):
            ol = self._delivered[pid]
            count = ol.prefix(1)
            if self._held_count:
                count = self._release(pid, count, ol, self._ready)
            self._count[pid] = count

    def _release(self, pid: str, count: int, ol: IntervalList, out: list[Message]) -> int:
        """Deliver the held run ``count + 1, count + 2, ...``; return the new count."""
        held = self._held.get(pid)
        if held is None:
            return count
        while True:
            message = held.pop(count + 1, None)
            if message is None:
                break
            self._held_count -= 1
            ol.add(count + 1)
            count = ol.highs[0]
            out.append(message)
        if not held:
            del self._held[pid]
        return count
