"""A sender's window on what its group has not read yet: receiver-paced flow control.

M2MP's flow control paces a sender by its own receive path (seeds/002 section 5),
which says nothing of a receiver that is slower than the sender: its socket buffer
fills, the kernel drops whole runs of messages, and every member then repairs them
at once, which slows everyone further. Reliable multicast stacks pace the sender
by its receivers instead (JGroups' MFC credits, NORM's congestion control). Ours
uses what the group already sends:

* a member's status carries the highest seqno it knows of each sender, which on
  a FIFO medium is how far it has read that sender's messages (or lost them);
* a member sends a status as soon as it has read ``limit / 4`` bytes of others'
  data since its last one (:meth:`Credit.read`), so a busy sender hears from
  its receivers four times per window;
* the sender counts the bytes of its own data messages past the lowest of those
  seqnos among the members that acknowledged lately; at ``limit`` bytes ``blocked``
  is True and ``Group.send`` waits (group/backlog.py) until statuses make room.

A member whose acknowledgement has not moved for ``wait`` seconds is left out
(crashed, gone out of range, or idle and caught up) until it moves again, so a
silent member stalls a sender for ``wait`` at most. A member is counted only
once it has acknowledged something: a new one never blocks anybody before its
first status. docs/decisions.md, "Receiver-paced flow control".
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

RECORD_COST = 16  # bytes a message counts beyond its payload (about its record header)


@dataclass(slots=True)
class WindowStats:
    window_blocks: int = 0  # times the window filled and sends had to wait
    window_laggards: int = 0  # members left out for not acknowledging within ``wait``


class SendWindow:
    """The sender's side (module docstring). ``limit`` 0: no window, never blocked."""

    __slots__ = (
        "_acked_total",
        "_acks",
        "_first",
        "_left_out",
        "_moved",
        "_sent_upto",
        "_total",
        "blocked",
        "limit",
        "max_members",
        "stats",
        "wait",
    )

    def __init__(self, limit: int, wait: float, max_members: int) -> None:
        self.limit = limit
        self.wait = wait
        self.max_members = max_members
        self.blocked = False
        self.stats = WindowStats()
        # Bytes sent up to each of our seqnos from _first on (our seqnos are consecutive):
        # an array, not tuples, so that a window of 20,000 small messages is no work for
        # the garbage collector.
        self._sent_upto = array("q")
        self._first = 0  # the seqno of _sent_upto[0]
        self._total = 0  # bytes of our data messages sent
        self._acked_total = 0  # ...of which every active member has read
        self._acks: dict[str, int] = {}  # member -> highest of our seqnos it knows
        self._moved: dict[str, float] = {}  # member -> when that last went up
        self._left_out: set[str] = set()  # laggards, not waited for until they move

    @property
    def in_flight(self) -> int:
        """Bytes sent that some active member has not acknowledged."""
        return self._total - self._acked_total

    def sent(self, seq: int, size: int, now: float) -> None:
        """We sent our message ``seq`` of ``size`` payload bytes."""
        if not self.limit:
            return
        # Each message counts its record's header too, so that the window also bounds
        # the count of small messages (and this table): 2 MiB is 130,000 empty ones.
        self._total += size + RECORD_COST
        if not self._acks:
            self._acked_total = self._total  # nobody to wait for: nothing to remember
            return
        sent_upto = self._sent_upto
        if seq != self._first + len(sent_upto):  # (the first, or after a gap: start over)
            del sent_upto[:]
            self._first = seq
        sent_upto.append(self._total)
        if not self.blocked and self._total - self._acked_total >= self.limit:
            self._settle(now)  # full, unless the members we would wait for are laggards

    def room(self, size: int) -> int:
        """How many more messages of at most ``size`` payload bytes :meth:`sent` can
        take before the window may block (a lower bound; -1: no bound)."""
        if not self.limit or not self._acks:
            return -1
        if self.blocked:
            return 0
        # The k-th next one (from 0) is taken while used + k * cost < limit.
        free = self.limit - (self._total - self._acked_total)
        return 0 if free <= 0 else (free - 1) // (size + RECORD_COST) + 1

    def acked(self, member: str, seq: int, now: float) -> None:
        """``member`` says it knows our messages up to ``seq`` (its status)."""
        if not self.limit or seq <= self._acks.get(member, 0):
            return
        if member not in self._acks and len(self._acks) >= self.max_members:
            return  # bounded: such a member is simply not waited for
        self._acks[member] = seq
        self._moved[member] = now
        self._settle(now)

    def forget(self, member: str, now: float) -> None:
        """``member`` left the group: never wait for it."""
        if self._acks.pop(member, None) is not None:
            del self._moved[member]
            self._left_out.discard(member)
            self._settle(now)

    def close(self) -> None:
        """No more sends (the group was left): nothing to wait for, ever."""
        self.limit = 0
        self.blocked = False
        self._acks.clear()
        self._moved.clear()
        self._left_out.clear()
        del self._sent_upto[:]

    def deadline(self) -> float | None:
        """While blocked: when the slowest active member becomes a laggard."""
        if not self.blocked:
            return None
        left_out = self._left_out
        active = [t for m, t in self._moved.items() if m not in left_out]
        return min(active) + self.wait if active else None

    def on_timer(self, now: float) -> None:
        if self.blocked:
            self._settle(now)

    def _settle(self, now: float) -> None:
        wait = self.wait
        moved = self._moved
        floor = None
        laggards = set()
        for member, seq in self._acks.items():
            if moved[member] + wait <= now:  # (as deadline() computes it: no rounding gap)
                laggards.add(member)
            elif floor is None or seq < floor:
                floor = seq
        if laggards - self._left_out:
            self.stats.window_laggards += len(laggards - self._left_out)
        self._left_out = laggards
        sent_upto = self._sent_upto
        if floor is None:
            self._first += len(sent_upto)
            del sent_upto[:]  # nobody to wait for
            self._acked_total = self._total
        else:
            # (A laggard that moves again may be behind the floor already passed: it
            # counts from there, a window short of what it has not read.)
            index = floor - self._first
            if index >= 0 and sent_upto:
                index = min(index, len(sent_upto) - 1)
                self._acked_total = max(self._acked_total, sent_upto[index])
                if index >= len(sent_upto) // 2:  # drop what is acknowledged, now and then
                    del sent_upto[:index + 1]
                    self._first += index + 1
        blocked = floor is not None and self._total - self._acked_total >= self.limit
        if blocked and not self.blocked:
            self.stats.window_blocks += 1
        self.blocked = blocked


class Credit:
    """The receiver's side: when to send a status early (module docstring)."""

    __slots__ = ("_read", "every")

    def __init__(self, limit: int) -> None:
        self.every = limit // 4
        self._read = 0

    def read(self, size: int) -> bool:
        """``size`` bytes of others' data were read; True: send a status now."""
        if not self.every:
            return False
        self._read += size
        return self._read >= self.every

    def status_sent(self) -> None:
        self._read = 0
