"""A group's membership: the seed's ``cMemList``/``lMemList`` (seeds/000 V.A) kept
as one entry per process with a version, so the lists merge without losing a
rejoin.

The seed's merge rule (IX.C.4) keeps a process in ``lMemList`` forever once it
left, so a process that leaves and rejoins would never be current again. Here
each process numbers its own joins and leaves (``version`` grows by one each
time, persisted across restarts); a merge keeps, per process, the entry with
the greatest version. ``cMemList`` = entries with ``joined``; ``lMemList`` =
the rest. See docs/decisions.md.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from m2mc.group.codec import MemberEntry


class Membership:
    """Bounded: at most ``max_members`` entries; entries for new processes past the
    bound are refused and counted (known processes still update)."""

    __slots__ = ("_current", "_entries", "_pids", "_sorted", "max_members", "refused")

    def __init__(self, max_members: int, entries: Iterable[MemberEntry] = ()) -> None:
        self.max_members = max_members
        self._entries: dict[str, MemberEntry] = {}
        self._pids: list[str] = []  # the keys of _entries, sorted (kept so as a pid comes)
        # current() and entries(), sorted, kept until an entry changes: a node reads
        # them for every status it hears, and a group may have a thousand members.
        self._current: tuple[str, ...] | None = None
        self._sorted: tuple[MemberEntry, ...] | None = None
        self.refused = 0
        for entry in entries:
            self.apply(entry)

    def apply(self, entry: MemberEntry) -> bool:
        """Merge one entry; True if it changed what we know."""
        known = self._entries.get(entry.pid)
        if known is None:
            if len(self._entries) >= self.max_members:
                self.refused += 1
                return False
            at = bisect_left(self._pids, entry.pid)
            self._pids.insert(at, entry.pid)
            found = self._sorted
            if found is not None:  # kept by copying in C, not rebuilt entry by entry
                self._sorted = (*found[:at], entry, *found[at:])
        elif entry.version < known.version or (
                entry.version == known.version and (entry.joined or not known.joined)):
            # Older news, or the same news. At an equal version a leave wins over a
            # join: a process only ever writes one of them under a given version.
            return False
        else:
            found = self._sorted
            if found is not None:
                at = bisect_left(self._pids, entry.pid)
                self._sorted = (*found[:at], entry, *found[at + 1:])
        self._entries[entry.pid] = entry
        self._current = None
        return True

    def merge(self, entries: Iterable[MemberEntry]) -> list[MemberEntry]:
        """Merge many entries; returns those that changed something."""
        return [e for e in entries if self.apply(e)]

    def get(self, pid: str) -> MemberEntry | None:
        return self._entries.get(pid)

    def is_member(self, pid: str) -> bool:
        entry = self._entries.get(pid)
        return entry is not None and entry.joined

    def current(self) -> list[str]:
        """``cMemList``, sorted (a new list: the caller may keep or change it)."""
        return list(self.current_tuple())

    def current_tuple(self) -> tuple[str, ...]:
        """``cMemList``, sorted, without a copy: the same tuple until an entry changes."""
        current = self._current
        if current is None:
            current = self._current = tuple([e.pid for e in self.entries() if e.joined])
        return current

    def current_count(self) -> int:
        """``len(self.current())``, without the copy."""
        return len(self.current_tuple())

    def departed(self) -> list[str]:
        """``lMemList``, sorted."""
        return sorted(pid for pid, e in self._entries.items() if not e.joined)

    def entries(self) -> tuple[MemberEntry, ...]:
        """Every entry, by pid."""
        found = self._sorted
        if found is None:
            entries = self._entries
            found = self._sorted = tuple([entries[pid] for pid in self._pids])
        return found

    def covers(self, entries: Iterable[MemberEntry]) -> bool:
        """True if every entry given is already known here at the same or a newer version."""
        for entry in entries:
            known = self._entries.get(entry.pid)
            if known is None or known.version < entry.version:
                return False
            if known.version == entry.version and known.joined and not entry.joined:
                return False
        return True

    def __len__(self) -> int:
        return len(self._entries)
