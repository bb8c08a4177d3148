"""The durable :class:`~m2mc.infra.host_persist.HostStore` of an infrastructure host:
one SQLite file (``<data_dir>/infra-host.sqlite3``), WAL mode (docs/infra.md,
"Durable hosts").

``meta`` holds the host's id, its promise, its log's epoch, its commit point, the
checkpoint of the committed tables and ``live_low``; ``records`` holds the log, one
row per record, as the msgpack of its wire fields (m2mc.infra.codec's stored forms,
read back through the network's checks), with its position, group, kind, size and
the time it was written. Each :meth:`SqliteHostStore.commit` is one transaction.

Rows below ``live_low`` are no longer part of the live log (a restart does not load
them): they are the host's history (docs/infra.md, "History"), read by members
through :meth:`SqliteHostStore.history_read` (the log's
:class:`~m2mc.infra.history.HistoryPort`) and dropped by retention only, oldest
first, inside the commit: older than ``retention_age`` seconds, or beyond
``retention_bytes`` of rows in all (down to 7/8 of it); 0 is no bound. Rows are
dated with ``clock`` (the driver passes ``time.time``, so ages survive a restart),
else with the commit's ``now`` (the simulator's virtual time).

``sync="full"`` (the default) makes SQLite wait for the disk at each commit
(``synchronous=FULL``): a power cut or an operating system crash loses nothing a
host answered. ``sync="normal"`` keeps every commit across a crash of the process
(``kill -9``) only, and costs less (docs/decisions.md, "Hosts keep their promise
and their log", has the figures).

``checkpoint_thread`` (a real host; the simulator's hosts run without it, as its runs
must not depend on a thread): the log is copied into the database by a thread of its
own (m2mc.store.checkpointer), so a commit on the host's event loop writes and syncs
its own rows only, and the log starts over every 4 MiB or so (never past twice that
and one commit: m2mc.store.checkpointer says how). Without it the commit that
crosses SQLite's bound (4 MiB of log) also copies and syncs the whole log: at
64,000-byte records, a stall of tens of milliseconds every eight commits or so, during
which the host reads nothing (docs/decisions.md, "A host's log is checkpointed by a
thread").

**Large records beside the log.** A record whose stored form is :data:`LARGE_RECORD`
bytes or more (a message of 2 KiB or so) is appended once to a segment file of
:class:`~m2mc.store.payload_files.PayloadFiles` in ``<file>-payloads``, and its row
keeps an empty ``data`` and, in ``ref``, where it is (``[segment, offset, length,
crc32]``), rather than SQLite writing it twice (log, then database) over a chain of
pages. With ``sync="full"`` the segments are synced before each commit that refers
to them, so a row on the disk always has its bytes there; with ``"normal"`` the
checkpoint thread syncs them before each checkpoint (an operating-system crash
may then leave a row without its bytes, which the next start refuses as a damaged
log); with ``"off"`` (the simulator) they are never synced. A segment goes once no
row refers to it (retention, a reset, a truncation) and, with the thread, once a
checkpoint made that commit durable (docs/decisions.md, "A host's large records
are written once, beside its log").
"""

from __future__ import annotations

import contextlib
import heapq
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

from m2mc.errors import DecodeError, SavedStateError
from m2mc.infra import codec
from m2mc.infra import messages as msg
from m2mc.infra.history import Query
from m2mc.infra.host_persist import HostCommit, StoredHost
from m2mc.infra.ids import NO_EPOCH, Epoch
from m2mc.store.checkpointer import Checkpointer, bound_log
from m2mc.store.payload_files import LARGE_PAYLOAD
from m2mc.store.row_segments import RowSegments

FILE_NAME = "infra-host.sqlite3"
SYNC_MODES = ("full", "normal", "off")  # "off": the simulator (its crashes keep the file)
HOST, PROMISED, LOG_EPOCH, APPLIED, CHECKPOINT, LIVE_LOW = (
    "host", "promised", "log_epoch", "applied", "checkpoint", "live_low")
AGE_CHECK = 1.0  # seconds between two passes of the age bound
EVICT_STEP = 256  # rows read per step of a bytes pass
LARGE_RECORD = LARGE_PAYLOAD  # bytes of a stored record that go to a segment

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS records (
    lsn INTEGER PRIMARY KEY, data BLOB NOT NULL, gseq INTEGER NOT NULL DEFAULT 0,
    grp TEXT NOT NULL DEFAULT '', kind INTEGER NOT NULL DEFAULT 0,
    size INTEGER NOT NULL DEFAULT 0, t REAL, ref TEXT);
