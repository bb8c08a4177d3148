"""The durable log of the group layer: each group's GrpMsgList (seeds/000 VI.A.3)
and the protocol state a node needs to come back after ``kill -9``.

:class:`GroupStore` is what the group layer calls; :class:`MemoryStore` keeps it
in memory (tests, throw-away nodes) and :class:`~m2mc.store.sqlite.SqliteStore`
in an SQLite file in WAL mode. Writes may be buffered until :meth:`commit`;
reads always see every earlier write. The group layer commits before any
datagram that depends on a write leaves the node, so a restarted node never
reuses a message identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from m2mc.ordering import Message, MessageId

if TYPE_CHECKING:  # the group package imports this module: no cycle at run time
    from m2mc.group.codec import MemberEntry

__all__ = ["GroupRow", "GroupStore", "MemoryStore", "StoredMessage"]


@dataclass(slots=True)
class GroupRow:
    """A GIIT row as stored. ``state``: ``member``, ``left`` or ``rejected`` (N/A)."""

    gid: str
    desc: str
    order: str
    state: str
    my_version: int = 0
    members: list[MemberEntry] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    message: Message
    delivered: bool


class GroupStore(Protocol):
    def load_groups(self) -> list[GroupRow]: ...

    def save_group(self, row: GroupRow) -> None: ...

    def put(self, gid: str, message: Message, delivered: bool) -> None:
        """Add a message to the group's GrpMsgList, or replace it: its delivered flag
        and gseq are then those of this put. It keeps its place in the write order."""
        ...

    def mark_delivered(self, gid: str, mid: MessageId) -> None: ...

    def set_gseq(self, gid: str, mid: MessageId, gseq: int) -> None: ...

    def get(self, gid: str, mid: MessageId) -> Message | None: ...

    def seq_range(self, gid: str, pid: str, lo: int, hi: int, limit: int) -> list[Message]:
        """Stored messages of ``pid`` with ``lo <= seq <= hi``, ascending, at most ``limit``."""
        ...

    def gseq_range(self, gid: str, lo: int, hi: int, limit: int) -> list[Message]: ...

    def load_messages(self, gid: str) -> list[StoredMessage]:
        """The group's GrpMsgList in the order it was written."""
        ...

    def high_water(self, gid: str, pid: str) -> int:
        """The greatest seqno of ``pid`` stored for ``gid`` (0 if none)."""
        ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def commit(self) -> None: ...

    def close(self) -> None: ...


class MemoryStore:
    """A :class:`GroupStore` in memory: nothing survives the process."""

    def __init__(self) -> None:
        self._groups: dict[str, GroupRow] = {}
        # gid -> pid -> seq -> [message, delivered]; dicts keep write order.
        self._messages: dict[str, dict[str, dict[int, list[object]]]] = {}
        self._order: dict[str, dict[tuple[str, int], None]] = {}
        self._gseq: dict[str, dict[int, tuple[str, int]]] = {}
        self._meta: dict[str, str] = {}

    def load_groups(self) -> list[GroupRow]:
        return [GroupRow(r.gid, r.desc, r.order, r.state, r.my_version, list(r.members))
                for r in self._groups.values()]

    def save_group(self, row: GroupRow) -> None:
        self._groups[row.gid] = GroupRow(row.gid, row.desc, row.order, row.state,
                                         row.my_version, list(row.members))

    def put(self, gid: str, message: Message, delivered: bool) -> None:
        mid = message.mid
        by_pid = self._messages.setdefault(gid, {}).setdefault(mid.pid, {})
        earlier = by_pid.get(mid.seq)
        if earlier is not None:  # replaced: its old stamp no longer names it
            old = earlier[0]
            assert isinstance(old, Message)
            if old.gseq is not None:
                self._gseq.get(gid, {}).pop(old.gseq, None)
        by_pid[mid.seq] = [message, delivered]
        self._order.setdefault(gid, {})[(mid.pid, mid.seq)] = None
        if message.gseq is not None:
            self._gseq.setdefault(gid, {})[message.gseq] = (mid.pid, mid.seq)

    def _entry(self, gid: str, mid: MessageId) -> list[object] | None:
        return self._messages.get(gid, {}).get(mid.pid, {}).get(mid.seq)

    def mark_delivered(self, gid: str, mid: MessageId) -> None:
        entry = self._entry(gid, mid)
        if entry is not None:
            entry[1] = True

    def set_gseq(self, gid: str, mid: MessageId, gseq: int) -> None:
        entry = self._entry(gid, mid)
        if entry is not None:
            message = entry[0]
            assert isinstance(message, Message)
            entry[0] = Message(message.mid, message.parent, message.payload, message.vclock, gseq)
            self._gseq.setdefault(gid, {})[gseq] = (mid.pid, mid.seq)

    def get(self, gid: str, mid: MessageId) -> Message | None:
        entry = self._entry(gid, mid)
        if entry is None:
            return None
        message = entry[0]
        assert isinstance(message, Message)
        return message

    def seq_range(self, gid: str, pid: str, lo: int, hi: int, limit: int) -> list[Message]:
        by_pid = self._messages.get(gid, {}).get(pid, {})
        if hi - lo + 1 <= len(by_pid):
            seqs: list[int] = [s for s in range(lo, hi + 1) if s in by_pid]
        else:
            seqs = sorted(s for s in by_pid if lo <= s <= hi)
        out = []
        for s in seqs[:limit]:
            message = by_pid[s][0]
            assert isinstance(message, Message)
            out.append(message)
        return out

    def gseq_range(self, gid: str, lo: int, hi: int, limit: int) -> list[Message]:
        index = self._gseq.get(gid, {})
        keys = (range(lo, hi + 1) if hi - lo + 1 <= len(index)
                else sorted(g for g in index if lo <= g <= hi))
        out = []
        for g in keys:
            key = index.get(g)
            if key is None:
                continue
            message = self.get(gid, MessageId(*key))
            if message is not None:
                out.append(message)
            if len(out) >= limit:
                break
        return out

    def load_messages(self, gid: str) -> list[StoredMessage]:
        out = []
        by_gid = self._messages.get(gid, {})
        for pid, seq in self._order.get(gid, {}):
            message, delivered = by_gid[pid][seq]
            assert isinstance(message, Message)
            out.append(StoredMessage(message, bool(delivered)))
        return out

    def high_water(self, gid: str, pid: str) -> int:
        return max(self._messages.get(gid, {}).get(pid, {0: None}), default=0)

    def get_meta(self, key: str) -> str | None:
        return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self._meta[key] = value

    def commit(self) -> None:
        return None

    def close(self) -> None:
        return None
