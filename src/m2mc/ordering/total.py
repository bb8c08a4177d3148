"""Total order: every message carries a global sequence number (``gseq``) and every
receiver delivers in ``gseq`` order through a hold-back buffer, so every
receiver delivers the same sequence.

:class:`TotalOrder` is the receiving half; the numbers come from the group layer's
sequencing log, committed by majorities (docs/group.md section 5). It is pure.

Duplicates: a ``gseq`` already delivered or held is ignored. A message whose
identity was already delivered but that arrives under a new ``gseq`` (a
sequencer that forgot it and stamped it again) fills that ``gseq`` as a no-op,
so the sequence never stalls on it; it is counted as a duplicate.

A position may also hold no message at all (:meth:`TotalOrder.fill`): the group
layer's sequencing log numbers its membership records in the same sequence
(docs/group.md, "Total order"), and every receiver passes over them.
"""

from __future__ import annotations

from collections.abc import Iterable

from m2mc.errors import ConfigError
from m2mc.kinds import Order
from m2mc.ordering.base import DEFAULT_MAX_HELD, DEFAULT_MAX_MISSING, CoreBase
from m2mc.ordering.errors import MissingGseqError
from m2mc.ordering.ids import Message, MessageId

__all__ = ["TotalOrder"]

# What a slot holds when its gseq carries no message (see TotalOrder.fill).
_NOTHING = Message(MessageId("", 0))


class TotalOrder(CoreBase):
    """Delivers in ``gseq`` order from ``start``; see the module docstring."""

    __slots__ = ("_next", "_slots", "conflicts")

    order = Order.TOTAL

    def __init__(self, *, start: int = 1, max_held: int = DEFAULT_MAX_HELD,
                 max_missing: int = DEFAULT_MAX_MISSING) -> None:
        super().__init__(max_held=max_held, max_missing=max_missing)
        if start < 1:
            raise ConfigError(f"total order start must be >= 1, got {start}")
        self._next = start
        self._slots: dict[int, Message] = {}  # the hold-back buffer: gseq -> message
        self.conflicts = 0  # two different identities under one gseq (first one kept)

    @property
    def next_gseq(self) -> int:
        """The ``gseq`` delivered next."""
        return self._next

    @property
    def held_count(self) -> int:
        return len(self._slots)

    def receive(self, message: Message) -> list[Message]:
        if self._ready:
            ready = self.take_ready()
            return ready + self.receive(message)
        gseq = message.gseq
        if gseq is None:
            raise MissingGseqError(f"message {message.mid} has no gseq")
        mid = message.mid
        pid = mid.pid
        seq = mid.seq
        if not pid or seq < 1 or gseq < 1:
            self.malformed += 1
            return []
        nxt = self._next
        if gseq < nxt:
            self.duplicates += 1
            return []
        slots = self._slots
        if gseq in slots:
            if slots[gseq] is _NOTHING or slots[gseq].mid != mid:
                self.conflicts += 1
            self.duplicates += 1
            return []
        if gseq != nxt:
            if len(slots) >= self.max_held:
                self.refused += 1
                return []
            slots[gseq] = message
            held = self._held.get(pid)
            if held is None:
                held = self._held[pid] = {}
            held.setdefault(seq, message)
            return []
        out: list[Message] = []
        self._deliver(message, out)
        self._release(nxt + 1, out)
        return out

    def held_message(self, mid: MessageId) -> Message | None:
        """The message held (waiting for its gseq's turn) under identity ``mid``."""
        held = self._held.get(mid.pid)
        return None if held is None else held.get(mid.seq)

    def fill(self, gseq: int) -> list[Message]:
        """Position ``gseq`` carries no message: pass over it when its turn comes.
        Returns what became deliverable. A gseq already passed or held is a duplicate;
        one that would have to be held while the buffer is full is refused."""
        if self._ready:
            ready = self.take_ready()
            return ready + self.fill(gseq)
        if gseq < 1:
            self.malformed += 1
            return []
        nxt = self._next
        slots = self._slots
        if gseq < nxt or gseq in slots:
            self.duplicates += 1
            return []
        if gseq != nxt:
            if len(slots) >= self.max_held:
                self.refused += 1
                return []
            slots[gseq] = _NOTHING
            return []
        out: list[Message] = []
        self._release(nxt + 1, out)
        return out

    def _release(self, nxt: int, out: list[Message]) -> None:
        """Deliver the held positions from ``nxt`` on while they are contiguous."""
        slots = self._slots
        if slots:
            pop = slots.pop
            while True:
                next_message = pop(nxt, None)
                if next_message is None:
                    break
                self._deliver(next_message, out)
                nxt += 1
        self._next = nxt

    def missing_gseqs(self) -> list[int]:
        """The gseqs before the highest held one that are not held (at most ``max_missing``)."""
        out: list[int] = []
        if not self._slots:
            return out
        slots = self._slots
        for gseq in range(self._next, max(slots)):
            if len(out) >= self.max_missing:
                break
            if gseq not in slots:
                out.append(gseq)
        return out

    def missing(self) -> list[MessageId]:
        """Total order cannot name what it misses by identity: see :meth:`missing_gseqs`."""
        return []

    def skip_to(self, gseq: int) -> list[Message]:
        """Give up on every gseq below ``gseq`` (lost for good, or before this
        member's history) and deliver what is held from there on."""
        out: list[Message] = []
        if gseq <= self._next:
            return out
        for g in sorted(g for g in self._slots if g < gseq):
            self._drop_slot(g)
        self._next = gseq
        slots = self._slots
        while self._next in slots:
            self._deliver(slots.pop(self._next), out)
            self._next += 1
        return out

    def preload(self, messages: Iterable[Message]) -> None:
        """Mark ``messages`` delivered. Total order delivers in gseq order, so the
        highest preloaded gseq means every lower one was delivered (or was before
        this member's history): delivery continues after it."""
        highest = 0
        for message in messages:
            if message.gseq is None:
                raise MissingGseqError(f"preloaded message {message.mid} has no gseq")
            mid = message.mid
            if not mid.pid or mid.seq < 1 or message.gseq < 1:
                self.malformed += 1
                continue
            self._mark_delivered(mid)
            highest = max(highest, message.gseq)
        self._ready.extend(self.skip_to(highest + 1))

    def _drop_slot(self, gseq: int) -> None:
        message = self._slots.pop(gseq)
        if message is _NOTHING:
            return
        mid = message.mid
        held = self._held.get(mid.pid)
        if held is not None and held.get(mid.seq) is message:
            del held[mid.seq]
            if not held:
                del self._held[mid.pid]

    def _deliver(self, message: Message, out: list[Message]) -> None:
        """Deliver the message at the next gseq unless its identity already was."""
        if message is _NOTHING:
            return
        mid = message.mid
        pid = mid.pid
        held = self._held.get(pid)
        if held is not None and held.get(mid.seq) is message:
            del held[mid.seq]
            if not held:
                del self._held[pid]
        if self.delivered(mid):
            self.duplicates += 1
            return
        self._mark_delivered(mid)
        out.append(message)
