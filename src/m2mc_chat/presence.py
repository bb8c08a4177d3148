"""Who belongs to a group, and whether we still hear from them.

GJLP (seeds/000 V) tells us that a process joined (``cMemList``) or left
(``lMemList``). Between those, a member that sends nothing and is not
advertised for ``silent_after`` seconds is shown as *not heard from*: on a
broadcast network a device that walks out of range leaves no message behind.

Pure data: the caller passes ``now``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Member", "MemberState", "PresenceTable", "sync_status"]


class MemberState(enum.Enum):
    JOINED = "joined"
    LEFT = "left"
    SILENT = "not heard from"


@dataclass(frozen=True, slots=True)
class Member:
    """One row of the member list."""

    pid: str
    nick: str
    state: MemberState
    last_heard: float | None
    is_self: bool = False


@dataclass(slots=True)
class _Entry:
    left: bool
    last_heard: float | None


class PresenceTable:
    """Members of one group by pid, with their nick: the one the group layer announced
    (their display name, known before they write), else the one they last wrote under.

    The table is bounded by ``max_members`` (a hostile peer could invent pids):
    past the bound, the longest-silent member that has left is forgotten first,
    then the longest-silent one of any kind.
    """

    def __init__(self, self_pid: str, *, silent_after: float = 30.0,
                 max_members: int = 4096) -> None:
        if silent_after <= 0 or max_members < 1:
            raise ValueError("silent_after must be > 0 and max_members >= 1")
        self.self_pid = self_pid
        self.silent_after = silent_after
        self.max_members = max_members
        self._members: dict[str, _Entry] = {}
        # Nicks are learned from messages, also those of past members (history).
        self._nicks: dict[str, str] = {}
        # Nicks the group layer announced (display names): they win over the above.
        self._announced: dict[str, str] = {}

    def _entry(self, pid: str) -> _Entry:
        entry = self._members.get(pid)
        if entry is None:
            self._make_room()
            entry = self._members[pid] = _Entry(left=False, last_heard=None)
        return entry

    def _make_room(self) -> None:
        if len(self._members) < self.max_members:
            return

        def staleness(item: tuple[str, _Entry]) -> tuple[bool, float]:
            _pid, entry = item
            # Keep members still present over those that left; then the most recent.
            heard = entry.last_heard if entry.last_heard is not None else float("-inf")
            return (not entry.left, heard)

        candidates = [item for item in self._members.items() if item[0] != self.self_pid]
        if candidates:
            victim, _ = min(candidates, key=staleness)
            del self._members[victim]

    def joined(self, pid: str, now: float | None = None) -> None:
        entry = self._entry(pid)
        entry.left = False
        if now is not None:
            entry.last_heard = now

    def left(self, pid: str) -> None:
        self._entry(pid).left = True

    def heard(self, pid: str, now: float, nick: str | None = None) -> None:
        """We received something from ``pid``: a message or an advertisement."""
        entry = self._entry(pid)
        entry.last_heard = now if entry.last_heard is None else max(entry.last_heard, now)
        if nick:
            self.learn_nick(pid, nick)

    def learn_nick(self, pid: str, nick: str) -> None:
        """Remember the nick ``pid`` wrote under, member or not (bounded like the members)."""
        if nick:
            _remember(self._nicks, pid, nick, self.max_members)

    def announce_nick(self, pid: str, nick: str) -> None:
        """The group layer says ``pid`` goes by ``nick`` (``""``: it announces none, so the
        nick it writes under shows again)."""
        if nick:
            _remember(self._announced, pid, nick, self.max_members)
        else:
            self._announced.pop(pid, None)

    def set_members(self, present: Iterable[str], gone: Iterable[str]) -> None:
        """Merge a GJLP group record: ``present`` (cMemList) and ``gone`` (lMemList)."""
        for pid in present:
            self._entry(pid).left = False
        for pid in gone:
            self._entry(pid).left = True

    def last_heard(self, pid: str) -> float | None:
        """When ``pid`` was last heard from (None: never, or not a member we know)."""
        entry = self._members.get(pid)
        return entry.last_heard if entry is not None else None

    def nick(self, pid: str) -> str:
        return self._announced.get(pid) or self._nicks.get(pid, pid)

    def __contains__(self, pid: object) -> bool:
        return pid in self._members

    def state(self, pid: str, now: float) -> MemberState:
        entry = self._members[pid]
        if entry.left:
            return MemberState.LEFT
        if pid == self.self_pid:
            return MemberState.JOINED
        if entry.last_heard is None or now - entry.last_heard > self.silent_after:
            return MemberState.SILENT
        return MemberState.JOINED

    def members(self, now: float) -> list[Member]:
        """Every known member: present ones first, then silent, then those who left; by nick."""
        rank = {MemberState.JOINED: 0, MemberState.SILENT: 1, MemberState.LEFT: 2}
        rows = [Member(pid=pid, nick=self.nick(pid), state=self.state(pid, now),
                       last_heard=entry.last_heard, is_self=pid == self.self_pid)
                for pid, entry in self._members.items()]
        rows.sort(key=lambda m: (rank[m.state], not m.is_self, m.nick.casefold(), m.pid))
        return rows

    def count(self, now: float, state: MemberState = MemberState.JOINED) -> int:
        return sum(1 for pid in self._members if self.state(pid, now) is state)


def _remember(table: dict[str, str], pid: str, nick: str, bound: int) -> None:
    """``table[pid] = nick`` as the most recent entry; past ``bound`` the least recently
    learned entry is forgotten."""
    table.pop(pid, None)
    if len(table) >= bound:
        del table[next(iter(table))]
    table[pid] = nick


def sync_status(pending: int) -> str:
    """The status-bar text for a catch-up in progress: ``synchronizing 1,234 messages``."""
    if pending <= 0:
        return ""
    noun = "message" if pending == 1 else "messages"
    return f"synchronizing {pending:,} {noun}"
