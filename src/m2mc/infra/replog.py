"""Each host's copy of the coordinator's log (docs/infra.md, "Failover").

The log holds the records from ``low`` to ``high`` (contiguous). Records up to
``applied`` are committed and applied to :attr:`ReplicaLog.state`; the ones
after may still be replaced by a new coordinator (:meth:`ReplicaLog.replace_after`).
Committed records are never replaced and are the only ones a gateway relays to
its cell, so a member never delivers a multicast that a later coordinator could
number differently.

The log doubles as the gateway's norm-cache (seeds/001 3.2): TRANSFER copies are
taken from it by sequence number. Records are freed once committed and stable
(delivered by every member, seeds/001 2.2); what is freed stays in the host's
history (:attr:`ReplicaLog.history`, :mod:`m2mc.infra.history`) for its retention.

A durable host gives its log a :class:`~m2mc.infra.host_persist.LogJournal`: every
change is noted there too, and its driver saves them before anything leaves
(docs/infra.md, "Durable hosts"); :meth:`ReplicaLog.restore` takes the saved log up
again.
"""

from __future__ import annotations

from m2mc.errors import SavedStateError
from m2mc.infra import messages as msg
from m2mc.infra.history_port import HistoryPort, MemoryHistory
from m2mc.infra.host_persist import LogJournal, StoredHost, check_stored
from m2mc.infra.ids import NO_EPOCH, Epoch
from m2mc.infra.state import CoordState, StateError


