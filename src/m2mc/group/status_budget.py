"""What a group's STATUS messages carry, and how often a member sends one, so that
the group's status traffic does not grow with its size (docs/group.md section 6,
"Status"; docs/decisions.md, "Statuses have a budget").

A group of ``status_slice`` members or fewer sends everything in every status, every
``status_interval``, as before. In a larger one a status carries at most
``status_slice`` high-waters and ``status_slice`` membership entries: a status for the
senders' windows or for membership news those that changed since our last status
(the senders whose data we read, longest waiting first; a join or leave), a periodic
one half the senders read lately (freshest first) and the rest in turn: the senders
whose high-water no status has told lately, ours or one overheard, first, so that the
group's statuses together sweep all the senders once every ``members / (status_slice
/ 2)`` statuses or so, rather than each member its own turns (each member's turns
start past its own pid). The status after sending is bare in a large group
(group/instance.py).

The periodic interval of a large group follows RTP's rule for its control reports
(RFC 3550 section 6.2): the group's statuses together may take ``status_share`` of the
data bytes the group carries, and at least ``status_floor`` bytes/s when it is idle,
and one member's interval is ``members * status bytes / budget``, never less than
``status_interval``. It is drawn uniformly from half to all of that (the node's
injected random generator); the interval is set so that the mean of the draw keeps
the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from m2mc.group.config import GroupConfig
from m2mc.group.messages import MemberEntry, Status

__all__ = ["StatusBudget", "StatusSlicer", "full_slice_bytes", "status_bytes"]

_STATUS_BASE = 24  # kind, tag, sender, own high-water, sequencer, framing: about
_HW_ENTRY = 6  # a high-water's count beside its pid (msgpack int, framing)
_MEMBER_ENTRY = 8  # a membership entry beside its pid (version, joined, framing)
_RATE_HALF_LIFE = 10.0  # seconds: how fast the measured data rate follows a change


def status_bytes(summary: Mapping[str, int], members: Sequence[MemberEntry]) -> int:
    """About what a status with these high-waters and entries takes on the wire."""
    return (_STATUS_BASE + sum([len(pid) + _HW_ENTRY for pid in summary])
            + sum([len(e.pid) + _MEMBER_ENTRY for e in members]))


def highest(summary: dict[str, int], limit: int) -> dict[str, int]:
    """The ``limit`` highest high-waters of ``summary`` (``summary`` itself if they fit)."""
    if len(summary) <= limit:
        return summary
    keep = sorted(summary, key=lambda p: (-summary[p], p))[:limit]
    return {p: summary[p] for p in sorted(keep)}


def full_slice_bytes(limit: int, pid: str) -> int:
    """About what a periodic status of a large group takes (``limit`` high-waters and
    entries, pids as long as ``pid``): the estimate the period starts from, before our
    first periodic status measures it."""
    return _STATUS_BASE + limit * (2 * len(pid) + _HW_ENTRY + _MEMBER_ENTRY)


class StatusSlicer:
    """Chooses the high-waters and membership entries of our next status."""

    def __init__(self, limit: int, start: str = "") -> None:
        self.limit = limit
        self._recent: dict[str, None] = {}  # senders read since our last status, in order
        self._changed: dict[str, None] = {}  # membership entries changed since then
        # Each member's turns start past its own pid: in a large group a member sends
        # few statuses, and turns that all started at the first pid would all tell of
        # the same few members.
        self._high_waters = _Rotation(start)
        self._entries = _Rotation(start)
        self._own = start  # our pid: our own entry goes in every status
        self._told_once: set[str] = set()  # news of ours a status overheard told once
        # Senders whose high-water a status told (ours, or one overheard that said as
        # much as we know), the least lately told first; only senders we know of.
        self._hw_told: dict[str, None] = {}

    def read_from(self, pid: str) -> None:
        """We read data of ``pid``: its high-water goes in our next status. The
        ``4 * limit`` senders read last are remembered, the last read at the end."""
        recent = self._recent
        if pid in recent:
            del recent[pid]
        elif len(recent) >= 4 * self.limit:
            del recent[next(iter(recent))]
        recent[pid] = None

    def told(self, entries: Iterable[MemberEntry], known: Callable[[str], MemberEntry | None]
             ) -> bool:
        """A status overheard carried ``entries``: those of our news it told as we know
        them are told once; told twice (so that the one member in ten that lost the
        first telling at 10% loss hears the second), they are no news of ours any more.
        True when no news is left to tell."""
        changed, once = self._changed, self._told_once
        for e in entries:
            if e.pid in changed and known(e.pid) == e:
                if e.pid in once:
                    del changed[e.pid]
                    once.discard(e.pid)
                elif len(once) < 4 * self.limit:
                    once.add(e.pid)
        return not changed

    def membership_changed(self, pids: Iterable[str]) -> None:
        for pid in pids:
            self._told_once.discard(pid)
            if len(self._changed) < 4 * self.limit:
                self._changed[pid] = None

    def summary(self, high_waters: Mapping[str, int], fill: bool) -> dict[str, int]:
        """At most ``limit`` of ``high_waters``. A status sent for the senders' windows
        (not ``fill``) takes the senders read lately, those that waited longest first.
        A periodic one (``fill``) takes half its entries from the senders read lately,
        the freshest first, and at least half from the others in turn: in a large
        group a member's periodic statuses are far apart, and what they are for there
        is news of the messages just sent, which some members lost (the freshest), with
        a slower sweep of everything behind it for what the news missed."""
        if len(high_waters) <= self.limit:
            self._recent.clear()
            return dict(high_waters)
        if not fill:
            chosen = self._take(self._recent, high_waters.keys(), False, self._high_waters)
        else:
            fresh = [pid for pid in reversed(self._recent) if pid in high_waters]
            chosen = fresh[:self.limit - self.limit // 2]
            for pid in chosen:
                del self._recent[pid]
            chosen += self._least_told(high_waters, chosen, self.limit - len(chosen))
        told = self._hw_told
        for pid in chosen:
            told.pop(pid, None)
            told[pid] = None
        return {pid: high_waters[pid] for pid in sorted(chosen)}

    def _least_told(self, high_waters: Mapping[str, int], chosen: list[str],
                    count: int) -> list[str]:
        """``count`` senders beside ``chosen``: those no status told lately, in our
        turn, then the least lately told. Without this each member's turns were its
        own, and a sender's high-water came round in a given status with a chance of
        about ``count / members``: a member that lost a sender's last message, its
        copy and its bare status waited for it with a geometric tail (37 s once at 50
        members, docs/group.md section 7)."""
        told = self._hw_told
        for pid in [p for p in told if p not in high_waters]:
            del told[pid]  # no longer a sender of ours: forgotten (bounds the table)
        others = sorted(set(high_waters).difference(chosen))
        untold = [pid for pid in others if pid not in told]
        taken = self._high_waters.next(untold, count)
        if len(taken) < count:
            pool = set(others).difference(taken)
            taken += [pid for pid in told if pid in pool][:count - len(taken)]
        return taken

    def heard(self, status: Status, ours: Callable[[str], int | None]) -> None:
        """A status overheard told its high-waters and its sender's own: each that is
        at least ours (``ours``: our high-water of another sender, None for one we do
        not know) need not be told again by us soon."""
        told = self._hw_told
        for pid, hw in (*status.summary.items(), (status.sender, status.own_hw)):
            mine = ours(pid)
            if mine is not None and hw >= mine:
                told.pop(pid, None)
                told[pid] = None

    def members(self, entries: Sequence[MemberEntry], fill: bool) -> tuple[MemberEntry, ...]:
        """At most ``limit`` of ``entries`` (sorted by pid): our own first (a member that
        missed our JOIN learns of us from any status of ours), then those changed
        lately, then (``fill``) the others in turn."""
        if len(entries) <= self.limit:
            self._changed.clear()
            return tuple(entries)
        by_pid = {e.pid: e for e in entries}
        changed = self._changed
        first = ({self._own: None} | changed) if self._own in by_pid else dict(changed)
        chosen = self._take(first, by_pid.keys(), fill, self._entries)
        for pid in chosen:
            changed.pop(pid, None)
            self._told_once.discard(pid)
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

    def __init__(self, start: str = "") -> None:
        self.after = start  # the last pid taken: the next turn starts past it

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
        if members <= config.status_slice:
            return config.status_interval  # a small group: every status says everything
        # uniform in [T/2, T] averages 0.75 T: T is set so that the mean keeps the budget
        budget = max(config.status_share * self.rate, float(config.status_floor))
        return max(config.status_interval, members * status_size / (0.75 * budget))
