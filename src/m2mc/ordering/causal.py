"""Causal broadcast ordering with vector clocks (docs/interfaces.md §6).

A message from ``j`` carries ``vclock`` with ``vclock[j] == seq`` and, for every
other ``k``, ``vclock[k]`` = how many of ``k``'s messages ``j`` had delivered
when it sent this one (a missing entry counts 0). With ``D[k]`` the number of
``k``'s messages delivered here, the message is deliverable when
``seq == D[j] + 1`` and ``vclock[k] <= D[k]`` for every ``k != j``.

Hold-back buffer: a held message is indexed under its first unmet dependency
``(k, c)``, meaning "wait until D[k] >= c". When ``D[k]`` reaches ``c`` only the
messages waiting on ``(k, c)`` are looked at again; each is delivered or moves
to its next unmet dependency. A message is looked at most once per entry of its
clock, so the cost is O(n) per message for a group of n senders (O(1) dict
operations per entry), never a scan of the buffer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from m2mc.kinds import Order
from m2mc.ordering.base import DEFAULT_MAX_HELD, DEFAULT_MAX_MISSING, CoreBase
from m2mc.ordering.ids import Message, MessageId
from m2mc.ordering.intervals import IntervalList

__all__ = ["CausalOrder"]

# pid k -> count c -> the held message(s) waiting until D[k] >= c.
_Waiting = dict[str, dict[int, "Message | list[Message]"]]


class CausalOrder(CoreBase):
    """Causal broadcast receiver: a pure state machine (see module docstring)."""

    __slots__ = ("_count", "_waiting")

    order = Order.CAUSAL

    def __init__(self, *, max_held: int = DEFAULT_MAX_HELD,
                 max_missing: int = DEFAULT_MAX_MISSING) -> None:
        super().__init__(max_held=max_held, max_missing=max_missing)
        self._count: dict[str, int] = {}  # D: pid -> delivered prefix length
        self._waiting: _Waiting = {}

    @property
    def clock(self) -> dict[str, int]:
        """``D``: per sender, how many of its messages are delivered (in order).

        A sender stamps its next message with this clock plus its own new seqno.
        """
        return dict(self._count)

    def receive(self, message: Message) -> list[Message]:
        if self._ready:
            ready = self.take_ready()
            return ready + self.receive(message)
        mid = message.mid
        pid = mid.pid
        seq = mid.seq
        vclock = message.vclock
        if not pid or seq < 1 or vclock is None or vclock.get(pid) != seq:
            self.malformed += 1
            return []
        counts = self._count
        count = counts.get(pid, 0)
        if seq <= count:
            self.duplicates += 1
            return []
        if self._held_count:
            held = self._held.get(pid)
            if held is not None and seq in held:
                self.duplicates += 1
                return []
        if seq != count + 1:
            ol = self._delivered.get(pid)
            if ol is not None and seq in ol:  # preloaded past the prefix
                self.duplicates += 1
                return []
            return self._wait(message, pid, seq - 1)
        get = counts.get
        for k, v in vclock.items():
            if v > get(k, 0) and k != pid:
                return self._wait(message, k, v)
        # Deliverable.
        ol = self._delivered.get(pid)
        if ol is None:
            ol = self._delivered[pid] = IntervalList()
        highs = ol.highs
        if highs and highs[-1] == count:
            highs[-1] = seq
            new_count = seq
        else:
            ol.add(seq)
            new_count = ol.highs[0]
        counts[pid] = new_count
        out = [message]
        if self._held_count:
            work: list[Message] = []
            self._collect(pid, count, new_count, work)
            if work:
                self._cascade(work, out)
        return out

    def missing(self) -> list[MessageId]:
        """Messages in the causal past of held ones, neither delivered nor held.

        A causal past holds a prefix of each sender's messages, so it is enough
        to know, per sender, the highest count any held message needs.
        O(held x group size) per call.
        """
        need: dict[str, int] = {}
        for held in self._held.values():
            for message in held.values():
                pid = message.mid.pid
                vclock = message.vclock or {}
                for k, v in vclock.items():
                    if k == pid:
                        v -= 1
                    if v > need.get(k, 0):
                        need[k] = v
        out: list[MessageId] = []
        limit = self.max_missing
        for k in sorted(need):
            held_of_k = self._held.get(k, {})
            ol = self._delivered.get(k) or IntervalList()
            for seq in ol.gaps(self._count.get(k, 0) + 1, need[k], limit + len(held_of_k)):
                if len(out) >= limit:
                    return out
                if seq not in held_of_k:
                    out.append(MessageId(k, seq))
        return out

    def preload(self, messages: Iterable[Message]) -> None:
        changed = False
        for message in messages:
            mid = message.mid
            if not mid.pid or mid.seq < 1:
                self.malformed += 1
                continue
            if self._unhold(mid.pid, mid.seq) is not None:
                changed = True
            ol = self._mark_delivered(mid)
            new_count = ol.prefix(1)
            if new_count != self._count.get(mid.pid, 0):
                self._count[mid.pid] = new_count
                changed = True
        if changed and self._held_count:
            # Rare: re-index every held message from scratch; the ones that became
            # deliverable go to take_ready() / the next receive().
            self._waiting = {}
            self._cascade(self.held_messages(), self._ready)

    def preload_intervals(self, digest: Mapping[str, Sequence[tuple[int, int]]]) -> None:
        """:meth:`preload` by intervals; what becomes deliverable goes to take_ready()."""
        marked, changed = self._mark_intervals(digest)
        for pid in marked:
            new_count = self._delivered[pid].prefix(1)
            if new_count != self._count.get(pid, 0):
                self._count[pid] = new_count
                changed = True
        if changed and self._held_count:
            self._waiting = {}
            self._cascade(self.held_messages(), self._ready)

    # -- internals -------------------------------------------------------------

    def _wait(self, message: Message, k: str, c: int) -> list[Message]:
        if not self._hold(message):
            return []
        self._index(message, k, c)
        return []

    def _index(self, message: Message, k: str, c: int) -> None:
        waiting_on_k = self._waiting.get(k)
        if waiting_on_k is None:
            waiting_on_k = self._waiting[k] = {}
        existing = waiting_on_k.get(c)
        if existing is None:
            waiting_on_k[c] = message
        elif isinstance(existing, list):
            existing.append(message)
        else:
            waiting_on_k[c] = [existing, message]

    def _collect(self, k: str, old: int, new: int, work: list[Message]) -> None:
        """Move the messages waiting on ``(k, c)`` for ``old < c <= new`` to ``work``."""
        waiting_on_k = self._waiting.get(k)
        if waiting_on_k is None:
            return
        if new - old <= len(waiting_on_k):
            keys: Iterable[int] = range(old + 1, new + 1)
        else:
            keys = sorted(c for c in waiting_on_k if old < c <= new)
        for c in keys:
            entry = waiting_on_k.pop(c, None)
            if entry is None:
                continue
            if isinstance(entry, list):
                work.extend(entry)
            else:
                work.append(entry)
        if not waiting_on_k:
            del self._waiting[k]

    def _blocker(self, pid: str, seq: int, vclock: Mapping[str, int]) -> tuple[str, int] | None:
        count = self._count.get(pid, 0)
        if seq != count + 1:
            return (pid, seq - 1)
        get = self._count.get
        for k, v in vclock.items():
            if v > get(k, 0) and k != pid:
                return (k, v)
        return None

    def _cascade(self, work: list[Message], out: list[Message]) -> None:
        """Look again at held messages whose awaited dependency was met: deliver the
        ones now deliverable (and look at what waits on them), re-index the rest."""
        counts = self._count
        i = 0
        while i < len(work):
            message = work[i]
            i += 1
            mid = message.mid
            pid = mid.pid
            seq = mid.seq
            vclock = message.vclock
            assert vclock is not None  # checked before it was held
            blocker = self._blocker(pid, seq, vclock)
            if blocker is not None:
                self._index(message, blocker[0], blocker[1])
                continue
            self._unhold(pid, seq)
            old = counts.get(pid, 0)
            ol = self._mark_delivered(mid)
            new = counts[pid] = ol.prefix(1)
            out.append(message)
            self._collect(pid, old, new, work)
