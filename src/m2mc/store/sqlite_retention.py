"""Retention for :class:`~m2mc.store.sqlite.SqliteStore` (the policy and its rules:
:mod:`m2mc.store.retention`).

Eviction works on whole chunk rows, oldest first (by rowid, the order rows were
written): a row whose group is over its bytes bound, or that is older than the
age bound, is read back; its delivered records go (``full``: dropped, their
seqnos noted in the ``gone`` table; ``ids``: rewritten as stub records, payload
``None``, in the ``stubs`` table) and its undelivered ones are written again as
a new row stamped now (a row of held messages only is moved so too: a held
message's age starts again, and passes do not read it over and over). A pass
runs inside :meth:`commit`, so what it drops and what it notes are one
transaction: a restarted node never sees a message gone without its note. The
hot path (``put``, ``_flush``) only stamps each chunk row with the time and,
under a bytes bound, adds its length to its group's total.

Time: a store given a ``clock`` (the asyncio driver passes ``time.time``) stamps
rows with it, so ages survive a reboot; otherwise with the ``now`` of the last
:meth:`commit` (the simulator's virtual time). Rows written before any time was
known (or by an earlier version) count as written when the store was opened.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import msgpack

from m2mc.native import packb
from m2mc.ordering import Message
from m2mc.store.chunks import CHUNK_SPAN, Record, message_of, referenced, runs
from m2mc.store.notes import drop_notes
from m2mc.store.payload_files import PayloadFiles, is_reference
from m2mc.store.retention import (
    GoneAnswer,
    GoneLog,
    RetentionPolicy,
    intersect,
    normalize,
    subtract_points,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS stubs (
    gid TEXT NOT NULL, pid TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
    n INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS stubs_by_seq ON stubs (gid, pid, lo);
CREATE TABLE IF NOT EXISTS gone (
    gid TEXT NOT NULL, pid TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (gid, pid)) WITHOUT ROWID;
"""
SCAN_ROWS = 256  # chunk rows read per step of an eviction pass
_ROW_BYTES = "LENGTH(data) + COALESCE(ext, 0)"  # a chunk row's size, its payload files' included
_INSERT_ROW = ("INSERT INTO chunks (gid, pid, lo, hi, data, t, ext, seg) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
HELD_LIMIT = 100_000  # positions looked at per interval of a gone answer
_FLOOR = ""  # the gone table's row of a group's gseq floor (a pid is never empty)


class SqliteRetention:
    """The retention half of SqliteStore (a mixin: it shares its connection)."""

    _db: sqlite3.Connection
    _payloads: PayloadFiles | None

    def _files(self) -> PayloadFiles:
        raise NotImplementedError

    def _payload_directory(self) -> Path:
        raise NotImplementedError

    def _late(self, gid: str, pid: str, lo: int, hi: int, records: dict[int, Record]
              ) -> dict[int, tuple[int | None, int | None]]:
        raise NotImplementedError

    def _flush(self) -> None:
        raise NotImplementedError

    def held_positions(self, gid: str, lo: int, hi: int, limit: int
                       ) -> list[tuple[int, Message]]:
        raise NotImplementedError

    def _init_retention(self, clock: Callable[[], float] | None) -> None:
        db = self._db
        db.executescript(_SCHEMA)
        columns = {row[1] for row in db.execute("PRAGMA table_info(chunks)")}
        if "t" not in columns:  # a file of an earlier version: its rows have no time
            db.execute("ALTER TABLE chunks ADD COLUMN t REAL")
        self._clock = clock
        self._reclaim_due = False  # a pass ran: see which payload segments may go
        self._now: float | None = None
        self._opened_at: float | None = clock() if clock is not None else None
        self._gone: dict[str, GoneLog] = {}
        for gid, pid, data in db.execute("SELECT gid, pid, data FROM gone"):
            gone = self._gone.setdefault(gid, GoneLog())
            if pid == _FLOOR:
                gone.gseq_floor = int(data)
            else:
                gone.ids[pid] = [(int(lo), int(hi)) for lo, hi in json.loads(data)]
        self._stub_count: dict[str, int] = {
            gid: int(n) for gid, n in db.execute("SELECT gid, SUM(n) FROM stubs GROUP BY gid")}
        self._bytes: dict[str, int] | None = None  # per group, kept under a bytes bound
        self._over: set[str] = set()  # groups past the point of their next bytes pass
        self._evict_at: dict[str, int] = {}
        self._next_age_check = 0.0
        self.retention = RetentionPolicy()
        self._bound = 0
        self.evicted = 0

    # ---------------------------------------------------------------- policy
    def set_retention(self, policy: RetentionPolicy) -> None:
        self._flush()
        self.retention = policy
        self._bound = policy.bytes_bound(in_memory=False)
        self._evict_at.clear()
        self._over.clear()
        if not self._bound:
            self._bytes = None
            return
        self._bytes = {gid: int(n) for gid, n in self._db.execute(
            f"SELECT gid, SUM({_ROW_BYTES}) FROM chunks GROUP BY gid")}
        self._over.update(gid for gid, n in self._bytes.items() if n > self._bound)

    def _time(self) -> float | None:
        """The time new chunk rows are stamped with."""
        return self._clock() if self._clock is not None else self._now

    def _account(self, gid: str, size: int) -> None:
        """A chunk row of ``size`` bytes was written (only under a bytes bound)."""
        assert self._bytes is not None
        total = self._bytes[gid] = self._bytes.get(gid, 0) + size
        if total > self._evict_at.get(gid, self._bound):
            self._over.add(gid)

    def _retain(self, now: float | None) -> None:
        """Run the eviction passes that are due (inside commit, after the flush)."""
        if self._clock is not None:
            now = self._clock()
        if now is None:
            return
        self._now = now
        if self._opened_at is None:
            self._opened_at = now
        cutoff = None
        age = self.retention.age
        if age and now >= self._next_age_check:
            self._next_age_check = now + self.retention.age_check_every()
            cutoff = now - age
        if cutoff is not None or self._over:
            self._evict_pass(now, cutoff)

    # --------------------------------------------------------------- eviction
    def _evict_pass(self, now: float, cutoff: float | None) -> None:
        bound = self._bound
        sizes = self._bytes
        need: dict[str, int] = {}
        if sizes is not None:
            target = bound - bound // 8
            need = {gid: sizes.get(gid, 0) - target for gid in self._over}
        touched: set[str] = set()
        cursor = 0
        opened = self._opened_at
        # Rows this pass writes (held records kept, moved) come after the last one now:
        # the pass never reads them.
        last = self._db.execute("SELECT MAX(rowid) FROM chunks").fetchone()[0] or 0
        while True:
            rows = self._db.execute(
                "SELECT rowid, gid, pid, lo, hi, data, t, ext FROM chunks WHERE rowid > ? "
                "AND rowid <= ? ORDER BY rowid LIMIT ?", (cursor, last, SCAN_ROWS)).fetchall()
            if not rows:
                break
            done = False
            for rowid, gid, pid, lo, hi, data, t, ext in rows:
                cursor = rowid
                when = t if t is not None else opened
                aged = cutoff is not None and (when is None or when < cutoff)
                if not aged and need.get(gid, 0) <= 0:
                    if not any(v > 0 for v in need.values()) and (
                            cutoff is None or (when is not None and when >= cutoff)):
                        done = True  # rows come in the order written: the rest is younger
                        break
                    continue
                freed = self._evict_row(rowid, gid, pid, lo, hi, bytes(data), ext, now, touched)
                if gid in need:
                    need[gid] -= freed
            if done:
                break
        for gid in self._over:
            total = sizes.get(gid, 0) if sizes is not None else 0
            # Held messages cannot go: try again only once another eighth is written.
            self._evict_at[gid] = max(bound, total + bound // 8)
        self._over.clear()
        if self.retention.keeps_ids:
            for gid in [g for g, n in self._stub_count.items() if n > self.retention.max_ids]:
                self._trim_stubs(gid, touched)
        for gid in touched:
            self._save_gone(gid)
        self._reclaim_due = True  # (after the commit: commit())

    def _evict_row(self, rowid: int, gid: str, pid: str, lo: int, hi: int, data: bytes,
                   ext: int | None, now: float, touched: set[str]) -> int:
        """Evict the delivered records of one chunk row; returns the bytes freed."""
        keep: list[Record] = []
        evicted: list[Record] = []
        records = msgpack.unpackb(data)
        late = self._late(gid, pid, lo, hi, {r[1]: r for r in records})
        for r in records:
            noted = late.get(r[1])
            if noted is not None:
                if noted[0] is not None:
                    r[7] = bool(noted[0])
                if noted[1] is not None:
                    r[5] = noted[1]
            (evicted if r[7] else keep).append(r)
        db = self._db
        db.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))
        if not evicted:  # held messages only: moved to the young end, not read every pass
            if ext is None:
                db.execute(_INSERT_ROW, (gid, pid, lo, hi, data, now, None, None))
                return 0
            freed = len(data) + ext - self._rewrite_row(gid, pid, keep, now)  # (copied)
            if self._bytes is not None:
                self._bytes[gid] = self._bytes.get(gid, 0) - freed
            return freed
        freed = len(data) + (ext or 0)
        if keep:  # held ones stay, as a new row: their age counts from now
            freed -= self._rewrite_row(gid, pid, keep, now)
        drop_notes(db, gid, pid, {r[1] for r in evicted})
        gone = self._gone.setdefault(gid, GoneLog())
        floor = max((r[5] for r in evicted if r[5] is not None), default=0)
        if floor > gone.gseq_floor:
            gone.gseq_floor = floor
            touched.add(gid)
        if self.retention.keeps_ids:
            self._write_stubs(gid, pid, [[r[0], r[1], r[2], r[3], None, r[5], r[6], True]
                                         for r in evicted])
        else:
            gone.add(pid, [(r[1], r[1]) for r in evicted])
            touched.add(gid)
        if self._bytes is not None:
            self._bytes[gid] = self._bytes.get(gid, 0) - freed
        self.evicted += len(evicted)
        return freed

    def _rewrite_row(self, gid: str, pid: str, records: list[Record], now: float) -> int:
        """Write ``records`` (held ones) as a new row stamped ``now``, their payloads
        in payload files copied to the current segment so that older segments can go
        (one that cannot be read back stays a reference to nothing, in segment 0);
        returns the row's bytes."""
        if any(is_reference(r[4]) for r in records):
            files = self._files()
            for r in records:
                if is_reference(r[4]):
                    payload = files.read(r[4])
                    r[4] = [0, 0, r[4][2], 0] if payload is None else files.write(payload)
        ext, seg = referenced(records)
        data = packb(records)
        self._db.execute(_INSERT_ROW, (gid, pid, records[0][1], records[-1][1], data, now,
                                       ext, seg))
        return len(data) + (ext or 0)

    def _reclaim_payload_files(self) -> None:
        """The payload segments no row refers to any more may go (called after the
        commit of a retention pass; m2mc.store.payload_files says when they do)."""
        self._reclaim_due = False
        files = self._payloads
        if files is None:
            if not self._payload_directory().exists():
                return  # no payload was ever large enough
            files = self._files()
        row = self._db.execute("SELECT MIN(seg) FROM chunks WHERE seg IS NOT NULL").fetchone()
        files.remove_below(row[0] if row and row[0] is not None else files.current)

    def _write_stubs(self, gid: str, pid: str, stubs: list[Record]) -> None:
        stubs.sort(key=lambda r: r[1])
        for run in runs(stubs):
            self._db.execute("INSERT INTO stubs VALUES (?, ?, ?, ?, ?, ?)",
                             (gid, pid, run[0][1], run[-1][1], len(run),
                              packb(run)))
        self._stub_count[gid] = self._stub_count.get(gid, 0) + len(stubs)

    def _trim_stubs(self, gid: str, touched: set[str]) -> None:
        """``ids`` mode: past ``max_ids`` stubs, the oldest rows of stubs are dropped."""
        db = self._db
        gone = self._gone.setdefault(gid, GoneLog())
        while self._stub_count.get(gid, 0) > self.retention.max_ids:
            row = db.execute("SELECT rowid, pid, n, data FROM stubs WHERE gid = ? "
                             "ORDER BY rowid LIMIT 1", (gid,)).fetchone()
            if row is None:
                self._stub_count[gid] = 0
                break
            rowid, pid, n, data = row
            db.execute("DELETE FROM stubs WHERE rowid = ?", (rowid,))
            gone.add(pid, [(r[1], r[1]) for r in msgpack.unpackb(data)])
            self._stub_count[gid] -= int(n)
            touched.add(gid)

    def _save_gone(self, gid: str) -> None:
        gone = self._gone.get(gid)
        if gone is None:
            return
        rows = [(gid, pid, json.dumps(ivs, separators=(",", ":"))) for pid, ivs in gone.ids.items()]
        rows.append((gid, _FLOOR, str(gone.gseq_floor)))
        self._db.executemany("INSERT OR REPLACE INTO gone VALUES (?, ?, ?)", rows)

    # ------------------------------------------------------------------ reads
    def gone(self, gid: str) -> GoneLog:
        gone = self._gone.get(gid)
        if gone is None:
            return GoneLog()
        return GoneLog({pid: list(ivs) for pid, ivs in gone.ids.items()}, gone.gseq_floor)

    def load_stubs(self, gid: str) -> list[Message]:
        self._flush()
        out: list[Message] = []
        for pid, data in self._db.execute(
                "SELECT pid, data FROM stubs WHERE gid = ? ORDER BY rowid", (gid,)):
            out.extend(message_of(pid, r)[0] for r in msgpack.unpackb(data))
        return out

    def _stubs_in(self, gid: str, pid: str, lo: int, hi: int) -> list[Message]:
        rows = self._db.execute(
            "SELECT data FROM stubs WHERE gid = ? AND pid = ? AND lo BETWEEN ? AND ? "
            "AND hi >= ?", (gid, pid, lo - CHUNK_SPAN + 1, hi, lo))
        found = {r[1]: r for (data,) in rows for r in msgpack.unpackb(data) if lo <= r[1] <= hi}
        return [message_of(pid, found[s])[0] for s in sorted(found)]

    def stub_high_water(self, gid: str, pid: str) -> int:
        row = self._db.execute("SELECT MAX(hi) FROM stubs WHERE gid = ? AND pid = ?",
                               (gid, pid)).fetchone()
        high = int(row[0]) if row and row[0] is not None else 0
        gone = self._gone.get(gid)
        return max(high, gone.high(pid)) if gone is not None else high

    def gone_answer(self, gid: str, ranges: dict[str, list[tuple[int, int]]],
                    gseqs: list[tuple[int, int]], limit: int) -> GoneAnswer:
        self._flush()
        out = GoneAnswer()
        gone = self._gone.get(gid)
        stubbed = self._stub_count.get(gid, 0) > 0
        for pid, ivs in ranges.items():
            ivs = normalize(ivs)
            part = intersect(ivs, gone.ids.get(pid, [])) if gone is not None else []
            if stubbed:
                for lo, hi in ivs:
                    named = self._stubs_in(gid, pid, lo, hi)
                    out.stubs.extend(named[:max(0, limit - len(out.stubs))])
                    part.extend((m.mid.seq, m.mid.seq) for m in named)
                part = normalize(part)
            if part:
                out.ids[pid] = part
        floor = gone.gseq_floor if gone is not None else 0
        for lo, hi in gseqs:
            hi = min(hi, floor)
            if lo > hi:
                continue
            held = [g for g, _ in self.held_positions(gid, lo, hi, HELD_LIMIT)]
            if len(held) >= HELD_LIMIT:
                hi = held[-1]
            out.gseqs.extend(subtract_points([(lo, hi)], held))
        return out

    def note_skipped(self, gid: str, ids: dict[str, list[tuple[int, int]]], gseq_floor: int,
                     stubs: list[Message]) -> None:
        self._flush()
        gone = self._gone.setdefault(gid, GoneLog())
        for pid, ivs in ids.items():
            gone.add(pid, ivs)
        gone.gseq_floor = max(gone.gseq_floor, gseq_floor)
        touched = {gid}
        if self.retention.keeps_ids and stubs:
            by_pid: dict[str, list[Record]] = {}
            for m in stubs:
                by_pid.setdefault(m.mid.pid, []).append(
                    [0, m.mid.seq, m.parent.pid, m.parent.seq, None, m.gseq,
                     None if m.vclock is None else dict(m.vclock), True])
            for pid, records in by_pid.items():
                self._write_stubs(gid, pid, records)
            self._trim_stubs(gid, touched)
        self._save_gone(gid)

    def log_bytes(self, gid: str) -> int:
        self._flush()
        row = self._db.execute(f"SELECT SUM({_ROW_BYTES}) FROM chunks WHERE gid = ?",
                               (gid,)).fetchone()
        return int(row[0]) if row and row[0] is not None else 0
