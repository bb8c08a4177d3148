"""The coordinator's tables as a replicated state machine (docs/infra.md, "Failover").

seeds/001 3.1 keeps ``members``, ``seqnum``, ``first``, ``last`` and ``recv`` at
the coordinator. Each of them changes only when the coordinator decides a
:class:`~m2mc.infra.messages.Record`, and :meth:`CoordState.apply` recomputes the
change from the record alone. So every host that applies the committed records
in log order holds the same tables, and the host elected after a crash continues
from them. ``stable`` and the norm-buffer's pending sets are not here: they only
decide when copies may be freed, and a new coordinator rebuilds them
conservatively (docs/infra.md).

The seed's gateway tables ``first`` and ``last`` (3.2) are the same rows: a row is
allocated by "mid has joined" and removed by CLEANUP (figure 5 lines 3-9, 39).

Groups (seeds/001 2.2 (i) lifted; docs/infra.md, "Groups"): one order for the whole
deployment, and each group's membership and message count in ``groups``. A member
joins the deployment with the groups its JOINED record lists, joins and leaves
others by GJOINED and GLEFT records taken in order with its messages, and leaves
every group with the deployment (LEFT, EXPELLED).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import msgpack

from m2mc.errors import DecodeError
from m2mc.infra import messages as msg
from m2mc.infra.ids import MemberId
from m2mc.infra.mcache import MembershipCache


class StateError(DecodeError):
    """A record does not follow from the state (a replica received a bad log)."""


GROUP_TABLE_LIMIT = 65536
"""Groups the tables remember, empty ones included; making one more forgets the
oldest empty group (its message count starts again at 0 if it is made again).
A constant, not a setting: every replica must forget the same one."""


@dataclass(slots=True)
class RowState:
    first: int
    last: int = 0  # 0 while the member has not left (seeds/001 3.1 (v))
    recv: int = 0  # last in-order NEW sequenced from this member
    app_seq: int = 0  # the app_seq of that NEW (an EXPELLED record tells the member)


@dataclass(slots=True)
class GroupState:
    count: int = 0  # messages so far (the gpos of the last APP record)
    members: set[MemberId] = field(default_factory=set)


def pack_groups(groups: Iterable[str | tuple[str, int]]) -> bytes:
    """A JOINED record's body: the groups joined with it, each with its message count
    at that position (a name alone: 0), so the member knows each group's ``gpos``."""
    pairs = [[g, 0] if isinstance(g, str) else [g[0], g[1]] for g in groups]
    return b"" if not pairs else msgpack.packb(pairs, use_bin_type=True)


def unpack_groups(body: bytes) -> tuple[tuple[str, int], ...]:
    """The groups (and counts) of a JOINED record's body; :class:`StateError` if it is
    not a list of distinct names with counts."""
    if not body:
        return ()
    try:
        pairs = msgpack.unpackb(body, raw=False)
    except Exception:  # msgpack raises several unrelated types
        raise StateError("a JOINED record's groups are not msgpack") from None
    if not isinstance(pairs, list) or len(pairs) > 4096 or not all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
            and 0 < len(p[0].encode()) <= msg.MAX_GROUP_NAME
            and type(p[1]) is int and p[1] >= 0 for p in pairs) \
            or len({p[0] for p in pairs}) != len(pairs):
        raise StateError("a JOINED record's groups are not a list of distinct names")
    return tuple((p[0], p[1]) for p in pairs)


