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
"""

from __future__ import annotations

from dataclasses import dataclass

from m2mc.errors import DecodeError
from m2mc.infra import messages as msg
from m2mc.infra.ids import MemberId
from m2mc.infra.mcache import MembershipCache


@dataclass(slots=True)
class RowState:
    first: int
    last: int = 0  # 0 while the member has not left (seeds/001 3.1 (v))
    recv: int = 0  # last in-order NEW sequenced from this member


class StateError(DecodeError):
    """A record does not follow from the state (a replica received a bad log)."""


class CoordState:
    """Tables after applying every record up to ``lsn``."""

    __slots__ = ("config_lsn", "gseq", "last_app_gseq", "lsn", "mcache", "members", "retired",
                 "rows", "sequence")

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

    # -------------------------------------------------------------- decisions
    def next_record(self, kind: int, mid: MemberId, nseq: int = 0, app_seq: int = 0,
                    body: bytes = b"") -> msg.Record:
        """The record the coordinator appends next for this decision."""
        if kind in msg.NO_GSEQ_KINDS:
            return msg.Record(self.lsn + 1, 0, kind, mid, body=body)
        gseq = self.gseq + 1
        return msg.Record(self.lsn + 1, gseq, kind, mid, nseq, app_seq,
                          gseq - self.last_app_gseq - 1, body)

    def apply(self, r: msg.Record, now: float) -> None:
        if r.lsn != self.lsn + 1:
            raise StateError(f"record lsn {r.lsn} does not follow {self.lsn}")
        if r.kind not in msg.NO_GSEQ_KINDS and r.gseq != self.gseq + 1:
            raise StateError(f"record gseq {r.gseq} does not follow {self.gseq}")
        kind = r.kind
        if kind == msg.APP:
            row = self.rows.get(r.mid)
            if row is None or r.mid not in self.members or r.nseq != row.recv + 1:
                raise StateError(f"NEW {r.nseq} from {r.mid} does not follow")
            row.recv = r.nseq
            self.last_app_gseq = r.gseq
        elif kind == msg.JOINED:
            if r.mid in self.rows:
                raise StateError(f"{r.mid} joined twice")
            self.rows[r.mid] = RowState(first=r.gseq)
            self.members.add(r.mid)
        elif kind in (msg.LEFT, msg.EXPELLED):
            row = self.rows.get(r.mid)
            if row is None or r.mid not in self.members:
                raise StateError(f"{r.mid} left without being a member")
            row.last = r.gseq
            self.members.discard(r.mid)
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

    # -------------------------------------------------------------- snapshots
    def snapshot(self) -> msg.Snapshot:
        rows = tuple(msg.Row(mid, row.first, row.last, row.recv, mid in self.members)
                     for mid, row in sorted(self.rows.items()))
        return msg.Snapshot(self.lsn, self.gseq, self.last_app_gseq, rows, tuple(self.mcache),
                            tuple(sorted(self.retired)), self.config_lsn, self.sequence)

    @classmethod
    def from_snapshot(cls, snap: msg.Snapshot, now: float, mcache_size: int = 65536,
                      mcache_ttl: float = 60.0) -> CoordState:
        state = cls(mcache_size, mcache_ttl)
        state.lsn = snap.lsn
        state.gseq = snap.gseq
        state.last_app_gseq = snap.last_app_gseq
        for row in snap.rows:
            state.rows[row.mid] = RowState(row.first, row.last, row.recv)
            if row.member:
                state.members.add(row.mid)
        for mid in snap.mcache:
            state.mcache.add(mid, now)
        state.retired = frozenset(snap.retired)
        state.config_lsn = snap.config_lsn
        state.sequence = snap.sequence
        return state

    def copy(self, now: float) -> CoordState:
        return CoordState.from_snapshot(self.snapshot(), now, self.mcache.size, self.mcache.ttl)
