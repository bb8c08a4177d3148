"""A stream's sender paced by its receivers (docs/group.md section 12, "Pacing").

A receiver holds at most ``stream_window`` chunks past the next one it lacks and
refuses chunks further ahead (they are asked for again later), and a receiver that
falls behind its socket buffer loses what the kernel drops: a sender that is only
paced by its own send backlog (M2MP's loopback rule, seeds/002 section 5) can be any
distance ahead of a slow receiver. So, as the ordinary data's send window does
(:mod:`m2mc.group.window`, docs/group.md section 7), the receivers say how far they
are and the sender waits for the slowest:

* each receiver sends a STREAM_ACK ``[sender, pid, seq, next]`` per body in progress:
  it holds chunks ``0 .. next - 1`` in its body store, in order. It sends one once
  ``next`` has moved a quarter of the sender's window since its last (the window is in
  the head's descriptor), when the body is complete, and again every ``repeat``
  seconds while the body is in progress and nothing was acknowledged meanwhile (a lost
  acknowledgement is told again; a receiver that waits for repairs says it is there);
* the sender (:class:`StreamPace`, one per body it sends) sends chunk ``index`` only
  while ``index < floor + window``, ``floor`` being the lowest ``next`` among the
  receivers it waits for. With ``window <= stream_window`` a receiver it waits for
  never refuses a chunk.

Whom it waits for, and for how long:

* the members of the group when the head was sent, each from 0, but for those known
  *silent* (:class:`Silent`: members that were left out of an earlier stream of this
  node without ever acknowledging one, e.g. nodes of a version before STREAM_ACK);
  such a member counts again from its first acknowledgement;
* a member is *left out* (not waited for until its acknowledgement moves again) once
  the sender has been blocked by it for ``wait`` seconds without an acknowledgement
  from it for this body: a receiver that crashed, went out of range, never
  acknowledges (an older node), or gave the body up. A member that left the group is
  forgotten at once (:meth:`StreamPace.forget`). So nobody stalls a sender for more
  than ``wait`` seconds per stall; a receiver that is there but slow acknowledges
  (every ``repeat``, even without progress, while it waits for repairs) and is waited
  for, for as long as it keeps the body (``stream_timeout`` without progress at most).
  Only acknowledgements count: an older node asks for repairs too, and would
  otherwise hold a sender for as long as it keeps asking.

Sans-IO: times are passed in; nothing here sends, the caller does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["PaceCounters", "PaceTally", "Silent", "StreamPace", "ack_every", "pace_window"]


class PaceCounters(Protocol):
    """Where a pace counts (a node's StreamStats)."""

    stream_paced: int  # times a stream's sender waited for its receivers
    stream_laggards: int  # receivers left out for saying nothing for ``wait``


@dataclass(slots=True)
class PaceTally:
    """A pace's own counters, when no node's StreamStats are given (tests)."""

    stream_paced: int = 0
    stream_laggards: int = 0


def pace_window(stream_window: int, window_bytes: int, chunk_bytes: int) -> int:
    """Chunks a sender may have past its slowest receiver: the node's send window in
    chunks (what fits the receivers' socket buffers, group/window.py), at least 4, at
    most ``stream_window`` (what a receiver takes); ``stream_window`` if the node's
    window is off."""
    if not window_bytes:
        return stream_window
    return max(1, min(stream_window, max(4, window_bytes // max(1, chunk_bytes))))


def ack_every(window: int) -> int:
    """A receiver acknowledges each time it has moved this many chunks."""
    return max(1, window // 4)


class StreamPace:
    """The sender's side for one body (module docstring)."""

    __slots__ = ("_acks", "_heard", "_known", "_left_out", "_spoke", "blocked_since", "stats",
                 "wait", "window")

    def __init__(self, window: int, wait: float, members: Iterable[str], now: float,
                 silent: frozenset[str] | set[str] = frozenset(),
                 stats: PaceCounters | None = None
                 ) -> None:
        self.window = window
        self.wait = wait
        self.stats: PaceCounters = stats if stats is not None else PaceTally()
        self._known = set(members)  # who may be waited for: the members at the head
        self._acks = {m: 0 for m in self._known if m not in silent}  # member -> its next
        self._heard = dict.fromkeys(self._acks, now)  # member -> when last heard of
        self._left_out: set[str] = set()
        self._spoke: set[str] = set()  # members that acknowledged since the head
        self.blocked_since: float | None = None

    @property
    def floor(self) -> int | None:
        """The lowest ``next`` among the members waited for (None: nobody)."""
        left_out = self._left_out
        active = [n for m, n in self._acks.items() if m not in left_out]
        return min(active) if active else None

    def limit(self) -> int | None:
        """Chunks below this index may be sent (None: no bound)."""
        floor = self.floor
        return None if floor is None else floor + self.window

    def left_out(self) -> frozenset[str]:
        return frozenset(self._left_out)

    def heard(self, member: str, next_chunk: int, now: float) -> bool:
        """``member`` acknowledged ``next_chunk``. True if that may have made room."""
        if member not in self._known:
            return False  # joined after the head: not waited for
        old = self._acks.get(member)
        if old is None:  # known silent, now speaking: counted from here on
            old = self._acks[member] = next_chunk
        self._heard[member] = now
        self._spoke.add(member)
        moved = next_chunk > old
        if moved:
            self._acks[member] = next_chunk
        if member in self._left_out:
            if not moved:
                return False
            self._left_out.discard(member)  # back: waited for again, from where it is
        return moved

    def forget(self, member: str) -> None:
        """``member`` left the group: never wait for it."""
        self._known.discard(member)
        self._acks.pop(member, None)
        self._heard.pop(member, None)
        self._left_out.discard(member)
        self._spoke.discard(member)

    def members(self) -> list[str]:
        return list(self._acks)

    def may_send(self, index: int, now: float) -> bool:
        """May chunk ``index`` go now? False: wait (for an acknowledgement, or until
        :meth:`deadline`), and call again."""
        while True:
            limit = self.limit()
            if limit is None or index < limit:
                self.blocked_since = None
                return True
            if self.blocked_since is None:
                self.blocked_since = now
                self.stats.stream_paced += 1
            # Members holding us back that said nothing for ``wait``: left out.
            since = self.blocked_since
            gone = [m for m, n in self._acks.items()
                    if m not in self._left_out and n + self.window <= index
                    and max(since, self._heard[m]) + self.wait <= now]
            if not gone:
                return False
            self._left_out.update(gone)
            self.stats.stream_laggards += len(gone)

    def deadline(self, index: int) -> float | None:
        """While blocked at ``index``: when the first member holding it back would be
        left out."""
        since = self.blocked_since
        if since is None:
            return None
        times = [max(since, self._heard[m]) + self.wait for m, n in self._acks.items()
                 if m not in self._left_out and n + self.window <= index]
        return min(times) if times else None

    def silent(self) -> list[str]:
        """Members left out that never acknowledged anything of this body."""
        return [m for m in self._left_out if m not in self._spoke]


class Silent:
    """Per group, the members that never acknowledged a stream of ours: not waited for
    at the next head (module docstring). At most ``limit`` (max_members) per group, and
    only for groups this node sent a stream in."""

    __slots__ = ("_by_group",)

    def __init__(self) -> None:
        self._by_group: dict[str, set[str]] = {}

    def of(self, gid: str) -> frozenset[str]:
        return frozenset(self._by_group.get(gid, ()))

    def add(self, gid: str, members: Iterable[str], limit: int) -> None:
        group = self._by_group.setdefault(gid, set())
        for m in members:
            if len(group) < limit:
                group.add(m)

    def spoke(self, gid: str, member: str) -> None:
        group = self._by_group.get(gid)
        if group is not None:
            group.discard(member)
