"""What an infrastructure host keeps across a restart (docs/infra.md, "Durable hosts"),
sans-IO: the port its driver commits to, and what is committed.

We follow Raft's rule for persistent state (§5 of the Raft paper: the current term,
the vote and the log entries reach stable storage before the server answers an
RPC), translated to our log (docs/decisions.md, "Hosts keep their promise and their
log"): before any frame leaves a host, its store holds

* ``promised``: the newest epoch whose takeover it answered (it refuses everything
  older: Raft's current term and vote in one value, since our votes only decide who
  asks, and the promise is what a quorum relies on);
* ``log_epoch``: the epoch whose master last synced its log (what a takeover
  compares first);
* its log: every record from the lowest it still serves to ``high``, with a
  checkpoint of the committed tables below them, so the tables at ``applied``
  are the checkpoint plus the records after it;
* ``applied``: its commit point (records up to it were committed, and may have been
  relayed to its cell).

The core never writes: :class:`LogJournal` collects what changed in the log since
the last save, and :class:`~m2mc.infra.host_durable.HostSaver` turns it into one
:class:`HostCommit` per output step, which the driver commits before it sends what
the core produced (runtime/driver.py; m2mc.core.carry_out). :class:`MemoryHostStore`
is the store of tests; ``m2mc.infra_runtime.host_store`` the SQLite one.

A store keeps the records the log no longer needs (below ``live_low``) as the host's
history (docs/infra.md, "History"), dropping them by its retention only (oldest
first: none older than ``retention_age`` seconds, at most ``retention_bytes`` in all;
0 is no bound), and serves reads of them: it is the log's
:class:`~m2mc.infra.history_port.HistoryPort`. :meth:`HostStore.load` gives back only the
live part.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from m2mc.errors import SavedStateError
from m2mc.infra import messages as msg
from m2mc.infra.codec import record_size
from m2mc.infra.ids import NO_EPOCH, Epoch

if TYPE_CHECKING:
    from m2mc.infra.history_port import HistoryPort, Query


@dataclass(frozen=True, slots=True)
class HostCommit:
    """One atomic save of a host: applied in this order by every store."""

    promised: Epoch
    log_epoch: Epoch
    applied: int
    reset: bool = False  # forget every record and the checkpoint first (a new log)
    checkpoint: msg.Snapshot | None = None  # new committed tables at checkpoint.lsn
    truncate_after: int | None = None  # drop records above this lsn (a replaced suffix)
    records: tuple[msg.Record, ...] = ()  # records to hold (added or replaced)
    drop_below: int = 0  # records below this lsn are no longer live: history from now on
    now: float = 0.0  # the core's time (dates the records of a store without a clock)


@dataclass(frozen=True, slots=True)
class StoredHost:
    """What a :class:`HostStore` holds, as the last commit left it."""

    promised: Epoch = NO_EPOCH
    log_epoch: Epoch = NO_EPOCH
    applied: int = 0
    checkpoint: msg.Snapshot | None = None
    records: tuple[msg.Record, ...] = ()  # in lsn order (the live part)
    history: HistoryPort | None = None  # where the rest is read (None: nowhere)

    @property
    def empty(self) -> bool:
        """Nothing was ever promised or held: a host that never served."""
        return (self.promised == NO_EPOCH and self.log_epoch == NO_EPOCH
                and self.checkpoint is None and not self.records)


class HostStore(Protocol):
    """Where a host's durable state lives (a file in the runtime, memory in tests)."""

    def load(self) -> StoredHost:
        """What the last commit left (an empty :class:`StoredHost` when none)."""
        ...

    def commit(self, c: HostCommit) -> None:
        """Apply ``c`` atomically and durably."""
        ...

    def close(self) -> None: ...


