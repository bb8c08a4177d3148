"""What a group's STATUS messages carry, and how often a member sends one, so that
the group's status traffic does not grow with its size (docs/group.md section 6,
"Status"; docs/decisions.md, "Statuses have a budget").

A status carries at most ``status_slice`` high-waters and ``status_slice`` membership
entries: first those that changed since our last status (the senders whose data we
read: their send windows wait for it; a join or leave), then, in a periodic status,
the others in turn, from where the last one stopped. A group of ``status_slice``
members or fewer still sends everything in every status.

The periodic interval follows RTP's rule for its control reports (RFC 3550 section
6.2): the group's statuses together may take ``status_share`` of the data bytes the
group carries, and at least ``status_floor`` bytes/s when it is idle -- or what
``status_slice`` members' statuses take at ``status_interval``, if that is more, so a
group of up to ``status_slice`` members keeps ``status_interval`` -- and one member's
interval is ``members * status bytes / budget``, never less than ``status_interval``.
It is drawn uniformly from half to all of that (the node's injected random
generator); the interval is set so that the mean of the draw keeps the budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from m2mc.group.config import GroupConfig
from m2mc.group.messages import MemberEntry

__all__ = ["StatusBudget", "StatusSlicer", "status_bytes"]

_STATUS_BASE = 24  # kind, tag, sender, own high-water, sequencer, framing: about
_HW_ENTRY = 6  # a high-water's count beside its pid (msgpack int, framing)
_MEMBER_ENTRY = 8  # a membership entry beside its pid (version, joined, framing)
_RATE_HALF_LIFE = 10.0  # seconds: how fast the measured data rate follows a change


def status_bytes(summary: Mapping[str, int], members: Sequence[MemberEntry]) -> int:
    """About what a status with these high-waters and entries takes on the wire."""
    return (_STATUS_BASE + sum([len(pid) + _HW_ENTRY for pid in summary])
            + sum([len(e.pid) + _MEMBER_ENTRY for e in members]))


class StatusSlicer:
    """Chooses the high-waters and membership entries of our next status."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._recent: dict[str, None] = {}  # senders read since our last status, in order
        self._changed: dict[str, None] = {}  # membership entries changed since then
        self._high_waters = _Rotation()
        self._entries = _Rotation()

    def read_from(self, pid: str) -> None:
        """We read data of ``pid``: its high-water goes in our next status."""
        if pid not in self._recent and len(self._recent) < 4 * self.limit:
            self._recent[pid] = None

    def membership_changed(self, pids: Iterable[str]) -> None:
        for pid in pids:
            if len(self._changed) < 4 * self.limit:
                self._changed[pid] = None

    def summary(self, high_waters: Mapping[str, int], fill: bool) -> dict[str, int]:
        """At most ``limit`` of ``high_waters``: the senders read lately first, then
        (``fill``) the others in turn."""
        if len(high_waters) <= self.limit:
            self._recent.clear()
            return dict(high_waters)
        chosen = self._take(self._recent, high_waters.keys(), fill, self._high_waters)
        return {pid: high_waters[pid] for pid in sorted(chosen)}

    def members(self, entries: Sequence[MemberEntry], fill: bool) -> tuple[MemberEntry, ...]:
        """At most ``limit`` of ``entries`` (sorted by pid): those changed lately first,
        then (``fill``) the others in turn."""
        if len(entries) <= self.limit:
            self._changed.clear()
            return tuple(entries)
        by_pid = {e.pid: e for e in entries}
        chosen = self._take(self._changed, by_pid.keys(), fill, self._entries)
        return tuple(by_pid[pid] for pid in sorted(chosen))

    def _take(self, first: dict[str, None], known: Iterable[str], fill: bool,
              rotation: _Rotation) -> list[str]:
        pool = set(known)
        chosen = [pid for pid in first if pid in pool][:self.limit]
        for pid in chosen:
            del first[pid]
        if fill and len(chosen) < self.limit:
            chosen += rotation.next(sorted(pool.difference(chosen)), self.limit - len(chosen))
        return chosen


class _Rotation:
    """Takes pids in turn from a sorted ring that may change between two turns."""

    def __init__(self) -> None:
        self.after = ""  # the last pid taken: the next turn starts past it

    def next(self, ring: list[str], count: int) -> list[str]:
        start = next((i for i, pid in enumerate(ring) if pid > self.after), 0)
        taken = (ring[start:] + ring[:start])[:count]
        if taken:
            self.after = taken[-1]
        return taken


class StatusBudget:
    """The periodic status interval of one member of one group (RFC 3550 section 6.2)."""

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.rate = 0.0  # data bytes/s the group carries, smoothed
        self._bytes = 0
        self._since: float | None = None

    def data(self, nbytes: int) -> None:
        """``nbytes`` of data (sent or received) went through the group."""
        self._bytes += nbytes

    def interval(self, now: float, members: int, status_size: int) -> float:
        """The longest a periodic status may wait now: ``status_interval`` or, in a
        group whose statuses would take more than their budget, longer."""
        if self._since is None:
            self._since = now
        elapsed = now - self._since
        if elapsed > 0:
            weight = min(1.0, elapsed / _RATE_HALF_LIFE)
            self.rate += weight * (self._bytes / elapsed - self.rate)
            self._bytes = 0
            self._since = now
        config = self.config
        # uniform in [T/2, T] averages 0.75 T: T is set so that the mean keeps the budget
        small_group = config.status_slice * status_size / (0.75 * config.status_interval)
        budget = max(config.status_share * self.rate, float(config.status_floor), small_group)
        return max(config.status_interval, members * status_size / (0.75 * budget))
