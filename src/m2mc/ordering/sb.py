"""S_b ordering: deliver a reply only after the message it answers (seeds/003 IV-VI,
seeds/000 IV).

A message is delivered the moment its parent has been delivered, or at once if
its parent is the Ordering Tree Root. Otherwise it waits in the out-of-sequence
message store (OSMS) until its parent is delivered; then it is released together
with all its held descendants, parent before child (depth first, siblings in
arrival order, as seeds/003 VI.C Algorithm 3 does).

The Ordering Tree is kept as the seed's ordering lists: per sender, the
delivered sequence numbers as intervals (:class:`IntervalList`). The OSMS is
indexed by parent identity (``parent pid -> parent seq -> children``), so
releasing the children of a delivered message costs O(children) instead of
the seed's linear ``getRow`` scans (O((m+q)^2), seeds/003 VI.C-D).

Cost per message: O(log m) to look the parent up in the ordering lists (m =
intervals of that sender, normally 1), O(1) to record it, O(released) to
release its held descendants.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence

from m2mc.kinds import Order
from m2mc.ordering.base import DEFAULT_MAX_HELD, DEFAULT_MAX_MISSING, CoreBase
from m2mc.ordering.ids import Message, MessageId
from m2mc.ordering.intervals import IntervalList

__all__ = ["SbOrder"]

# parent pid -> parent seq -> the held child, or a list of them in arrival order.
# A single child is stored bare so holding a message allocates no list.
_Waiting = dict[str, dict[int, "Message | list[Message]"]]


class SbOrder(CoreBase):
    """The S_b receiver: a pure state machine (see module docstring)."""

    __slots__ = ("_waiting",)

    order = Order.SB

    def __init__(self, *, max_held: int = DEFAULT_MAX_HELD,
                 max_missing: int = DEFAULT_MAX_MISSING) -> None:
        super().__init__(max_held=max_held, max_missing=max_missing)
        self._waiting: _Waiting = {}

    def receive(self, message: Message) -> list[Message]:
        """RECEIVE state (seeds/003 IV.C.3): deliver (RCVDeliverableMSG) or hold
        (RCVOutSequenceMSG). Returns the newly delivered messages in order."""
        if self._ready:
            ready = self.take_ready()
            return ready + self.receive(message)
        mid = message.mid
        pid = mid.pid
        seq = mid.seq
        parent = message.parent
        ppid = parent.pid
        pseq = parent.seq
        if (not pid or seq < 1 or (pseq < 1 if ppid else pseq != 0)
                or (pseq >= seq and ppid == pid)):
            # Unusable identities, or a reply to the sender's own later message
            # (a cycle): it could never be delivered, so it must not be held.
            self.malformed += 1
            return []
        delivered = self._delivered
        ol = delivered.get(pid)
        if ol is not None:
            highs = ol.highs
            if (not self._held_count and highs and highs[-1] == seq - 1
                    and (not ppid or (pseq == seq - 1 and ppid == pid))):
                # The usual message: its sender's next, answering the root or the
                # sender's previous one (delivered: the last of its ordering list),
                # nothing held. What the general path below concludes, without lookups.
                highs[-1] = seq
                return [message]
            i = bisect_right(ol.lows, seq)
            if i and seq <= ol.highs[i - 1]:
                self.duplicates += 1
                return []
        if self._held_count:
            held = self._held.get(pid)
            if held is not None and seq in held:
                self.duplicates += 1
                return []
        if ppid:  # not the root: is the parent in the Ordering Tree?
            pol = delivered.get(ppid)
            if pol is None:
                return self._hold_child(message, ppid, pseq)
            i = bisect_right(pol.lows, pseq)
            if not i or pseq > pol.highs[i - 1]:
                return self._hold_child(message, ppid, pseq)
        # RCVDeliverableMSG: UpdateOT(M).
        if ol is None:
            ol = delivered[pid] = IntervalList()
        highs = ol.highs
        if highs and highs[-1] == seq - 1:
            highs[-1] = seq  # InsertInOL fast path: the sender's next seqno
        else:
            ol.add(seq)
        out = [message]
        if self._held_count:
            waiting_on_pid = self._waiting.get(pid)
            if waiting_on_pid is not None:
                children = waiting_on_pid.pop(seq, None)
                if children is not None:
                    if not waiting_on_pid:
                        del self._waiting[pid]
                    self._release(children, out)
        return out

    def receive_run(self, messages: Sequence[Message]) -> int:
        """:meth:`receive` for the leading messages of a batch that are one sender's
        next messages in a row, each answering the root or that sender's previous
        message, while nothing is held: they are delivered in order, as ``receive``
        would deliver them one by one, and their count is returned. The caller hands
        the rest (from that index on) to ``receive``. A receiver's common case: a
        sender's batch of records, arriving in order."""
        if self._held_count or self._ready or not messages:
            return 0
        pid = messages[0].mid.pid
        ol = self._delivered.get(pid)
        if ol is None or not ol.highs:
            return 0
        highs = ol.highs
        expect = highs[-1] + 1
        count = 0
        for message in messages:
            mid = message.mid
            if mid.seq != expect or mid.pid != pid:
                break
            parent = message.parent
            if parent.pid:
                if parent.seq != expect - 1 or parent.pid != pid:
                    break
            elif parent.seq:
                break
            expect += 1
            count += 1
        if count:
            highs[-1] = expect - 1
        return count

    def missing(self) -> list[MessageId]:
        """Parents that held messages wait for and that are not held themselves."""
        out: list[MessageId] = []
        limit = self.max_missing
        held = self._held
        for ppid in sorted(self._waiting):
            held_of_pid = held.get(ppid, {})
            for pseq in sorted(self._waiting[ppid]):
                if len(out) >= limit:
                    return out
                if pseq not in held_of_pid:
                    out.append(MessageId(ppid, pseq))
        return out

    def preload(self, messages: Iterable[Message]) -> None:
        """Mark ``messages`` delivered without returning them. Held children they
        make deliverable are released to :meth:`take_ready` / the next ``receive``."""
        loaded: list[MessageId] = []
        for message in messages:
            mid = message.mid
            if not mid.pid or mid.seq < 1:
                self.malformed += 1
                continue
            if self.delivered(mid):
                continue
            held = self._unhold(mid.pid, mid.seq)
            if held is not None:
                self._forget_waiting(held)
            self._mark_delivered(mid)
            loaded.append(mid)
        for mid in loaded:
            waiting_on_pid = self._waiting.get(mid.pid)
            if waiting_on_pid is None:
                continue
            children = waiting_on_pid.pop(mid.seq, None)
            if not waiting_on_pid:
                del self._waiting[mid.pid]
            if children is not None:
                self._release(children, self._ready)

    def preload_intervals(self, digest: Mapping[str, Sequence[tuple[int, int]]]) -> None:
        """:meth:`preload` by intervals: the children waiting on any of them are released
        to :meth:`take_ready`, parent before child."""
        marked, _ = self._mark_intervals(digest)
        for pid, seqs in marked.items():
            waiting_on_pid = self._waiting.get(pid)
            if not waiting_on_pid:
                continue
            for pseq in [s for s in waiting_on_pid if s in seqs]:
                children = waiting_on_pid.pop(pseq, None)
                if children is not None:
                    self._release(children, self._ready)
            if not waiting_on_pid and self._waiting.get(pid) is waiting_on_pid:
                del self._waiting[pid]

    # -- internals -------------------------------------------------------------

    def _forget_held(self, message: Message | None) -> None:
        if message is not None:
            self._forget_waiting(message)

    def _hold_child(self, message: Message, ppid: str, pseq: int) -> list[Message]:
        """RCVOutSequenceMSG: InsertInOSMT, indexed by parent."""
        if not self._hold(message):
            return []
        waiting_on_pid = self._waiting.get(ppid)
        if waiting_on_pid is None:
            waiting_on_pid = self._waiting[ppid] = {}
        existing = waiting_on_pid.get(pseq)
        if existing is None:
            waiting_on_pid[pseq] = message
        elif isinstance(existing, list):
            existing.append(message)
        else:
            waiting_on_pid[pseq] = [existing, message]
        return []

    def _forget_waiting(self, message: Message) -> None:
        """Remove a held message from its parent's waiting entry."""
        parent = message.parent
        waiting_on_pid = self._waiting.get(parent.pid)
        if waiting_on_pid is None:
            return
        entry = waiting_on_pid.get(parent.seq)
        if entry is message:
            del waiting_on_pid[parent.seq]
        elif isinstance(entry, list):
            entry[:] = [m for m in entry if m is not message]
            if len(entry) == 1:
                waiting_on_pid[parent.seq] = entry[0]
            elif not entry:
                del waiting_on_pid[parent.seq]
        if not waiting_on_pid:
            del self._waiting[parent.pid]

    def _release(self, children: Message | list[Message], out: list[Message]) -> None:
        """putOSMsgInOL (Algorithm 3) without the scans: depth-first, preorder,
        siblings in arrival order; every released message is delivered and
        recorded in the ordering lists."""
        stack = children[::-1] if isinstance(children, list) else [children]
        held = self._held
        delivered = self._delivered
        waiting = self._waiting
        pop = stack.pop
        while stack:
            message = pop()
            mid = message.mid
            pid = mid.pid
            seq = mid.seq
            held_of_pid = held[pid]
            del held_of_pid[seq]
            if not held_of_pid:
                del held[pid]
            self._held_count -= 1
            ol = delivered.get(pid)
            if ol is None:
                ol = delivered[pid] = IntervalList()
            ol.add(seq)
            out.append(message)
            waiting_on_pid = waiting.get(pid)
            if waiting_on_pid is not None:
                grandchildren = waiting_on_pid.pop(seq, None)
                if grandchildren is not None:
                    if not waiting_on_pid:
                        del waiting[pid]
                    if isinstance(grandchildren, list):
                        stack.extend(reversed(grandchildren))
                    else:
                        stack.append(grandchildren)
