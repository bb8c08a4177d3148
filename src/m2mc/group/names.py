"""Display names of a group's members: what each process calls itself.

A node may have a display name (``NodeConfig.name``; the chat sets it to the nick).
It travels as an optional trailing element of the node's own JOIN and STATUS
messages, and GRPS_INFO replies relay the names of a group's current members
(docs/group.md, "Display names"). Names are kept *beside* the membership, never in
its entries: a :class:`~m2mc.group.codec.MemberEntry` and the total-order log's
membership records compare without them, so a rename changes no view and no
configuration.

Who may say what:

- a process's own word (its JOIN or STATUS) always wins, the newest arrival first,
  and a word of "no name" (an unnamed node, or one from before names) clears it;
- a relayed name (someone's GRPS_INFO) only fills in for a member whose own word
  we have not heard, so a stale reply never undoes a rename;
- a keyed group takes no relayed names at all (GRPS_INFO is unauthenticated), and
  relays none: its names travel only sealed (encrypted under an AEAD suite).

Bounded: the owner only names processes of the group's membership (``max_members``
entries), and the table refuses more than ``max_entries`` processes in any case.
"""

from __future__ import annotations

from collections.abc import Iterable

from m2mc.errors import UsageError
from m2mc.group.codec import MAX_NAME

__all__ = ["MAX_NAME", "MemberNames", "check_name"]


def check_name(name: object) -> str:
    """``name`` if it can be a display name (a string of at most MAX_NAME bytes in
    UTF-8, ``""`` for none); :class:`UsageError` saying why not otherwise."""
    if not isinstance(name, str):
        raise UsageError(f"a display name must be a string, not {type(name).__name__}")
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        raise UsageError("a display name must be valid text (it holds a lone surrogate)") \
            from None
    if size > MAX_NAME:
        raise UsageError(f"a display name is at most {MAX_NAME} bytes in UTF-8, "
                         f"this one has {size}")
    return name


class MemberNames:
    """pid -> display name of one group's members, with where each came from."""

    __slots__ = ("_names", "max_entries", "refused")

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._names: dict[str, tuple[str, bool]] = {}  # pid -> (name, said by pid itself)
        self.refused = 0

    def said(self, pid: str, name: str) -> bool:
        """``pid`` itself says it is called ``name`` (``""``: it has none). True if the
        name shown for it changed."""
        known = self._names.get(pid)
        if known is None and not self._room():
            return False
        self._names[pid] = (name, True)
        return (known[0] if known is not None else "") != name

    def relayed(self, pid: str, name: str) -> bool:
        """Another process says ``pid`` is called ``name``: taken only while ``pid``'s own
        word is unknown. True if the name shown for it changed."""
        known = self._names.get(pid)
        if not name or (known is not None and (known[1] or known[0] == name)):
            return False
        if known is None and not self._room():
            return False
        self._names[pid] = (name, False)
        return True

    def get(self, pid: str) -> str:
        """The name of ``pid`` (``""``: none known)."""
        known = self._names.get(pid)
        return known[0] if known is not None else ""

    def of(self, pids: Iterable[str]) -> tuple[tuple[str, str], ...]:
        """``(pid, name)`` of those of ``pids`` with a name, sorted by pid."""
        names = self._names
        return tuple(sorted((pid, names[pid][0]) for pid in pids
                            if pid in names and names[pid][0]))

    def _room(self) -> bool:
        if len(self._names) < self.max_entries:
            return True
        self.refused += 1
        return False

    def __len__(self) -> int:
        return len(self._names)
