"""FIFO ordering: each sender's messages in sequence-number order, from 1, and S_b.

A message ``<pid, seq>`` is delivered when ``seq`` is one more than the number
of ``pid``'s messages delivered so far and its S_b parent has been delivered; a
message that is not ready waits in the hold-back buffer, indexed by sender and
sequence number and (if it waits for its parent) by parent, so the arrival of a
missing message releases exactly the messages it unblocks.

Cost per message: O(1) amortised (dict look-ups).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from m2mc.kinds import Order
from m2mc.ordering.base import DEFAULT_MAX_HELD, DEFAULT_MAX_MISSING, CoreBase
from m2mc.ordering.ids import Message, MessageId
from m2mc.ordering.intervals import IntervalList

__all__ = ["FifoOrder"]


class FifoOrder(CoreBase):
    """Per-sender FIFO receiver that also keeps S_b: a pure state machine.

    A message is delivered when it is its sender's next (``seq == count + 1``) and
    its parent has been delivered (or is the root). The second condition makes the
    ``sb_order`` guarantee of docs/interfaces.md §5 hold in FIFO groups too: a reply
    from one sender never overtakes the message of another sender it answers.
    Honest histories never deadlock: a reply's parent was delivered at its sender
    before the reply was sent, so it can never depend on a later message.
    """

    __slots__ = ("_count", "_waiting")

    order = Order.FIFO

    def __init__(self, *, max_held: int = DEFAULT_MAX_HELD,
                 max_missing: int = DEFAULT_MAX_MISSING) -> None:
        super().__init__(max_held=max_held, max_missing=max_missing)
        # pid -> how many of its messages are delivered, as a prefix 1..count.
        self._count: dict[str, int] = {}
        # (parent pid, parent seq) -> held messages that wait for that parent.
        self._waiting: dict[tuple[str, int], list[Message]] = {}

    def _parent_ready(self, message: Message) -> bool:
        parent = message.parent
        return (parent.seq == 0 and not parent.pid) or self.delivered(parent)

    def receive(self, message: Message) -> list[Message]:
        if self._ready:
            ready = self.take_ready()
            return ready + self.receive(message)
        mid = message.mid
        pid = mid.pid
        seq = mid.seq
        if not pid or seq < 1 or (message.parent.pid == pid and message.parent.seq >= seq):
            self.malformed += 1
            return []
        count = self._count.get(pid, 0)
        if seq <= count or self.has(mid):  # delivered, held, or preloaded past the prefix
            self.duplicates += 1
            return []
        parent_ready = self._parent_ready(message)
        if seq != count + 1 or not parent_ready:
            if self._hold(message) and not parent_ready:
                parent = message.parent
                self._waiting.setdefault((parent.pid, parent.seq), []).append(message)
            return []
        out: list[Message] = []
        self._deliver(message, out)
        return out

    def _deliver(self, first: Message, out: list[Message]) -> None:
        """Deliver ``first``, then every held message it makes deliverable."""
        stack = [first]
        while stack:
            message = stack.pop()
            mid = message.mid
            pid = mid.pid
            ol = self._mark_delivered(mid)
            count = ol.highs[0] if ol.lows[0] == 1 else 0
            self._count[pid] = count
            out.append(message)
            if not self._held_count:
                continue
            # Candidates: the sender's next message, and replies waiting for this one.
            candidates = self._waiting.pop((pid, mid.seq), [])
            held = self._held.get(pid)
            if held is not None and count + 1 in held:
                candidates.append(held[count + 1])
            for candidate in candidates:
                cmid = candidate.mid
                if (self.is_held(cmid) and cmid.seq == self._count.get(cmid.pid, 0) + 1
                        and self._parent_ready(candidate)):
                    self._unhold(cmid.pid, cmid.seq)
                    stack.append(candidate)

    def missing(self) -> list[MessageId]:
        """For each sender with held messages: the seqnos before the last held one
        that are neither delivered nor held; then the parents held messages wait for."""
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
        for ppid, pseq in sorted(self._waiting):
            if len(out) >= self.max_missing:
                break
            parent = MessageId(ppid, pseq)
            if not self.has(parent) and parent not in out:
                out.append(parent)
        return out

    def preload(self, messages: Iterable[Message]) -> None:
        touched: set[str] = set()
        preloaded: list[MessageId] = []
        for message in messages:
            mid = message.mid
            if not mid.pid or mid.seq < 1:
                self.malformed += 1
                continue
            self._unhold(mid.pid, mid.seq)
            self._mark_delivered(mid)
            touched.add(mid.pid)
            preloaded.append(mid)
        for pid in sorted(touched):
            self._count[pid] = self._delivered[pid].prefix(1)
        if not self._held_count:
            return
        # Held messages that became deliverable: the next of each touched sender and
        # the replies to preloaded messages. Each is delivered only if it is ready.
        candidates: list[Message] = []
        for mid in preloaded:
            candidates.extend(self._waiting.pop((mid.pid, mid.seq), []))
        for pid in sorted(touched):
            held = self._held.get(pid)
            nxt = self._count[pid] + 1
            if held is not None and nxt in held:
                candidates.append(held[nxt])
        for candidate in candidates:
            cmid = candidate.mid
            if (self.is_held(cmid) and cmid.seq == self._count.get(cmid.pid, 0) + 1
                    and self._parent_ready(candidate)):
                self._unhold(cmid.pid, cmid.seq)
                self._deliver(candidate, self._ready)

    def preload_intervals(self, digest: Mapping[str, Sequence[tuple[int, int]]]) -> None:
        """:meth:`preload` by intervals; what becomes deliverable goes to take_ready()."""
        marked, _ = self._mark_intervals(digest)
        for pid in marked:
            self._count[pid] = self._delivered[pid].prefix(1)
        if not self._held_count or not marked:
            return
        candidates: list[Message] = []
        for key in [k for k in self._waiting if k[0] in marked and k[1] in marked[k[0]]]:
            candidates.extend(self._waiting.pop(key))
        for pid in sorted(marked):
            held = self._held.get(pid)
            nxt = self._count[pid] + 1
            if held is not None and nxt in held:
                candidates.append(held[nxt])
        for candidate in candidates:
            cmid = candidate.mid
            if (self.is_held(cmid) and cmid.seq == self._count.get(cmid.pid, 0) + 1
                    and self._parent_ready(candidate)):
                self._unhold(cmid.pid, cmid.seq)
                self._deliver(candidate, self._ready)