class CoordState:
    """Tables after applying every record up to ``lsn``."""

    __slots__ = ("config_lsn", "groups", "gseq", "last_app_gseq", "lsn", "mcache",
                 "member_groups", "members", "retired", "rows", "sequence")

    def __init__(self, mcache_size: int = 65536, mcache_ttl: float = 60.0) -> None:
        self.lsn = 0
        self.gseq = 0  # the seed's seqnum
        self.last_app_gseq = 0  # last multicast that was not a membership change (4.3)
        self.rows: dict[MemberId, RowState] = {}
        self.members: set[MemberId] = set()
        self.mcache = MembershipCache(mcache_size, mcache_ttl)
        self.retired: frozenset[str] = frozenset()  # hosts retired for good
        self.config_lsn = 0  # the record that last changed ``retired``
        self.sequence = 0  # the id of this sequence, from its GENESIS record (0: none)
        self.groups: dict[str, GroupState] = {}  # in the order they were made
        self.member_groups: dict[MemberId, set[str]] = {}  # members with a group

    # -------------------------------------------------------------- decisions
    def next_record(self, kind: int, mid: MemberId, nseq: int = 0, app_seq: int = 0,
                    body: bytes = b"", group: str = "") -> msg.Record:
        """The record the coordinator appends next for this decision."""
        if kind in msg.NO_GSEQ_KINDS:
            return msg.Record(self.lsn + 1, 0, kind, mid, body=body)
        if kind == msg.EXPELLED:  # what was sequenced of it: its last NEW
            row = self.rows[mid]
            nseq, app_seq = row.recv, row.app_seq
        gseq = self.gseq + 1
        g = self.groups.get(group)
        gpos = 0 if g is None or kind == msg.NOOP else g.count + (kind == msg.APP)
        return msg.Record(self.lsn + 1, gseq, kind, mid, nseq, app_seq,
                          gseq - self.last_app_gseq - 1, body, group, gpos)

    def groups_of(self, mid: MemberId) -> set[str]:
        return self.member_groups.get(mid, set())

    def live_groups(self) -> int:
        """Groups with at least one member (what ``max_groups`` bounds)."""
        return sum(1 for g in self.groups.values() if g.members)

    # -------------------------------------------------------------- groups
    def _group(self, name: str) -> GroupState:
        g = self.groups.get(name)
        if g is None:
            if len(self.groups) >= GROUP_TABLE_LIMIT:
                empty = next((n for n, e in self.groups.items() if not e.members), None)
                if empty is None:
                    raise StateError(f"no room for group {name!r}")
                del self.groups[empty]
            g = self.groups[name] = GroupState()
        return g

    def _enter(self, mid: MemberId, name: str) -> None:
        self._group(name).members.add(mid)
        self.member_groups.setdefault(mid, set()).add(name)

    def _leave_all(self, mid: MemberId) -> None:
        for name in self.member_groups.pop(mid, set()):
            self.groups[name].members.discard(mid)

    def _item(self, r: msg.Record) -> RowState:
        """The member's row for an item record (APP, GJOINED, GLEFT, NOOP): its NEWs
        are taken in order."""
        row = self.rows.get(r.mid)
        if row is None or r.mid not in self.members or r.nseq != row.recv + 1:
            raise StateError(f"NEW {r.nseq} from {r.mid} does not follow")
        row.recv = r.nseq
        row.app_seq = r.app_seq
        self.last_app_gseq = r.gseq
        return row

    def apply(self, r: msg.Record, now: float) -> None:
        if r.lsn != self.lsn + 1:
            raise StateError(f"record lsn {r.lsn} does not follow {self.lsn}")
        if r.kind not in msg.NO_GSEQ_KINDS and r.gseq != self.gseq + 1:
            raise StateError(f"record gseq {r.gseq} does not follow {self.gseq}")
        kind = r.kind
        if kind == msg.APP:
            g = self.groups.get(r.group)
            if g is None or r.mid not in g.members or r.gpos != g.count + 1:
                raise StateError(f"message {r.gseq} of {r.mid} is not for a group of its own")
            self._item(r)
            g.count += 1
        elif kind in msg.GROUP_KINDS:
            g = self.groups.get(r.group)
            inside = g is not None and r.mid in g.members
            if inside != (kind == msg.GLEFT) or r.gpos != (g.count if g is not None else 0):
                raise StateError(f"{r.mid} cannot {'leave' if inside else 'join'} {r.group!r}")
            self._item(r)
            if kind == msg.GJOINED:
                self._enter(r.mid, r.group)
            else:
                self._leave(r.mid, r.group)
        elif kind == msg.NOOP:
            self._item(r)
        elif kind == msg.JOINED:
            if r.mid in self.rows:
                raise StateError(f"{r.mid} joined twice")
            groups = unpack_groups(r.body)
            for name, count in groups:
                g = self.groups.get(name)
                if count != (0 if g is None else g.count):
                    raise StateError(f"{r.mid} joined {name!r} with a wrong count")
            self.rows[r.mid] = RowState(first=r.gseq)
            self.members.add(r.mid)
            for name, _ in groups:
                self._enter(r.mid, name)
        elif kind in (msg.LEFT, msg.EXPELLED):
            row = self.rows.get(r.mid)
            if row is None or r.mid not in self.members:
                raise StateError(f"{r.mid} left without being a member")
            if kind == msg.EXPELLED and (r.nseq, r.app_seq) != (row.recv, row.app_seq):
                raise StateError(f"{r.mid} expelled with the wrong last NEW")
            row.last = r.gseq
            self.members.discard(r.mid)
            self._leave_all(r.mid)
            self.mcache.add(r.mid, now)
        elif kind == msg.CLEANUP and (r.mid in self.members
                                      or self.rows.pop(r.mid, None) is None):
            raise StateError(f"cleanup of {r.mid} that has not left")
        elif kind == msg.RETIRED:
            if r.mid.node in self.retired or r.gseq:
                raise StateError(f"host {r.mid.node} retired twice")
            self.retired = self.retired | {r.mid.node}
            self.config_lsn = r.lsn
        elif kind == msg.GENESIS:
            if r.lsn != 1 or r.gseq or len(r.body) != 8 or not any(r.body):
                raise StateError("a sequence starts once, at log position 1, with an id")
            self.sequence = int.from_bytes(r.body, "big")
        elif kind == msg.ADMITTED:
            if r.mid.node not in self.retired or r.gseq:
                raise StateError(f"host {r.mid.node} admitted but not retired")
            self.retired = self.retired - {r.mid.node}
            self.config_lsn = r.lsn
        self.lsn = r.lsn
        if kind not in msg.NO_GSEQ_KINDS:
            self.gseq = r.gseq

    def _leave(self, mid: MemberId, name: str) -> None:
        self.groups[name].members.discard(mid)
        mine = self.member_groups[mid]
        mine.discard(name)
        if not mine:
            del self.member_groups[mid]

    # -------------------------------------------------------------- snapshots
    def snapshot(self) -> msg.Snapshot:
        rows = tuple(msg.Row(mid, row.first, row.last, row.recv, mid in self.members,
                             row.app_seq)
                     for mid, row in sorted(self.rows.items()))
        groups = tuple(msg.GroupRow(name, g.count, tuple(sorted(g.members)))
                       for name, g in self.groups.items())
        return msg.Snapshot(self.lsn, self.gseq, self.last_app_gseq, rows, tuple(self.mcache),
                            tuple(sorted(self.retired)), self.config_lsn, self.sequence, groups)

    @classmethod
    def from_snapshot(cls, snap: msg.Snapshot, now: float, mcache_size: int = 65536,
                      mcache_ttl: float = 60.0) -> CoordState:
        state = cls(mcache_size, mcache_ttl)
        state.lsn = snap.lsn
        state.gseq = snap.gseq
        state.last_app_gseq = snap.last_app_gseq
        for row in snap.rows:
            state.rows[row.mid] = RowState(row.first, row.last, row.recv, row.app_seq)
            if row.member:
                state.members.add(row.mid)
        for grow in snap.groups:
            state.groups[grow.name] = GroupState(grow.count)
            for mid in grow.members:
                state._enter(mid, grow.name)
        for mid in snap.mcache:
            state.mcache.add(mid, now)
        state.retired = frozenset(snap.retired)
        state.config_lsn = snap.config_lsn
        state.sequence = snap.sequence
        return state

    def copy(self, now: float) -> CoordState:
        return CoordState.from_snapshot(self.snapshot(), now, self.mcache.size, self.mcache.ttl)
