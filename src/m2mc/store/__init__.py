"""The durable log of the group layer: each group's GrpMsgList (seeds/000 VI.A.3)
and the protocol state a node needs to come back after ``kill -9``.

:class:`GroupStore` is what the group layer calls; :class:`MemoryStore` keeps it
in memory (tests, throw-away nodes) and :class:`~m2mc.store.sqlite.SqliteStore`
in an SQLite file in WAL mode. Writes may be buffered until :meth:`commit`;
reads always see every earlier write. The group layer commits before any
datagram that depends on a write leaves the node, so a restarted node never
reuses a message identity.

Each group's log is bounded by a :class:`~m2mc.store.retention.RetentionPolicy`
(age, bytes, ``full`` or ``ids`` mode; :meth:`GroupStore.set_retention`): the
oldest delivered messages are evicted first, and what the log no longer holds
is remembered compactly (:class:`~m2mc.store.retention.GoneLog`). A log in
memory is always bounded (``memory_bytes`` per group, 32 MiB by default).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from m2mc.kinds import GjlpState, Order
from m2mc.ordering import Message, MessageId
from m2mc.store.retention import (
    GoneAnswer,
    GoneLog,
    RetentionPolicy,
    add_gone,
    intersect,
    normalize,
    stored_size,
    stub_of,
    subtract_points,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["GoneAnswer", "GoneLog", "GroupRow", "GroupStore", "MemberEntry", "MemoryStore",
           "RetentionPolicy", "StoredMessage"]


@dataclass(frozen=True, slots=True)
class MemberEntry:
    """One process in a group's membership: ``version`` increases on every join
    and leave of that process, so the newest word about it wins a merge.

    The group layer's (m2mc.group.messages re-exports it: GrpInfo carries it, the
    total-order log orders it), defined here because a stored row holds it."""

    pid: str
    version: int
    joined: bool


@dataclass(slots=True)
class GroupRow:
    """A GIIT row as stored. ``state``: ``member``, ``left`` or ``rejected`` (N/A)."""

    gid: str
    desc: str
    order: Order
    state: GjlpState
    my_version: int = 0
    members: list[MemberEntry] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    message: Message
    delivered: bool


class GroupStore(Protocol):
    def load_groups(self) -> list[GroupRow]: ...

    def save_group(self, row: GroupRow, changed: Sequence[MemberEntry] | None = None) -> None:
        """Write ``row``. ``changed``: when given, every entry of ``row.members`` not in
        it is as this store last saved it for the group (a store may write only those)."""
        ...

    def put(self, gid: str, message: Message, delivered: bool) -> None:
        """Add a message to the group's GrpMsgList, or replace it: its delivered flag
        and gseq are then those of this put. It keeps its place in the write order."""
        ...

    def put_delivered(self, gid: str, messages: Sequence[Message]) -> None:
        """``put(gid, m, True)`` for each of ``messages``, in order (a receiver's batch)."""
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

    def commit(self, now: float | None = None) -> None:
        """Make every write durable. ``now`` (the driver's clock) runs age eviction
        and dates the writes that follow (a log given a wall clock of its own uses
        that instead): a message's age counts from the last commit before it."""
        ...

    def close(self) -> None: ...

    # -------------------------------------------------------------- retention
    def set_retention(self, policy: RetentionPolicy) -> None: ...

    def gone(self, gid: str) -> GoneLog:
        """What the log no longer holds of ``gid`` although this node delivered or
        skipped it (a copy)."""
        ...

    def load_stubs(self, gid: str) -> list[Message]:
        """``ids`` mode: the delivered messages kept as identities (payload ``b""``)."""
        ...

    def gone_answer(self, gid: str, ranges: dict[str, list[tuple[int, int]]],
                    gseqs: list[tuple[int, int]], limit: int) -> GoneAnswer:
        """Of ``ranges`` (seqnos per sender) and ``gseqs`` (positions), what this log
        cannot serve because it evicted or skipped it, with at most ``limit`` stubs."""
        ...

    def note_skipped(self, gid: str, ids: dict[str, list[tuple[int, int]]], gseq_floor: int,
                     stubs: list[Message]) -> None:
        """This node gave these up (gone everywhere): remember them as gone."""
        ...

    def log_bytes(self, gid: str) -> int:
        """Bytes the group's messages count for (the bytes bound)."""
        ...


class MemoryStore:
    """A :class:`GroupStore` in memory: nothing survives the process. Bounded by
    its retention policy (``memory_bytes`` per group at most)."""

    def __init__(self, retention: RetentionPolicy | None = None) -> None:
        self._groups: dict[str, GroupRow] = {}
        # gid -> pid -> seq -> [message, delivered, stored at]; dicts keep write order.
        self._messages: dict[str, dict[str, dict[int, list[Any]]]] = {}
        self._order: dict[str, dict[tuple[str, int], None]] = {}
        self._gseq: dict[str, dict[int, tuple[str, int]]] = {}
        self._meta: dict[str, str] = {}
        # Retention: bytes per group, stubs (ids mode) in the order they were made,
        # and what the log no longer holds.
        self._bytes: dict[str, int] = {}
        self._stubs: dict[str, dict[tuple[str, int], Message]] = {}
        self._stub_seqs: dict[str, dict[str, dict[int, None]]] = {}  # gid -> pid -> seqs
        self._gone: dict[str, GoneLog] = {}
        self._now: float | None = None  # the last commit's time: stamps new writes
        self._first: float | None = None  # the first commit's time (writes before it)
        self._next_age_check = 0.0
        self._evict_at: dict[str, int] = {}  # bytes at which the next bytes pass runs
        self.evicted = 0  # messages evicted (dropped whole or turned into stubs)
        self.set_retention(retention or RetentionPolicy())

    def set_retention(self, policy: RetentionPolicy) -> None:
        self.retention = policy
        self._bound = policy.bytes_bound(in_memory=True)
        self._evict_at.clear()
        for gid in list(self._order):
            self._evict_bytes(gid)

    def load_groups(self) -> list[GroupRow]:
        return [GroupRow(r.gid, r.desc, r.order, r.state, r.my_version, list(r.members))
                for r in self._groups.values()]

    def save_group(self, row: GroupRow, changed: Sequence[MemberEntry] | None = None) -> None:
        self._groups[row.gid] = GroupRow(row.gid, row.desc, row.order, row.state,
                                         row.my_version, list(row.members))

    def put_delivered(self, gid: str, messages: Sequence[Message]) -> None:
        for message in messages:
            self.put(gid, message, True)

    def put(self, gid: str, message: Message, delivered: bool) -> None:
        mid = message.mid
        by_pid = self._messages.setdefault(gid, {}).setdefault(mid.pid, {})
        earlier = by_pid.get(mid.seq)
        size = stored_size(message)
        if earlier is not None:  # replaced: its old stamp no longer names it
            old = earlier[0]
            size -= stored_size(old)
            if old.gseq is not None:
                self._gseq.get(gid, {}).pop(old.gseq, None)
        by_pid[mid.seq] = [message, delivered, self._now]
        self._order.setdefault(gid, {})[(mid.pid, mid.seq)] = None
        if message.gseq is not None:
            self._gseq.setdefault(gid, {})[message.gseq] = (mid.pid, mid.seq)
        total = self._bytes[gid] = self._bytes.get(gid, 0) + size
        if total > self._evict_at.get(gid, self._bound):
            self._evict_bytes(gid)

    def _entry(self, gid: str, mid: MessageId) -> list[Any] | None:
        return self._messages.get(gid, {}).get(mid.pid, {}).get(mid.seq)

    def mark_delivered(self, gid: str, mid: MessageId) -> None:
        entry = self._entry(gid, mid)
        if entry is not None:
            entry[1] = True

    def set_gseq(self, gid: str, mid: MessageId, gseq: int) -> None:
        entry = self._entry(gid, mid)
        if entry is not None:
            message = entry[0]
            entry[0] = Message(message.mid, message.parent, message.payload, message.vclock, gseq)
            self._gseq.setdefault(gid, {})[gseq] = (mid.pid, mid.seq)

    def get(self, gid: str, mid: MessageId) -> Message | None:
        entry = self._entry(gid, mid)
        if entry is None:
            return None
        message: Message = entry[0]
        return message

    def seq_range(self, gid: str, pid: str, lo: int, hi: int, limit: int) -> list[Message]:
        by_pid = self._messages.get(gid, {}).get(pid, {})
        return [by_pid[s][0] for s in _keys_in(by_pid, lo, hi)[:limit]]

    def gseq_range(self, gid: str, lo: int, hi: int, limit: int) -> list[Message]:
        index = self._gseq.get(gid, {})
        out = []
        for g in _keys_in(index, lo, hi):
            message = self.get(gid, MessageId(*index[g]))
            if message is not None:
                out.append(message)
            if len(out) >= limit:
                break
        return out

    def load_messages(self, gid: str) -> list[StoredMessage]:
        out = []
        by_gid = self._messages.get(gid, {})
        for pid, seq in self._order.get(gid, {}):
            message, delivered, _ = by_gid[pid][seq]
            out.append(StoredMessage(message, bool(delivered)))
        return out

    def high_water(self, gid: str, pid: str) -> int:
        high = max(self._messages.get(gid, {}).get(pid, {0: None}), default=0)
        gone = self._gone.get(gid)
        if gone is not None:
            high = max(high, gone.high(pid))
        seqs = self._stub_seqs.get(gid, {}).get(pid)
        if seqs:
            high = max(high, max(seqs))
        return high

    def get_meta(self, key: str) -> str | None:
        return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self._meta[key] = value

    def commit(self, now: float | None = None) -> None:
        if now is None:
            return
        self._now = now
        if self._first is None:
            self._first = now
        age = self.retention.age
        if age and now >= self._next_age_check:
            self._next_age_check = now + self.retention.age_check_every()
            for gid in list(self._order):
                self._evict_old(gid, now - age)

    def close(self) -> None:
        return None

    # -------------------------------------------------------------- retention
    def gone(self, gid: str) -> GoneLog:
        gone = self._gone.get(gid)
        if gone is None:
            return GoneLog()
        return GoneLog({pid: list(ivs) for pid, ivs in gone.ids.items()}, gone.gseq_floor)

    def load_stubs(self, gid: str) -> list[Message]:
        return list(self._stubs.get(gid, {}).values())

    def log_bytes(self, gid: str) -> int:
        return self._bytes.get(gid, 0)

    def gone_answer(self, gid: str, ranges: dict[str, list[tuple[int, int]]],
                    gseqs: list[tuple[int, int]], limit: int) -> GoneAnswer:
        out = GoneAnswer()
        gone = self._gone.get(gid)
        stubs = self._stubs.get(gid, {})
        stub_seqs = self._stub_seqs.get(gid, {})
        for pid, ivs in ranges.items():
            ivs = normalize(ivs)
            part = intersect(ivs, gone.ids.get(pid, [])) if gone is not None else []
            seqs = stub_seqs.get(pid)
            if seqs:
                named = [s for lo, hi in ivs for s in _keys_in(seqs, lo, hi)]
                for seq in named[:max(0, limit - len(out.stubs))]:
                    out.stubs.append(stubs[(pid, seq)])
                part = normalize([*part, *((s, s) for s in named)])
            if part:
                out.ids[pid] = part
        if gone is not None and gone.gseq_floor:
            index = self._gseq.get(gid, {})
            for lo, hi in gseqs:
                hi = min(hi, gone.gseq_floor)
                if lo <= hi:
                    out.gseqs.extend(subtract_points([(lo, hi)], _keys_in(index, lo, hi)))
        return out

    def note_skipped(self, gid: str, ids: dict[str, list[tuple[int, int]]], gseq_floor: int,
                     stubs: list[Message]) -> None:
        gone = self._gone.setdefault(gid, GoneLog())
        for pid, ivs in ids.items():
            gone.add(pid, ivs)
        gone.gseq_floor = max(gone.gseq_floor, gseq_floor)
        if self.retention.keeps_ids and stubs:
            for stub in stubs:
                self._add_stub(gid, stub_of(stub))
            self._trim_stubs(gid)

    def _evict_bytes(self, gid: str) -> None:
        """Past the bytes bound: evict the oldest delivered messages down to 7/8 of it
        (so a pass runs once per eighth of the bound written, not every put)."""
        bound = self._bound
        if not bound or self._bytes.get(gid, 0) <= bound:
            return
        target = bound - bound // 8
        order = self._order[gid]
        by_gid = self._messages[gid]
        victims = []
        total = self._bytes[gid]
        for key in order:
            if total <= target:
                break
            entry = by_gid[key[0]][key[1]]
            if entry[1]:
                victims.append(key)
                total -= stored_size(entry[0])
        self._evict(gid, victims)
        # Held messages cannot go: try again only once another eighth is written.
        self._evict_at[gid] = max(bound, self._bytes[gid] + bound // 8)

    def _evict_old(self, gid: str, cutoff: float) -> None:
        order = self._order[gid]
        by_gid = self._messages[gid]
        first = self._first
        victims = []
        for key in order:
            entry = by_gid[key[0]][key[1]]
            t = entry[2] if entry[2] is not None else first
            if t is not None and t >= cutoff:
                break
            if entry[1]:
                victims.append(key)
        self._evict(gid, victims)

    def _evict(self, gid: str, victims: list[tuple[str, int]]) -> None:
        if not victims:
            return
        order = self._order[gid]
        by_gid = self._messages[gid]
        index = self._gseq.get(gid, {})
        gone = self._gone.setdefault(gid, GoneLog())
        ids = self.retention.keeps_ids
        dropped: dict[str, list[tuple[int, int]]] = {}
        total = self._bytes[gid]
        for key in victims:
            pid, seq = key
            message = by_gid[pid].pop(seq)[0]
            if not by_gid[pid]:
                del by_gid[pid]
            del order[key]
            total -= stored_size(message)
            if message.gseq is not None:
                index.pop(message.gseq, None)
                gone.gseq_floor = max(gone.gseq_floor, message.gseq)
            if ids:
                self._add_stub(gid, stub_of(message))
            else:
                dropped.setdefault(pid, []).append((seq, seq))
        self._bytes[gid] = total
        self.evicted += len(victims)
        for pid, ivs in dropped.items():
            gone.add(pid, ivs)
        if ids:
            self._trim_stubs(gid)

    def _add_stub(self, gid: str, stub: Message) -> None:
        pid, seq = stub.mid.pid, stub.mid.seq
        self._stubs.setdefault(gid, {})[(pid, seq)] = stub
        self._stub_seqs.setdefault(gid, {}).setdefault(pid, {})[seq] = None

    def _trim_stubs(self, gid: str) -> None:
        """``ids`` mode: past ``max_ids`` stubs, the oldest are dropped (remembered gone)."""
        stubs = self._stubs[gid]
        extra = len(stubs) - self.retention.ids_bound(in_memory=True)
        if extra <= 0:
            return
        gone = self._gone.setdefault(gid, GoneLog())
        seqs = self._stub_seqs[gid]
        dropped: dict[str, list[tuple[int, int]]] = {}
        for key in list(islice(stubs, extra)):
            del stubs[key]
            del seqs[key[0]][key[1]]
            if not seqs[key[0]]:
                del seqs[key[0]]
            dropped.setdefault(key[0], []).append((key[1], key[1]))
        for pid, ivs in dropped.items():
            add_gone(gone.ids, pid, ivs)


def _keys_in(index: dict[int, Any], lo: int, hi: int) -> list[int]:
    """The keys of ``index`` in ``lo..hi``, ascending."""
    if hi - lo + 1 <= len(index):
        return [k for k in range(lo, hi + 1) if k in index]
    return sorted(k for k in index if lo <= k <= hi)
