"""Where a host keeps the committed records its log freed (docs/infra.md, "History"):
the :class:`HistoryPort` a store on disk or :class:`MemoryHistory` implements, and
the :class:`Query` it answers. Split from :mod:`m2mc.infra.history` (which reads a
:class:`~m2mc.infra.replog.ReplicaLog` and this port together, and re-exports these
names) so that the log and the host's store, which hold a port, do not import the
reader of the log: sans-IO.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from m2mc.infra import messages as msg
from m2mc.infra.codec import record_size


@dataclass(frozen=True, slots=True)
class Query:
    """Records with ``lo <= gseq <= hi`` of ``groups`` (messages, joins and leaves) and
    the deployment's membership records (JOINED, LEFT, EXPELLED: they say who joins
    and leaves the groups with the deployment): at most ``limit`` of them, the oldest
    first, or with ``newest`` the newest ones (returned oldest first)."""

    lo: int
    hi: int
    groups: frozenset[str]
    newest: bool = False
    limit: int = 512

    def wants(self, r: msg.Record) -> bool:
        if r.kind in msg.MEMBERSHIP_KINDS:
            return True
        return r.group in self.groups and r.kind != msg.NOOP


class HistoryPort(Protocol):
    """Committed records a host keeps below its log's ``low`` (a store on disk, or
    :class:`MemoryHistory`)."""

    def history_floor(self) -> int | None:
        """The lowest ``gseq`` held (None: nothing)."""
        ...

    def history_read(self, q: Query) -> list[msg.Record]:
        """What ``q`` asks for, in ``gseq`` order."""
        ...

    def history_add(self, records: Iterable[msg.Record], now: float) -> None:
        """Records the log freed (a store that holds them already ignores this)."""
        ...

    def history_records(self, first: int, last: int) -> list[msg.Record]:
        """The records of log positions ``first..last`` held, in ``lsn`` order: a master
        sends a host that lacks them these rather than a snapshot (docs/infra.md,
        "Failover"). A port that keeps only multicasts returns none."""
        ...

    def history_clear(self) -> None:
        """The log starts over (a snapshot replaced it): what was held no longer
        joins on to it."""
        ...


class MemoryHistory:
    """:class:`HistoryPort` in memory: the freed records, at most ``max_bytes`` of them
    (the oldest go first) and none older than ``max_age`` seconds (0: no age bound)."""

    def __init__(self, max_bytes: int = 32 << 20, max_age: float = 0.0) -> None:
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._records: deque[tuple[float, msg.Record]] = deque()  # (stored at, record)
        self._by_gseq: dict[int, msg.Record] = {}
        self.size = 0
        self.dropped = 0  # records retention dropped

    def history_floor(self) -> int | None:
        return self._records[0][1].gseq if self._records else None

    def history_add(self, records: Iterable[msg.Record], now: float) -> None:
        for r in records:
            if not r.gseq or r.gseq in self._by_gseq:
                continue
            if self._records and r.gseq < self._records[-1][1].gseq:
                continue  # only ever extends upwards (the log frees in order)
            self._records.append((now, r))
            self._by_gseq[r.gseq] = r
            self.size += record_size(r)
        self._expire(now)

    def _expire(self, now: float) -> None:
        recs = self._records
        while recs and (self.size > self.max_bytes
                        or (self.max_age > 0 and now - recs[0][0] > self.max_age)):
            _, r = recs.popleft()
            del self._by_gseq[r.gseq]
            self.size -= record_size(r)
            self.dropped += 1

    def history_read(self, q: Query) -> list[msg.Record]:
        if not self._records:
            return []
        top = self._records[-1][1].gseq
        lo, hi = max(q.lo, self._records[0][1].gseq), min(q.hi, top)
        span = range(hi, lo - 1, -1) if q.newest else range(lo, hi + 1)
        out: list[msg.Record] = []
        for g in span:
            r = self._by_gseq.get(g)
            if r is not None and q.wants(r):
                out.append(r)
                if len(out) >= q.limit:
                    break
        return out[::-1] if q.newest else out

    def history_records(self, first: int, last: int) -> list[msg.Record]:
        return []  # multicasts only, by gseq: no run of log positions

    def history_clear(self) -> None:
        self._records.clear()
        self._by_gseq.clear()
        self.size = 0


__all__ = ["HistoryPort", "MemoryHistory", "Query"]