@dataclass
class MemoryHostStore:
    """A :class:`HostStore` in memory: it outlives the core it serves, as a file
    outlives its process (the tests' restarts and power cuts). Records are dated
    with the commits' ``now``."""

    promised: Epoch = NO_EPOCH
    log_epoch: Epoch = NO_EPOCH
    applied: int = 0
    checkpoint: msg.Snapshot | None = None
    records: dict[int, msg.Record] = field(default_factory=dict)
    commits: int = 0
    live_low: int = 0  # records below are history
    retention_age: float = 0.0
    retention_bytes: int = 0
    dated: dict[int, float] = field(default_factory=dict)  # lsn -> when it was written
    size: int = 0
    evicted: int = 0  # history records retention dropped

    def load(self) -> StoredHost:
        return StoredHost(self.promised, self.log_epoch, self.applied, self.checkpoint,
                          tuple(self.records[k] for k in sorted(self.records)
                                if k >= self.live_low), self)

    def _drop(self, lsn: int) -> None:
        r = self.records.pop(lsn)
        self.dated.pop(lsn, None)
        self.size -= record_size(r)

    def commit(self, c: HostCommit) -> None:
        self.commits += 1
        recs = self.records
        if c.reset:
            for lsn in list(recs):
                self._drop(lsn)
            self.checkpoint = None
            self.live_low = 0
        if c.checkpoint is not None:
            self.checkpoint = c.checkpoint
        if c.truncate_after is not None:
            for lsn in [k for k in recs if k > c.truncate_after]:
                self._drop(lsn)
        for r in c.records:
            if r.lsn in recs:
                self._drop(r.lsn)
            recs[r.lsn] = r
            self.dated[r.lsn] = c.now
            self.size += record_size(r)
        if c.drop_below:
            self.live_low = max(self.live_low, c.drop_below)
        self._retain(c.now)
        self.promised, self.log_epoch, self.applied = c.promised, c.log_epoch, c.applied

    def _retain(self, now: float) -> None:
        """Drop history (never the live part) by age and bytes, the oldest first."""
        for lsn in sorted(k for k in self.records if k < self.live_low):
            old = self.retention_age > 0 and now - self.dated[lsn] > self.retention_age
            big = self.retention_bytes > 0 and self.size > self.retention_bytes
            if not (old or big):
                break
            self._drop(lsn)
            self.evicted += 1

    # ------------------------------------------------------------ HistoryPort
    def history_floor(self) -> int | None:
        return next((self.records[k].gseq for k in sorted(self.records)
                     if self.records[k].gseq), None)

    def history_read(self, q: Query) -> list[msg.Record]:
        got = [r for r in self.records.values() if q.lo <= r.gseq <= q.hi and q.wants(r)]
        got.sort(key=lambda r: r.gseq)
        return got[max(0, len(got) - q.limit):] if q.newest else got[:q.limit]

    def history_add(self, records: Iterable[msg.Record], now: float) -> None:
        return None  # it holds them already

    def history_records(self, first: int, last: int) -> list[msg.Record]:
        recs = self.records
        return [recs[k] for k in range(first, last + 1) if k in recs]

    def history_clear(self) -> None:
        return None  # the reset commit clears it

    def close(self) -> None:
        return None


class LogJournal:
    """The changes of a :class:`~m2mc.infra.replog.ReplicaLog` since the last save.

    ``added`` holds the records added (appended, backfilled, or written after a
    truncation) that are still in the log; ``truncate_after`` the lowest point the
    log was cut back to; ``reset`` that the log was replaced as a whole (by a
    snapshot, ``checkpoint``, or emptied). Replaying them in the order of
    :class:`HostCommit` gives the log as it is now."""

    __slots__ = ("added", "checkpoint", "reset", "truncate_after")

    def __init__(self) -> None:
        self.added: dict[int, msg.Record] = {}
        self.truncate_after: int | None = None
        self.reset = False
        self.checkpoint: msg.Snapshot | None = None

    def clear(self) -> None:
        self.added = {}
        self.truncate_after = None
        self.reset = False
        self.checkpoint = None

    def truncate(self, keep: int) -> None:
        if self.truncate_after is None or keep < self.truncate_after:
            self.truncate_after = keep
        for lsn in [k for k in self.added if k > keep]:
            del self.added[lsn]

    def reset_to(self, snapshot: msg.Snapshot | None) -> None:
        self.added = {}
        self.truncate_after = None
        self.reset = True
        self.checkpoint = snapshot

    @property
    def changed(self) -> bool:
        return self.reset or bool(self.added) or self.truncate_after is not None


def check_stored(stored: StoredHost) -> None:
    """Refuse a stored log that cannot be this host's (a damaged or foreign file):
    records must be contiguous and reach ``applied``, the checkpoint must be below
    them. :class:`SavedStateError` names the fault; the operator decides (a host that
    started afresh would forget what it promised)."""
    recs = stored.records
    base = stored.checkpoint.lsn if stored.checkpoint is not None else 0
    for a, b in itertools.pairwise(recs):
        if b.lsn != a.lsn + 1:
            raise SavedStateError(f"the saved log has a hole between {a.lsn} and {b.lsn}")
    high = recs[-1].lsn if recs else base
    if recs and recs[0].lsn > base + 1:
        raise SavedStateError(f"the saved log starts at {recs[0].lsn}, after its checkpoint "
                              f"at {base}")
    if not base <= stored.applied <= high:
        raise SavedStateError(f"the saved commit point {stored.applied} is outside the saved "
                              f"log ({base}..{high})")
    if stored.log_epoch > stored.promised:
        raise SavedStateError("the saved log's epoch is newer than the saved promise")
