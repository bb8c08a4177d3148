"""What every ordering core offers (:class:`OrderingCore`) and the state they share.

Each core is a pure state machine: messages in through :meth:`receive`, the
messages that became deliverable out, in delivery order. No sockets, clocks,
threads or randomness.

Shared state: per sender, an :class:`~m2mc.ordering.intervals.IntervalList` of
the sequence numbers delivered (the seed's ordering lists, seeds/003 VI.B) and
a store of held messages, ``pid -> seq -> Message``. Nothing here hashes a
:class:`MessageId`: identities are looked up by ``pid`` then ``seq``, which is
what keeps the hot paths fast.

Bound (every core): at most ``max_held`` messages are held. A message that would
have to be held while the store is full is *refused*: counted in ``refused``,
not recorded (``has()`` stays False, so the group layer can fetch it again
later) and ``receive`` returns ``[]``. A message that can be delivered at once
is always accepted, and may release held ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from m2mc.errors import ConfigError
from m2mc.kinds import Order
from m2mc.ordering.ids import Message, MessageId
from m2mc.ordering.intervals import IntervalList, merge_intervals

__all__ = ["DEFAULT_MAX_HELD", "DEFAULT_MAX_MISSING", "CoreBase", "OrderingCore"]

DEFAULT_MAX_HELD = 100_000
DEFAULT_MAX_MISSING = 1024


@runtime_checkable
class OrderingCore(Protocol):
    """The interface of :class:`SbOrder`, :class:`CausalOrder`, :class:`FifoOrder`
    and :class:`TotalOrder`."""

    order: Order  # never Order.NONE
    refused: int  # refused at the bound; not recorded
    duplicates: int  # ignored: already delivered or held
    malformed: int  # dropped: an identity or clock that can never be delivered

    def receive(self, message: Message) -> list[Message]:
        """The messages that became deliverable, in delivery order; duplicates -> []."""
        ...

    def has(self, mid: MessageId) -> bool:
        """Delivered or held."""
        ...

    def delivered(self, mid: MessageId) -> bool: ...

    def digest(self) -> dict[str, list[tuple[int, int]]]:
        """Per sender pid: sorted inclusive intervals of seqnos held or delivered."""
        ...

    def missing(self) -> list[MessageId]:
        """Messages known to be needed but not received (at most ``max_missing``)."""
        ...

    def preload(self, messages: Iterable[Message]) -> None:
        """Mark as already delivered without returning them (restart from a log)."""
        ...

    def preload_intervals(self, digest: Mapping[str, Sequence[tuple[int, int]]]) -> None:
        """:meth:`preload` for every seqno of ``digest`` (sender -> inclusive intervals),
        at a cost that depends on the intervals, not on how many seqnos they hold.
        Held messages this makes deliverable go to ``take_ready()`` / the next
        ``receive()``, as with :meth:`preload`."""
        ...

    def take_ready(self) -> list[Message]: ...

    @property
    def held_count(self) -> int: ...


class CoreBase:
    """State and queries common to every core; subclasses implement the ordering."""

    __slots__ = (
        "_delivered",
        "_held",
        "_held_count",
        "_ready",
        "duplicates",
        "malformed",
        "max_held",
        "max_missing",
        "refused",
    )

    order: Order  # each core's own (a class attribute)

    def __init__(self, *, max_held: int = DEFAULT_MAX_HELD,
                 max_missing: int = DEFAULT_MAX_MISSING) -> None:
        if max_held < 0:
            raise ConfigError(f"max_held must be >= 0, got {max_held}")
        if max_missing < 0:
            raise ConfigError(f"max_missing must be >= 0, got {max_missing}")
        self.max_held = max_held
        self.max_missing = max_missing
        self._delivered: dict[str, IntervalList] = {}
        self._held: dict[str, dict[int, Message]] = {}
        self._held_count = 0
        # Held messages that preload() made deliverable: handed out first by the
        # next receive() (or take_ready()), so nothing is lost.
        self._ready: list[Message] = []
        self.refused = 0
        self.duplicates = 0
        self.malformed = 0

    # -- queries -------------------------------------------------------------

    @property
    def held_count(self) -> int:
        return self._held_count

    def delivered(self, mid: MessageId) -> bool:
        seq = mid.seq
        if seq == 0 and not mid.pid:
            return True  # the Ordering Tree Root is delivered from the start
        ol = self._delivered.get(mid.pid)
        return ol is not None and seq in ol

    def is_held(self, mid: MessageId) -> bool:
        held = self._held.get(mid.pid)
        return held is not None and mid.seq in held

    def has(self, mid: MessageId) -> bool:
        return self.delivered(mid) or self.is_held(mid)

    def held_messages(self) -> list[Message]:
        """The held messages, sorted by identity (for inspection and tests)."""
        out: list[Message] = []
        for pid in sorted(self._held):
            held = self._held[pid]
            out.extend(held[seq] for seq in sorted(held))
        return out

    def digest(self) -> dict[str, list[tuple[int, int]]]:
        out: dict[str, list[tuple[int, int]]] = {}
        for pid in sorted(self._delivered.keys() | self._held.keys()):
            ol = self._delivered.get(pid)
            held = self._held.get(pid)
            out[pid] = merge_intervals(ol, held) if held else (ol.intervals() if ol else [])
        return out

    def take_ready(self) -> list[Message]:
        """Held messages that :meth:`preload` made deliverable, in delivery order.

        They are also returned at the front of the next :meth:`receive` result,
        so a caller that never calls this loses nothing.
        """
        ready = self._ready
        self._ready = []
        return ready

    def stats(self) -> dict[str, int]:
        return {
            "held": self.held_count,
            "refused": self.refused,
            "duplicates": self.duplicates,
            "malformed": self.malformed,
        }

    def preload_intervals(self, digest: Mapping[str, Sequence[tuple[int, int]]]) -> None:
        """See :class:`OrderingCore`. The base version only records them (total order
        delivers by position: a preloaded identity is a duplicate from then on)."""
        self._mark_intervals(digest, unhold=False)

    # -- helpers for subclasses ------------------------------------------------

    def _mark_intervals(self, digest: Mapping[str, Sequence[tuple[int, int]]],
                        unhold: bool = True) -> tuple[dict[str, IntervalList], bool]:
        """Record the seqnos of ``digest`` delivered and (``unhold``) take the held ones
        among them out of the held store, as :meth:`preload` does. Returns, per sender
        touched, the seqnos marked, and whether a held message was taken out."""
        out: dict[str, IntervalList] = {}
        unheld = False
        for pid, intervals in digest.items():
            marked = IntervalList()
            for lo, hi in intervals:
                marked.add_range(max(lo, 1), hi)
            if not pid or not marked.lows:
                continue
            out[pid] = marked
            ol = self._delivered.get(pid)
            if ol is None:
                ol = self._delivered[pid] = IntervalList()
            for lo, hi in marked.intervals():
                ol.add_range(lo, hi)
            held = self._held.get(pid) if unhold else None
            if held:
                for seq in [s for s in held if s in marked]:
                    self._forget_held(self._unhold(pid, seq))
                    unheld = True
        return out, unheld

    def _forget_held(self, message: Message | None) -> None:
        """A held message was taken out by :meth:`_mark_intervals` (indexes to clean)."""
        return None


    def _hold(self, message: Message) -> bool:
        """Put ``message`` in the held store unless it is full; False if refused."""
        if self._held_count >= self.max_held:
            self.refused += 1
            return False
        mid = message.mid
        held = self._held.get(mid.pid)
        if held is None:
            held = self._held[mid.pid] = {}
        held[mid.seq] = message
        self._held_count += 1
        return True

    def _unhold(self, pid: str, seq: int) -> Message | None:
        held = self._held.get(pid)
        if held is None:
            return None
        message = held.pop(seq, None)
        if message is not None:
            self._held_count -= 1
            if not held:
                del self._held[pid]
        return message

    def _mark_delivered(self, mid: MessageId) -> IntervalList:
        ol = self._delivered.get(mid.pid)
        if ol is None:
            ol = self._delivered[mid.pid] = IntervalList()
        ol.add(mid.seq)
        return ol