"""
_INDEXES = """
CREATE INDEX IF NOT EXISTS records_by_group ON records (grp, gseq);
CREATE INDEX IF NOT EXISTS records_by_gseq ON records (gseq);
"""
_GROUPED = frozenset({msg.APP, msg.GJOINED, msg.GLEFT})  # rows filed under their group
_MEMBERSHIP = tuple(sorted(msg.MEMBERSHIP_KINDS))


_Row = tuple[int, bytes, int, str, int, int, float, str | None]


def _row(r: msg.Record, t: float) -> _Row:
    data = codec.pack_record(r)
    return (r.lsn, data, r.gseq, r.group if r.kind in _GROUPED else "", r.kind, len(data), t,
            None)


class SqliteHostStore:
    """Host ``host``'s saved state in ``path`` (created if absent). A file that holds
    another host's state, or that SQLite cannot read, raises
    :class:`~m2mc.errors.SavedStateError`."""

    def __init__(self, path: str | Path, host: str, *, sync: str = "full",
                 retention_age: float = 0.0, retention_bytes: int = 0,
                 clock: Callable[[], float] | None = None,
                 checkpoint_thread: bool = False) -> None:
        if sync not in SYNC_MODES:
            raise ValueError(f"sync must be one of {', '.join(SYNC_MODES)}")
        self.path = Path(path)
        self.host = host
        self.retention_age = retention_age
        self.retention_bytes = retention_bytes
        self._clock = clock
        self._next_age_check = 0.0
        self.evicted = 0  # history rows retention dropped
        self._checkpointer: Checkpointer | None = None
        self._sync = sync
        # The records beside the log (module text): "full" syncs them before each commit
        # and the thread before each checkpoint, so closed segments wait for those
        # syncs; "normal" without the thread syncs a segment as it is closed.
        self._segments = RowSegments(self.path.with_name(self.path.name + "-payloads"),
                                     defer_sync=sync == "full" or checkpoint_thread,
                                     never_sync=sync == "off")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path))
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={sync.upper()}")
            if checkpoint_thread:
                bound_log(self._db, True)
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(records)")}
            if "gseq" not in columns:
                raise sqlite3.DatabaseError("a log of an earlier format (records without "
                                            "their groups)")
            if "ref" not in columns:  # a log of an earlier version: every record in its row
                self._db.execute("ALTER TABLE records ADD COLUMN ref TEXT")
            self._db.executescript(_INDEXES)
            self._db.commit()
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (HOST,)).fetchone()
            live = self._db.execute("SELECT value FROM meta WHERE key = ?",
                                    (LIVE_LOW,)).fetchone()
            self._live_low = int(live[0]) if live is not None else 0
            self._bytes = int(self._db.execute(
                "SELECT COALESCE(SUM(size), 0) FROM records").fetchone()[0])
            for lsn, ref in self._db.execute(
                    "SELECT lsn, ref FROM records WHERE ref IS NOT NULL"):
                self._segments.track(lsn, ref)
        except (sqlite3.Error, OSError, ValueError, TypeError) as exc:
            raise SavedStateError(f"cannot open the saved host state {self.path}: {exc}; "
                                  "move the file away to start this host afresh") from None
        if row is None:
            with self._db:
                self._db.execute("INSERT INTO meta VALUES (?, ?)", (HOST, host))
        elif row[0] != host:
            self._db.close()
            raise SavedStateError(f"{self.path} holds the state of host {row[0]!r}, not "
                                  f"{host!r}: give each host its own --data-dir")
        if checkpoint_thread:
            self._checkpointer = Checkpointer(self.path, writer=self._db,
                                              before=self._sync_segments,
                                              after=self._segments.remove_scheduled)

    # ------------------------------------------------------------ records beside the log
    def _sync_segments(self) -> None:
        """Before each checkpoint (on its thread): segments durable no later than the
        rows it copies into the database (what ``sync="full"`` did at each commit)."""
        if self._sync != "off":
            self._segments.sync()

    def _beside(self, rows: list[_Row]) -> list[_Row]:
        """``rows`` with each large record written to a segment (before the commit)."""
        out = []
        for row in rows:
            data = row[1]
            if len(data) >= LARGE_RECORD:
                row = (row[0], b"", *row[2:7], self._segments.write(data))
            out.append(row)
        return out

    def _data(self, data: bytes, ref: str | None) -> bytes:
        """A row's stored record: its own ``data``, or read back from its segment
        (DecodeError if it cannot be: bytes lost or damaged)."""
        if ref is None:
            return data
        found = self._segments.read(ref)
        if found is None:
            raise DecodeError(f"a record beside the log cannot be read back ({ref:.60})")
        return found

    def _fail(self, what: str, exc: Exception) -> SavedStateError:
        return SavedStateError(f"cannot {what} the saved host state {self.path}: {exc}")

    def load(self) -> StoredHost:
        try:
            meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
            rows = self._db.execute("SELECT lsn, data, ref FROM records WHERE lsn >= ? "
                                    "ORDER BY lsn", (self._live_low,)).fetchall()
        except sqlite3.Error as exc:
            raise self._fail("read", exc) from None
        try:
            promised = _epoch(meta.get(PROMISED))
            log_epoch = _epoch(meta.get(LOG_EPOCH))
            ck = meta.get(CHECKPOINT)
            checkpoint = codec.unpack_snapshot(ck) if isinstance(ck, bytes) else None
            records = tuple(codec.unpack_record(self._data(data, ref)) for _, data, ref in rows)
        except DecodeError as exc:
            raise self._fail("decode", exc) from None
        applied = meta.get(APPLIED, 0)
        if type(applied) is not int or applied < 0:
            raise self._fail("read", ValueError(f"bad commit point {applied!r:.40}"))
        for (lsn, _, _), r in zip(rows, records, strict=True):
            if lsn != r.lsn:
                raise self._fail("read", ValueError(f"record {r.lsn} filed under {lsn}"))
        return StoredHost(promised, log_epoch, applied, checkpoint, records, self)

    def commit(self, c: HostCommit) -> None:
        meta: list[tuple[str, object]] = [
            (PROMISED, codec.pack_epoch(c.promised)), (LOG_EPOCH, codec.pack_epoch(c.log_epoch)),
            (APPLIED, c.applied)]
        now = self._clock() if self._clock is not None else c.now
        live_low = self._live_low
        written = beside = 0
        # (The segments' bookkeeping follows the rows inside the transaction; a commit
        # that fails leaves it ahead of the file, but such a host takes no further step:
        # docs/decisions.md, "A node whose log cannot be written stops".)
        try:
            with self._db:
                db = self._db
                if c.reset:
                    db.execute("DELETE FROM records")
                    self._segments.untrack_all()
                    db.execute("DELETE FROM meta WHERE key = ?", (CHECKPOINT,))
                    self._bytes = 0
                    live_low = 0
                if c.checkpoint is not None:
                    meta.append((CHECKPOINT, codec.pack_snapshot(c.checkpoint)))
                if c.truncate_after is not None:
                    self._delete("lsn > ?", (c.truncate_after,))
                if c.records:
                    rows = self._beside([_row(r, now) for r in c.records])
                    lsns = {r.lsn for r in c.records}
                    for lsn, size in db.execute(  # rows replaced (a backfill of history)
                            "SELECT lsn, size FROM records WHERE lsn BETWEEN ? AND ?",
                            (min(lsns), max(lsns))).fetchall():
                        if lsn in lsns:
                            self._bytes -= size
                    if self._sync == "full":
                        self._segments.sync()  # the records on the disk before their rows
                    db.executemany("INSERT OR REPLACE INTO records VALUES "
                                   "(?, ?, ?, ?, ?, ?, ?, ?)", rows)
                    for row in rows:
                        self._segments.track(row[0], row[7])
                    written = sum(row[5] for row in rows)
                    self._bytes += written
                    beside = sum(row[5] for row in rows if row[7] is not None)
                if c.drop_below:
                    live_low = max(live_low, c.drop_below)
                meta.append((LIVE_LOW, live_low))
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta)
                self._retain(live_low, now)
        except (sqlite3.Error, OSError) as exc:
            raise self._fail("write", exc) from None
        self._live_low = live_low
        # Segments no row refers to go: at once without the thread (the commit is as
        # durable as it gets), else once a checkpoint made this commit durable.
        self._segments.release(now=self._checkpointer is None)
        if self._checkpointer is not None:
            self._checkpointer.committed(written - beside, beside)

    def _delete(self, where: str, args: tuple[object, ...]) -> int:
        """Delete rows (keeping the byte count); how many."""
        db = self._db
        gone = db.execute(f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM records WHERE {where}",
                          args).fetchone()
        if gone[0]:
            if self._segments.tracks_any():
                for (lsn,) in db.execute(f"SELECT lsn FROM records WHERE ({where}) "
                                         "AND ref IS NOT NULL", args).fetchall():
                    self._segments.track(lsn, None)
            db.execute(f"DELETE FROM records WHERE {where}", args)
            self._bytes -= int(gone[1])
        return int(gone[0])

    def _retain(self, live_low: int, now: float) -> None:
        """Drop history rows (never live ones) by age and bytes, the oldest first."""
        db = self._db
        if self.retention_age > 0 and now >= self._next_age_check:
            self._next_age_check = now + AGE_CHECK
            keep = db.execute("SELECT MIN(lsn) FROM records WHERE lsn >= ? OR t >= ?",
                              (live_low, now - self.retention_age)).fetchone()[0]
            cut = live_low if keep is None else min(int(keep), live_low)
            self.evicted += self._delete("lsn < ?", (cut,))
        bound = self.retention_bytes
        if bound > 0 and self._bytes > bound:
            target = bound - bound // 8
            while self._bytes > target:
                rows = db.execute("SELECT lsn, size FROM records WHERE lsn < ? ORDER BY lsn "
                                  "LIMIT ?", (live_low, EVICT_STEP)).fetchall()
                if not rows:
                    break  # only the live log is left
                cut, freed = rows[-1][0], 0
                for lsn, size in rows:
                    freed += size
                    if self._bytes - freed <= target:
                        cut = lsn
                        break
                self.evicted += self._delete("lsn <= ?", (cut,))

    # ------------------------------------------------------------ HistoryPort
    def history_floor(self) -> int | None:
        try:
            row = self._db.execute("SELECT MIN(gseq) FROM records WHERE gseq > 0").fetchone()
        except sqlite3.Error as exc:
            raise self._fail("read", exc) from None
        return None if row[0] is None else int(row[0])

    def history_read(self, q: Query) -> list[msg.Record]:
        """One range read per group asked for (and one for the membership records),
        each in ``gseq`` order on its index, merged: the first ``q.limit``."""
        order = "DESC" if q.newest else "ASC"
        reads: list[tuple[str, tuple[object, ...]]] = [
            ("grp = ? AND gseq BETWEEN ? AND ?", (g, q.lo, q.hi)) for g in sorted(q.groups)]
        reads.append((f"grp = '' AND gseq BETWEEN ? AND ? AND kind IN "
                      f"({','.join('?' * len(_MEMBERSHIP))})", (q.lo, q.hi, *_MEMBERSHIP)))
        runs: list[list[tuple[int, bytes, str | None]]] = []
        try:
            for where, args in reads:
                runs.append(self._db.execute(
                    f"SELECT gseq, data, ref FROM records WHERE {where} ORDER BY gseq {order} "
                    "LIMIT ?", (*args, q.limit)).fetchall())
            merged = heapq.merge(*runs, key=lambda row: row[0], reverse=q.newest)
            out = [codec.unpack_record(self._data(data, ref))
                   for _, data, ref in _first(merged, q.limit)]
        except (sqlite3.Error, DecodeError) as exc:
            raise self._fail("read", exc) from None
        return out[::-1] if q.newest else out

    def history_add(self, records: Iterable[msg.Record], now: float) -> None:
        return None  # the store wrote them when the log took them

    def history_records(self, first: int, last: int) -> list[msg.Record]:
        try:
            rows = self._db.execute("SELECT data, ref FROM records WHERE lsn BETWEEN ? AND ? "
                                    "ORDER BY lsn", (first, last)).fetchall()
            return [codec.unpack_record(self._data(data, ref)) for data, ref in rows]
        except (sqlite3.Error, DecodeError) as exc:
            raise self._fail("read", exc) from None

    def history_clear(self) -> None:
        return None  # the commit that resets the log clears them

    def close(self) -> None:
        if self._checkpointer is not None:  # first: ours is then the last connection,
            self._checkpointer.close()  # whose close checkpoints what is left
            self._checkpointer = None
            threaded = True
        else:
            threaded = False
        self._segments.close(sync=self._sync != "off")
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        if threaded:
            with contextlib.suppress(OSError):
                self._segments.remove_scheduled()  # what waited for a checkpoint


def _first(rows: Iterable[tuple[int, bytes, str | None]],
           n: int) -> list[tuple[int, bytes, str | None]]:
    out: list[tuple[int, bytes, str | None]] = []
    for row in rows:
        if len(out) >= n:
            break
        out.append(row)
    return out


def _epoch(value: object) -> Epoch:
    if value is None:
        return NO_EPOCH
    if not isinstance(value, bytes):
        raise DecodeError(f"stored epoch is {type(value).__name__}, not bytes")
    return codec.unpack_epoch(value)