class ReplicaLog:
    __slots__ = ("_by_gseq", "_records", "applied", "high", "history", "history_gap", "journal",
                 "log_epoch", "low", "mcache_size", "mcache_ttl", "promised", "refused", "state")

    def __init__(self, mcache_size: int = 65536, mcache_ttl: float = 60.0) -> None:
        self.mcache_size = mcache_size
        self.mcache_ttl = mcache_ttl
        self.state = CoordState(mcache_size, mcache_ttl)  # committed tables at `applied`
        self._records: dict[int, msg.Record] = {}
        self._by_gseq: dict[int, int] = {}  # gseq -> lsn
        self.low = 1  # lowest lsn held (when empty: high + 1)
        self.high = 0
        self.applied = 0
        self.log_epoch: Epoch = NO_EPOCH  # epoch whose coordinator last synced this log
        self.promised: Epoch = NO_EPOCH  # highest epoch this host answered a takeover of
        self.refused = 0  # records that could not apply (never from an honest master)
        self.journal: LogJournal | None = None  # a durable host's changes to save
        self.history: HistoryPort = MemoryHistory()  # committed records freed from the log
        # A durable host's store still holds the records of a log that a snapshot
        # replaced, until its next save: do not read its history until then.
        self.history_gap = False

    # ------------------------------------------------------------- reading
    def __len__(self) -> int:
        return len(self._records)

    def get(self, lsn: int) -> msg.Record | None:
        return self._records.get(lsn)

    def by_gseq(self, gseq: int) -> msg.Record | None:
        lsn = self._by_gseq.get(gseq)
        return None if lsn is None else self._records[lsn]

    def committed_gseq(self) -> int:
        return self.state.gseq

    def has_from(self, lsn: int) -> bool:
        """Whether every record from ``lsn`` to ``high`` is held."""
        return lsn >= self.low or lsn > self.high

    def range(self, first: int, last: int) -> tuple[msg.Record, ...]:
        """Records ``first..last`` (all must be held)."""
        recs = self._records
        return tuple(recs[i] for i in range(first, last + 1))

    def range_with_history(self, first: int, last: int) -> tuple[msg.Record, ...] | None:
        """Records ``first..last``, those below ``low`` from the history port (a durable
        host's store keeps every record it freed, by position, for its retention);
        None unless every one is held (some dropped, or a port without positions)."""
        if first >= self.low:
            return self.range(first, last) if last <= self.high else None
        if self.history_gap:
            return None
        below = min(last, self.low - 1)
        old = self.history.history_records(first, below)
        if len(old) != below - first + 1 or any(r.lsn != first + i for i, r in enumerate(old)):
            return None
        return (*old, *self.range(self.low, last)) if last >= self.low else tuple(old)

    # ------------------------------------------------------------- writing
    def append(self, records: tuple[msg.Record, ...] | list[msg.Record]) -> bool:
        """Add records that follow on; skip ones already held. False on a gap."""
        journal = self.journal
        for r in records:
            if r.lsn <= self.high:
                continue
            if r.lsn != self.high + 1:
                return False
            self._records[r.lsn] = r
            if r.gseq:
                self._by_gseq[r.gseq] = r.lsn
            self.high = r.lsn
            if journal is not None:
                journal.added[r.lsn] = r
        return True

    def replace_after(self, base: int, snapshot: msg.Snapshot | None,
                      records: tuple[msg.Record, ...], now: float) -> bool:
        """Make the log: committed prefix, then ``records`` after ``base`` (a Sync).

        A snapshot newer than what was applied replaces the tables and the log; the
        records given at or below it are committed copies the master still keeps (not
        stable yet), held below the snapshot as far as they reach it.
        Records at or below ``applied`` are committed and kept as they are.
        False if the records do not follow on from what is held.
        """
        if snapshot is not None and snapshot.lsn > self.applied:
            self.state = CoordState.from_snapshot(snapshot, now, self.mcache_size, self.mcache_ttl)
            self._records.clear()
            self._by_gseq.clear()
            self.applied = self.high = snapshot.lsn
            self.low = snapshot.lsn + 1
            base = snapshot.lsn
            self._history_restarts()
            if self.journal is not None:
                self.journal.reset_to(snapshot)
            self.backfill(tuple(r for r in records if r.lsn <= snapshot.lsn))
        keep = max(base, self.applied)
        if keep > self.high:
            return False  # a hole between what we hold and what we are given
        if keep < self.high and self.journal is not None:
            self.journal.truncate(keep)
        for lsn in range(keep + 1, self.high + 1):
            r = self._records.pop(lsn)
            if r.gseq:
                self._by_gseq.pop(r.gseq, None)
        self.high = keep
        if self.low > self.high + 1:
            self.low = self.high + 1
        return self.append(tuple(r for r in records if r.lsn > keep))

    def backfill(self, records: tuple[msg.Record, ...]) -> int:
        """Take back committed records that end just below ``low`` (copies another host
        kept after this one freed them); return how many. Only a contiguous run ending
        at ``low - 1`` and at or below ``applied`` is taken, so the log stays contiguous
        and holds committed copies only."""
        added = 0
        for r in sorted((r for r in records if r.lsn < self.low), key=lambda r: -r.lsn):
            if r.lsn != self.low - 1 or r.lsn > self.applied:
                break
            self._records[r.lsn] = r
            if r.gseq:
                self._by_gseq[r.gseq] = r.lsn
            self.low -= 1
            added += 1
            if self.journal is not None:
                self.journal.added[r.lsn] = r
        return added

    def commit_to(self, commit: int, now: float) -> list[msg.Record]:
        """Apply the records up to ``commit`` that are held; return them in order.

        A record that does not apply to the tables (a forged or corrupt log: an honest
        master never sends one) is dropped with everything after it, uncommitted here,
        and counted in ``refused``; the master's next Sync brings the real ones."""
        target = min(commit, self.high)
        out: list[msg.Record] = []
        state = self.state
        while self.applied < target:
            r = self._records[self.applied + 1]
            try:
                state.apply(r, now)
            except StateError:
                self.refused += 1
                self.replace_after(self.applied, None, (), now)
                break
            self.applied += 1
            out.append(r)
        return out

    def gc(self, stable_gseq: int, now: float = 0.0) -> int:
        """Free committed records whose multicast is stable (into the history); return
        how many."""
        freed: list[msg.Record] = []
        recs = self._records
        while self.low <= self.applied:
            r = recs[self.low]
            if r.gseq > stable_gseq:
                break
            del recs[self.low]
            if r.gseq:
                self._by_gseq.pop(r.gseq, None)
            self.low += 1
            freed.append(r)
        if freed:
            self.history.history_add(freed, now)
        return len(freed)

    def _history_restarts(self) -> None:
        self.history.history_clear()
        self.history_gap = self.journal is not None

    def reset(self) -> None:
        """Forget everything but the promise (a gateway that frees its tables, 4.1)."""
        journal, promised, history = self.journal, self.promised, self.history
        self.__init__(self.mcache_size, self.mcache_ttl)  # type: ignore[misc]
        self.promised = promised
        self.journal = journal
        self.history = history
        self._history_restarts()
        if journal is not None:
            journal.reset_to(None)

    def restore(self, stored: StoredHost, now: float) -> None:
        """Take up a saved log (a durable host's restart): the tables at ``applied`` are
        the checkpoint plus the records after it. :class:`SavedStateError` if the saved
        log does not hold together."""
        check_stored(stored)
        ck = stored.checkpoint
        state = (CoordState(self.mcache_size, self.mcache_ttl) if ck is None else
                 CoordState.from_snapshot(ck, now, self.mcache_size, self.mcache_ttl))
        records = {r.lsn: r for r in stored.records}
        try:
            for lsn in range(state.lsn + 1, stored.applied + 1):
                state.apply(records[lsn], now)
        except (StateError, KeyError) as exc:
            raise SavedStateError(f"the saved log does not apply: {exc}") from None
        self.state = state
        self._records = records
        self._by_gseq = {r.gseq: r.lsn for r in stored.records if r.gseq}
        self.high = stored.records[-1].lsn if stored.records else state.lsn
        self.low = stored.records[0].lsn if stored.records else self.high + 1
        self.applied = stored.applied
        self.promised = stored.promised
        self.log_epoch = stored.log_epoch
        if stored.history is not None:
            self.history = stored.history  # the store keeps what the log frees


__all__ = ["ReplicaLog", "StateError"]
