"""The hosts' log as history (docs/infra.md, "History"), sans-IO: what a host keeps of
the committed records after they are stable, and how it reads them back for members.

A host's :class:`~m2mc.infra.replog.ReplicaLog` frees a record once it is committed
and stable (delivered by every member: seeds/001 2.2). Beyond that the host keeps
it for its **retention** (``InfraConfig.retention_age`` and ``retention_bytes`` on
disk, ``memory_history_bytes`` in memory), in a :class:`HistoryPort`:

* a durable host's store (``m2mc.infra_runtime.host_store``) keeps the rows it wrote and drops
  them only by retention, oldest first; it is the port (:meth:`HistoryPort.history_read`
  is an SQL read, done on the host's own thread as the group layer reads its log);
* a host without a data directory keeps what its log frees in a
  :class:`MemoryHistory`, bounded by bytes and age.

Either way what is held is contiguous: from the port's floor up to the log's ``low``,
then the log itself up to its commit point. :func:`read` answers a member's request
from both: every record of the groups asked for (and the deployment's membership records) in a
part of the range asked for, the part said in the answer, so
the member asks on from there; the floor tells it what retention dropped.

Bounds: an answer holds at most ``fetch_limit`` records and ``max_datagram`` bytes
(always at least one record), and looks at most :data:`SCAN_LIMIT` positions of the
log in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from m2mc.infra import messages as msg
from m2mc.infra.codec import record_size
from m2mc.infra.history_port import HistoryPort, MemoryHistory, Query
from m2mc.infra.ids import MemberId

if TYPE_CHECKING:
    from m2mc.infra.replog import ReplicaLog

SCAN_LIMIT = 8192  # log positions one answer looks at in memory
MAX_MEMBERS_LISTED = 1024  # members of a group one answer names


@dataclass(frozen=True, slots=True)
class Answer:
    lo: int  # the answer covers lo..hi: every wanted record held there is in it
    hi: int
    floor: int  # the lowest gseq held (committed + 1 when nothing is)
    records: tuple[msg.Record, ...]


def _live_floor(log: ReplicaLog) -> int:
    """The lowest gseq the log itself holds, committed (committed + 1: none)."""
    for lsn in range(log.low, log.applied + 1):
        r = log.get(lsn)
        if r is not None and r.gseq:
            return r.gseq
    return log.committed_gseq() + 1


def read(log: ReplicaLog, q: Query, max_bytes: int) -> Answer:
    """Answer ``q`` from the port below the log's ``low`` and from the log above it.

    The answer covers ``[q.lo, top]`` (``top``: ``q.hi`` or the commit point if lower;
    below the floor nothing is held) or, when the record or byte bound stopped it, up
    to where it stopped (with ``newest``: ``[where it stopped, top]``). Nothing
    committed in the range yet: it covers nothing (``hi < lo``)."""
    committed = log.committed_gseq()
    port = log.history if not log.history_gap else None
    live = _live_floor(log)
    floor = live
    if port is not None and (pf := port.history_floor()) is not None and pf < live:
        floor = pf
    top = min(q.hi, committed)
    if q.lo > top:
        return Answer(q.lo, q.lo - 1, floor, ())
    lo = max(q.lo, floor, 1)
    covered_lo, covered_hi = q.lo, top
    if lo > top:
        return Answer(covered_lo, covered_hi, floor, ())  # all of it dropped
    found: list[msg.Record] = []
    size = 0
    # The two sources in the order the answer fills: oldest first, or newest first.
    parts = [(lo, min(top, live - 1), True), (max(lo, live), top, False)]
    if q.newest:
        parts.reverse()
    for a, b, from_port in parts:
        if a > b:
            continue
        want = Query(a, b, q.groups, q.newest, q.limit - len(found))
        recs = (port.history_read(want) if from_port and port is not None
                else _scan(log, want))
        stop, recs = _fit(recs, q.newest, max_bytes - size, bool(found))
        size += sum(record_size(r) for r in recs)
        found = recs + found if q.newest else found + recs
        edge: int | None = stop
        if edge is None and len(found) >= q.limit:
            edge = recs[0].gseq if q.newest else recs[-1].gseq
        if edge is None and not from_port and b - a + 1 > SCAN_LIMIT:  # the scan stopped
            edge = b - SCAN_LIMIT + 1 if q.newest else a + SCAN_LIMIT - 1
        if edge is not None:
            if q.newest:
                covered_lo = edge
            else:
                covered_hi = edge
            break
    return Answer(covered_lo, covered_hi, floor, tuple(found))


def _fit(recs: list[msg.Record], newest: bool, room: int, have: bool
         ) -> tuple[int | None, list[msg.Record]]:
    """The records that fit in ``room`` bytes (at least one when none is held yet),
    taken from the end the answer fills first; and where the cut fell (None: none)."""
    order = reversed(recs) if newest else iter(recs)
    kept: list[msg.Record] = []
    used = 0
    for r in order:
        s = record_size(r)
        if used + s > room and (kept or have):
            return (r.gseq + 1 if newest else r.gseq - 1), (kept[::-1] if newest else kept)
        kept.append(r)
        used += s
    return None, (kept[::-1] if newest else kept)


def _scan(log: ReplicaLog, q: Query) -> list[msg.Record]:
    """The wanted records the log holds in ``[q.lo, q.hi]``, looking at most at
    :data:`SCAN_LIMIT` positions."""
    if q.newest:
        span = range(q.hi, max(q.lo, q.hi - SCAN_LIMIT + 1) - 1, -1)
    else:
        span = range(q.lo, min(q.hi, q.lo + SCAN_LIMIT - 1) + 1)
    out: list[msg.Record] = []
    for g in span:
        r = log.by_gseq(g)
        if r is not None and q.wants(r):
            out.append(r)
            if len(out) >= q.limit:
                break
    return out[::-1] if q.newest else out


def may_read(log: ReplicaLog, mid: MemberId, groups: tuple[str, ...]) -> bool:
    """A member reads the history of its own groups only (as this host's tables have
    them at its commit point)."""
    state = log.state
    return mid in state.members and bool(groups) and set(groups) <= state.groups_of(mid)


def answer(log: ReplicaLog, req: msg.HistoryReq | msg.HistoryAsk, limit: int,
           max_bytes: int) -> Answer:
    """Read the records a member's request asks for."""
    q = Query(req.lo, req.hi, frozenset(req.groups), req.newest, limit)
    return read(log, q, max_bytes)


def lacks(a: Answer, req: msg.HistoryReq) -> bool:
    """Whether this host's log stops short of what ``req`` asks for (its floor is above
    the range asked, and the answer reached that floor): the master's may reach further."""
    return a.floor > max(req.lo, 1) and a.lo <= a.floor


def members_of(log: ReplicaLog, group: str) -> tuple[str, ...]:
    """The computers in ``group`` at the commit point (at most
    :data:`MAX_MEMBERS_LISTED`)."""
    g = log.state.groups.get(group)
    if g is None:
        return ()
    return tuple(sorted({m.node for m in g.members}))[:MAX_MEMBERS_LISTED]


__all__ = ["Answer", "HistoryPort", "MemoryHistory", "Query", "answer", "lacks", "may_read",
           "members_of", "read"]
