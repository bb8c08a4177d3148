"""Retention of the group log: how much of each group's GrpMsgList a node keeps
(seeds/000 VI.A.3, docs/group.md section 8, docs/decisions.md).

A :class:`RetentionPolicy` bounds each group's log by age (seconds since this
node stored a message) and by bytes (per group). At the bound the *oldest*
messages, in the order this node stored them, are evicted first, and only
messages this node has **delivered**: a held message (its parent, or its turn,
not come yet) and a total-order message without its position stay, so the
node's own ordering never loses anything it still needs.

What an eviction leaves depends on the mode:

- ``full``: the message is dropped whole. The log remembers, per sender, the
  intervals of seqnos it dropped (:class:`GoneLog`), and per group the highest
  total-order position it dropped (``gseq_floor``): a restarted node preloads
  them as delivered (no re-delivery, no held child waiting for them), never
  reuses one of its own seqnos, and answers a request for them "gone".
- ``ids``: only the payload is dropped; the identity, parent, position and
  clock stay as a *stub* (the seed's memory-constrained GrpMsgList keeps
  ``<mid_c, mid_p>`` for MOP). Stubs are bounded too (``max_ids`` per group, and
  in memory ``memory_bytes / 256``); past it the oldest are dropped as in ``full``.

The same :class:`GoneLog` records what this node *skipped* (gave up as gone
everywhere, docs/group.md section 8): to a restarted node, or to a requester, a
skipped message and an evicted one are the same: delivered here, not servable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from m2mc.errors import ConfigError
from m2mc.kinds import RetentionMode
from m2mc.ordering import Message

__all__ = ["MODES", "RECORD_OVERHEAD", "GoneAnswer", "GoneLog", "RetentionPolicy", "add_gone",
           "intersect", "stored_size"]

Intervals = list[tuple[int, int]]
MODES = tuple(RetentionMode)
RECORD_OVERHEAD = 24  # bytes a record costs in a log besides its payload and process ids
STUB_MEMORY = 256  # bytes a stub costs in a log in memory (Python objects and indexes)
MAX_GONE_INTERVALS = 1024  # per sender; past it the two lowest runs are merged


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How much of each group's log to keep. ``0`` means no bound of that kind.

    ``memory_bytes`` applies to a log kept in memory (a node without a data
    directory) on top of ``max_bytes``: such a log never keeps more than this per
    group, whatever else is configured.
    """

    age: float = 0.0
    max_bytes: int = 0
    mode: str = RetentionMode.FULL  # a RetentionMode, or its string: "full" | "ids"
    max_ids: int = 1_000_000
    memory_bytes: int = 32 << 20

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"retention mode must be one of {', '.join(MODES)}, "
                              f"got {self.mode!r}")
        if self.age < 0 or self.max_bytes < 0 or self.max_ids < 0 or self.memory_bytes < 1:
            raise ConfigError("retention bounds must be >= 0 (memory_bytes > 0)")

    @property
    def keeps_ids(self) -> bool:
        return self.mode == RetentionMode.IDS

    def bytes_bound(self, in_memory: bool) -> int:
        """The per-group bound on stored bytes (0: none)."""
        if not in_memory:
            return self.max_bytes
        return min(self.max_bytes, self.memory_bytes) if self.max_bytes else self.memory_bytes

    def ids_bound(self, in_memory: bool) -> int:
        """Stubs kept per group (``ids`` mode): in memory, no more than fit in
        ``memory_bytes`` either."""
        if not in_memory:
            return self.max_ids
        return min(self.max_ids, self.memory_bytes // STUB_MEMORY)

    def age_check_every(self) -> float:
        """How often age eviction runs: a message lives between ``age`` and ``age``
        plus this long after it was stored (every second for ages up to 1,000 s; a
        thousandth of the age beyond, so a 30-day default costs a pass every 43 min)."""
        return min(self.age / 8, max(1.0, self.age / 1000))


@dataclass(slots=True)
class GoneLog:
    """What one group's log no longer holds although this node delivered (or
    skipped) it: per sender, intervals of seqnos; and ``gseq_floor``, the highest
    total-order position evicted or passed over (every position up to it was
    delivered or passed over here: total order goes position by position)."""

    ids: dict[str, Intervals] = field(default_factory=dict)
    gseq_floor: int = 0

    def add(self, pid: str, intervals: Intervals) -> None:
        add_gone(self.ids, pid, intervals)

    def high(self, pid: str) -> int:
        ivs = self.ids.get(pid)
        return ivs[-1][1] if ivs else 0


@dataclass(slots=True)
class GoneAnswer:
    """A log's answer to "do you hold these?" for what it cannot serve: seqnos per
    sender, positions, and (``ids`` mode) the stubs of some of those seqnos."""

    ids: dict[str, Intervals] = field(default_factory=dict)
    gseqs: Intervals = field(default_factory=list)
    stubs: list[Message] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.ids or self.gseqs)


def stored_size(message: Message) -> int:
    """The bytes a message counts for in a log's bytes bound."""
    return (len(message.payload) + len(message.mid.pid) + len(message.parent.pid)
            + RECORD_OVERHEAD)


def stub_of(message: Message) -> Message:
    """``message`` without its payload (identity, parent, position and clock kept)."""
    return Message(message.mid, message.parent, b"", message.vclock, message.gseq)


def normalize(intervals: Intervals) -> Intervals:
    out: Intervals = []
    for lo, hi in sorted(iv for iv in intervals if iv[0] <= iv[1]):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def intersect(a: Intervals, b: Intervals) -> Intervals:
    out: Intervals = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract_points(a: Intervals, points: list[int]) -> Intervals:
    """``a`` without the (sorted) ``points``."""
    out: Intervals = []
    k = 0
    for lo, hi in a:
        cur = lo
        while k < len(points) and points[k] < lo:
            k += 1
        while k < len(points) and points[k] <= hi:
            if points[k] > cur:
                out.append((cur, points[k] - 1))
            cur = max(cur, points[k] + 1)
            k += 1
        if cur <= hi:
            out.append((cur, hi))
    return out


def add_gone(ids: dict[str, Intervals], pid: str, intervals: Intervals) -> None:
    """Add ``intervals`` to ``ids[pid]``, keeping at most MAX_GONE_INTERVALS runs (the
    lowest two merged past it: a run of seqnos this node never held may then be
    counted gone, which only lets a requester give up on it sooner)."""
    merged = normalize([*ids.get(pid, []), *intervals])
    while len(merged) > MAX_GONE_INTERVALS:
        merged[0:2] = [(merged[0][0], merged[1][1])]
    if merged:
        ids[pid] = merged


