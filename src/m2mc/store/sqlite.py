"""The durable :class:`~m2mc.store.GroupStore`: one SQLite file per node, WAL mode.

Messages are written in **chunks**: the writes buffered since the last
:meth:`SqliteStore.commit` are grouped by group and sender, and each run of up to
``CHUNK_SPAN`` consecutive sequence numbers becomes one row whose ``data`` is the
msgpack list of its records. A row per message costs SQLite about 5 us of CPU
(two b-trees to update); a row per chunk of a few dozen costs a few hundred ns a
message, which every node pays on its receive hot path.

Rows are written once. What changes about a message later (it is delivered after
being held, or total order stamps it) is a note (:mod:`m2mc.store.notes`: rows of
many, appended at each flush as chunks are), which reads apply on top; notes also
index the ``gseq`` of every stamped message for :meth:`gseq_range`. Every record
carries a store-wide write number, so :meth:`load_messages` returns messages in
the order they were first written.
The meta table keeps a mark at or above every write number given out, moved
:data:`WRITE_NUMBER_BLOCK` ahead when writes reach it: updating it with every
commit cost more than the chunk rows of a commit (two more b-trees to write). A
restart numbers on from the mark; the gap it leaves changes no order.

WAL with ``synchronous=NORMAL`` keeps every committed transaction across a
process crash (``kill -9``); only an operating-system crash may lose the last
ones, which the seed's MSP then recovers from the group. A file written by the
row-per-message layout of earlier versions is converted when opened.

Retention (age and bytes bounds, ``full`` or ``ids`` mode) is in
:mod:`m2mc.store.sqlite_retention`; without a policy the log keeps everything.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgpack

from m2mc.errors import ConfigError
from m2mc.kinds import GjlpState, Order
from m2mc.native import put_records as _PUT_RECORDS
from m2mc.ordering import Message, MessageId
from m2mc.store import GroupRow, MemberEntry, StoredMessage
from m2mc.store.checkpointer import Checkpointer, bound_log
from m2mc.store.chunks import CHUNK_SPAN, Pending, Record, chunk_rows, message_of
from m2mc.store.notes import SCHEMA as NOTES_SCHEMA
from m2mc.store.notes import (
    PendingNotes,
    convert_late,
    fold,
    notes_by_gseq,
    notes_for,
    notes_of_group,
    write_notes,
)
from m2mc.store.payload_files import LARGE_PAYLOAD, PayloadFiles, is_reference
from m2mc.store.sqlite_retention import SqliteRetention

__all__ = ["CHUNK_SPAN", "WRITE_NUMBER_BLOCK", "SqliteStore"]

_WRITTEN = "store/write_number"  # meta key: at or above every write number given out
WRITE_NUMBER_BLOCK = 1 << 16  # write numbers reserved by each update of that mark
PAGE_SIZE = 4096  # the page size of a new store file (docs/decisions.md, "Store pages of 4 KiB")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS groups (
    gid TEXT PRIMARY KEY, descr TEXT NOT NULL, ord TEXT NOT NULL, state TEXT NOT NULL,
    my_version INTEGER NOT NULL, members TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS members (
    gid TEXT NOT NULL, pid TEXT NOT NULL, version INTEGER NOT NULL, joined INTEGER NOT NULL,
    PRIMARY KEY (gid, pid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks (
    gid TEXT NOT NULL, pid TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
    data BLOB NOT NULL, t REAL, ext INTEGER, seg INTEGER);
CREATE INDEX IF NOT EXISTS chunks_by_seq ON chunks (gid, pid, lo);
"""

# A record in a chunk (m2mc.store.chunks): [write number, seq, ppid, pseq, payload,
# gseq, vclock, delivered]
_Record = Record
_Pending = Pending
_INSERT_CHUNK = ("INSERT INTO chunks (gid, pid, lo, hi, data, t, ext, seg) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
# ext: the bytes of the row's payloads kept in payload files; seg: the lowest segment
# it refers to (both NULL for a row of inline payloads only, the common case).
_PAYLOAD_COLUMNS = (("ext", "INTEGER"), ("seg", "INTEGER"))
_BY_SEGMENT = "CREATE INDEX IF NOT EXISTS chunks_by_seg ON chunks (seg) WHERE seg IS NOT NULL"


class SqliteStore(SqliteRetention):
    """GrpMsgList, GIIT rows and counters in ``path`` (created if absent).

    ``clock``: a wall clock (``time.time``) to stamp writes with for the age bound,
    so ages survive a restart; without it, the ``now`` given to :meth:`commit`.
    ``large_payload``: payloads of this many bytes or more are kept in payload
    files beside the log (m2mc.store.payload_files)."""

    def __init__(self, path: str | Path, *, wal_autocheckpoint: int | None = None,
                 clock: Callable[[], float] | None = None,
                 checkpoint_thread: bool = False,
                 large_payload: int = LARGE_PAYLOAD) -> None:
        self.path = Path(path)
        self._checkpointer: Checkpointer | None = None
        self._written_bytes = 0  # chunk bytes written since the last commit
        self._written_payload = 0  # and bytes of payload files (m2mc.store.payload_files)
        self._large = max(1, large_payload)
        self._payloads: PayloadFiles | None = None  # opened when first needed
        self._pending_refs = False  # some pending record's payload is in a payload file
        self._defer_sync = checkpoint_thread
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path))
            # Pages of 4 KiB (SQLite's own): every commit rewrites the last leaf of the
            # chunk table and of its index, 2 to 3 pages, so small pages are less log
            # written per commit; a payload of half a page or more is not in a row at
            # all (payload_files.LARGE_PAYLOAD). Only a new file takes it (set before
            # WAL mode); an older file keeps its 16 KiB pages.
            self._db.execute(f"PRAGMA page_size={PAGE_SIZE}")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # A checkpoint (WAL copied into the database, with an fsync) stalls the
            # node for tens of milliseconds: without the thread, every 32 MiB of log;
            # with checkpoint_thread (a real node) a thread copies the log as it grows
            # (m2mc.store.checkpointer), so this one finds next to nothing left to do and
            # runs every 4 MiB, which bounds the log. In pages of the file's own size (an
            # older file keeps its own). A log that a burst grew past the bound is cut
            # back to it when it starts over (journal_size_limit).
            log_bound = bound_log(self._db, checkpoint_thread, wal_autocheckpoint)
            self._db.executescript(_SCHEMA)
            self._db.executescript(NOTES_SCHEMA)
            self._add_payload_columns()
            self._written = self._last_write_number()
            self._reserved = self._written  # the mark in meta
            convert_late(self._db, self._written)  # (a file of the earlier layout)
            self._init_retention(clock)
            self._convert_row_per_message()
            self._db.commit()
        except (sqlite3.Error, OSError, ValueError) as exc:
            raise ConfigError(f"cannot open the message store {self.path}: {exc}") from None
        if checkpoint_thread:
            self._checkpointer = Checkpointer(self.path, log_bound=log_bound, writer=self._db,
                                              before=self._sync_payloads,
                                              after=self._remove_payload_files)
        # Writes since the last flush; later writes replace earlier ones.
        self._pending: _Pending = {}
        self._pending_gseqs = False  # some pending record has a gseq (indexed in notes)
        self._notes: PendingNotes = {}  # notes since the last flush (m2mc.store.notes)
        # Per group, the membership entries its ``members`` rows hold (the very
        # objects saved or loaded): a save writes only the entries that are not these.
        self._saved_members: dict[str, dict[str, MemberEntry]] = {}

    def _add_payload_columns(self) -> None:
        """A file of an earlier version has no ``ext``/``seg`` columns: add them."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(chunks)")}
        for name, kind in _PAYLOAD_COLUMNS:
            if name not in columns:
                self._db.execute(f"ALTER TABLE chunks ADD COLUMN {name} {kind}")
        self._db.execute(_BY_SEGMENT)

    def _files(self) -> PayloadFiles:
        """The payload files beside the log (the directory made when first needed)."""
        files = self._payloads
        if files is None:
            files = self._payloads = PayloadFiles(self._payload_directory(),
                                                  defer_sync=self._defer_sync)
        return files

    def _payload_directory(self) -> Path:
        return self.path.with_name(self.path.name + "-payloads")

    def _sync_payloads(self) -> None:
        """Before each checkpoint (on the checkpoint thread, or on ours when the log
        outran it): the payload files are made durable no later than the rows that
        refer to them."""
        files = self._payloads
        if files is not None:
            files.sync()

    def _remove_payload_files(self) -> None:
        """After each checkpoint (on its thread): the segments that a now durable
        commit stopped referring to are deleted."""
        files = self._payloads
        if files is not None:
            files.remove_scheduled()

    def _resolved(self, r: _Record) -> _Record | None:
        """``r`` with its payload read back from the payload files if it is there;
        None if it cannot be (m2mc.store.payload_files: treated as not stored)."""
        ref = r[4]
        if not is_reference(ref):
            return r
        payload = self._files().read(ref)
        if payload is None:
            return None
        r = list(r)
        r[4] = payload
        return r

    def _last_write_number(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (_WRITTEN,)).fetchone()
        return int(row[0]) if row is not None else 0

    def _convert_row_per_message(self) -> None:
        """Move the messages of the earlier layout (one row each) into chunks."""
        exists = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'messages'").fetchone()
        if not exists:
            return
        rows = self._db.execute("SELECT gid, pid, seq, ppid, pseq, payload, gseq, vclock, "
                                "delivered FROM messages ORDER BY rowid").fetchall()
        pending: _Pending = {}
        for gid, pid, seq, ppid, pseq, payload, gseq, vclock, delivered in rows:
            self._written += 1
            clock = None if vclock is None else dict(msgpack.unpackb(vclock))
            pending.setdefault(gid, {}).setdefault(pid, {})[seq] = [
                self._written, seq, ppid, pseq, bytes(payload), gseq, clock, bool(delivered)]
        self._pending = pending
        self._pending_gseqs = any(gseq is not None for *_, gseq, _, _ in rows)
        self._notes = {}
        self._flush()
        self._db.execute("DROP TABLE messages")

    # ------------------------------------------------------------------ writes
    def put(self, gid: str, message: Message, delivered: bool) -> None:
        self._put(gid, (message,), delivered)

    def put_delivered(self, gid: str, messages: Sequence[Message]) -> None:
        """``put(gid, m, True)`` for each message (a receiver's in-order batch)."""
        self._put(gid, messages, True)

    def _put(self, gid: str, messages: Sequence[Message], delivered: bool) -> None:
        by_pid = self._pending.get(gid)
        if by_pid is None:
            by_pid = self._pending[gid] = {}
        put = _PUT_RECORDS
        if put is None or type(messages) not in (list, tuple):
            self._put_each(by_pid, messages, delivered)
            return
        start, total = 0, len(messages)
        while start < total:  # in C, up to a message it leaves to Python (a large payload)
            self._written, start, gseqs = put(by_pid, messages, start, delivered,
                                              self._written, self._large)
            if gseqs:
                self._pending_gseqs = True
            if start < total:
                self._put_each(by_pid, (messages[start],), delivered)
                start += 1

    def _put_each(self, by_pid: dict[str, dict[int, _Record]], messages: Sequence[Message],
                  delivered: bool) -> None:
        """``_put``'s loop in Python (m2mc.native's ``put_records`` in C: the same
        records, write numbers and flags; tests/native/test_twins.py)."""
        records: dict[int, _Record] | None = None
        records_of = ""
        for message in messages:
            mid = message.mid
            if records is None or mid.pid != records_of:
                records_of = mid.pid
                records = by_pid.get(records_of)
                if records is None:
                    records = by_pid[records_of] = {}
            seq = mid.seq
            earlier = records.get(seq)
            if earlier is None:
                self._written += 1
                n = self._written
            else:
                n = earlier[0]
            gseq = message.gseq
            if gseq is not None:
                self._pending_gseqs = True
            parent = message.parent
            vclock = message.vclock
            payload: Any = message.payload
            if len(payload) >= self._large:  # written now, before the commit that refers to it
                payload = self._files().write(payload)
                self._pending_refs = True
            # The chunk record (see _Record), built inline: every message sent or received.
            records[seq] = [n, seq, parent.pid, parent.seq, payload, gseq,
                            None if vclock is None else dict(vclock), delivered]

    def _pending_record(self, gid: str, mid: MessageId) -> _Record | None:
        by_pid = self._pending.get(gid)
        if by_pid is None:
            return None
        records = by_pid.get(mid.pid)
        return None if records is None else records.get(mid.seq)

    def _note(self, gid: str, mid: MessageId) -> list[Any]:
        by_pid = self._notes.get(gid)
        if by_pid is None:
            by_pid = self._notes[gid] = {}
        notes = by_pid.get(mid.pid)
        if notes is None:
            notes = by_pid[mid.pid] = {}
        note = notes.get(mid.seq)
        if note is None:
            note = notes[mid.seq] = [None, None]
        return note

    def mark_delivered(self, gid: str, mid: MessageId) -> None:
        record = self._pending_record(gid, mid)
        if record is not None:
            record[7] = True
        else:
            self._note(gid, mid)[0] = 1

    def set_gseq(self, gid: str, mid: MessageId, gseq: int) -> None:
        record = self._pending_record(gid, mid)
        if record is not None:
            record[5] = gseq
            self._pending_gseqs = True
        else:
            self._note(gid, mid)[1] = gseq

    def save_group(self, row: GroupRow, changed: Sequence[MemberEntry] | None = None) -> None:
        """The row in ``groups``, its membership in ``members``: a row per entry, of which
        a save writes those that changed since the last (``changed`` when the caller says
        which; else those that are not the objects saved last). A group's membership
        changes an entry at a time, and a thousand members' list rewritten with each
        change made a join of n members cost each of them n * n. The ``members`` column
        of ``groups`` (the whole list in JSON, as earlier versions kept it) is read,
        never written."""
        self._flush()
        db = self._db
        gid = row.gid
        db.execute("INSERT OR REPLACE INTO groups VALUES (?, ?, ?, ?, ?, '[]')",
                   (gid, row.desc, row.order, row.state, row.my_version))
        saved = self._saved_members.get(gid)
        if saved is not None and changed is not None:
            if changed:
                db.executemany("INSERT OR REPLACE INTO members VALUES (?, ?, ?, ?)",
                               [(gid, e.pid, e.version, e.joined) for e in changed])
                for e in changed:
                    saved[e.pid] = e
            return
        if saved is None:
            saved = self._saved_members[gid] = {}
            db.execute("DELETE FROM members WHERE gid = ?", (gid,))
        changed = []
        kept = 0
        for e in row.members:
            old = saved.get(e.pid)
            if old is not e:
                changed.append(e)
            if old is not None:
                kept += 1
        if kept < len(saved):  # entries gone from the row (never from a Membership)
            saved.clear()
            db.execute("DELETE FROM members WHERE gid = ?", (gid,))
            changed = list(row.members)
        if changed:
            db.executemany("INSERT OR REPLACE INTO members VALUES (?, ?, ?, ?)",
                           [(gid, e.pid, e.version, e.joined) for e in changed])
            for e in changed:
                saved[e.pid] = e

    def set_meta(self, key: str, value: str) -> None:
        self._flush()
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def _flush(self) -> None:
        db = self._db
        if self._pending:
            pending, self._pending = self._pending, {}
            # (A new put replaces what was noted about the record before it: its write
            # number is greater than those notes', m2mc.store.notes.)
            references, self._pending_refs = self._pending_refs, False
            rows = list(chunk_rows(pending, self._time(), references))
            db.executemany(_INSERT_CHUNK, rows)
            self._written_bytes += sum([len(row[4]) for row in rows])  # (checkpoints)
            if references:  # (the checkpoint thread syncs the payload files too)
                self._written_payload += sum([row[6] or 0 for row in rows])
            if self._bytes is not None:  # a bytes bound: each group's total kept up to date
                for row in rows:
                    self._account(row[0], len(row[4]) + (row[6] or 0))
            if self._written > self._reserved:
                self._reserved = self._written + WRITE_NUMBER_BLOCK
                db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                           (_WRITTEN, str(self._reserved)))
            if self._pending_gseqs:  # the positions of records are indexed in notes too
                self._pending_gseqs = False
                for gid, by_pid in pending.items():
                    for pid, records in by_pid.items():
                        for seq, r in records.items():
                            if r[5] is not None:
                                note = self._note(gid, MessageId(pid, seq))
                                note[1] = r[5]
        if self._notes:
            notes, self._notes = self._notes, {}
            write_notes(db, notes, self._written)

    def commit(self, now: float | None = None) -> None:
        self._flush()
        self._retain(now)
        self._db.commit()
        if self._reclaim_due:
            self._reclaim_payload_files()
        if self._checkpointer is not None:
            self._checkpointer.committed(self._written_bytes, self._written_payload)
        self._written_bytes = self._written_payload = 0

    def close(self) -> None:
        try:
            self.commit()
        finally:
            if self._checkpointer is not None:  # (closed first: ours is the last
                self._checkpointer.close()  # connection, whose close checkpoints)
            files = self._payloads
            if files is not None:
                files.close()  # (synced before the last checkpoint, the close's)
            self._db.close()
            if files is not None and self._checkpointer is not None:
                files.remove_scheduled()  # what waited for a checkpoint

    # ------------------------------------------------------------------- reads
    def load_groups(self) -> list[GroupRow]:
        self._flush()
        rows = self._db.execute(
            "SELECT gid, descr, ord, state, my_version, members FROM groups ORDER BY rowid")
        by_gid: dict[str, dict[str, MemberEntry]] = {}
        for gid, pid, version, joined in self._db.execute(
                "SELECT gid, pid, version, joined FROM members ORDER BY gid, pid"):
            by_gid.setdefault(gid, {})[pid] = MemberEntry(str(pid), int(version), bool(joined))
        out = []
        for gid, desc, order, state, version, members in rows:
            # A file of an earlier version keeps the list in JSON in ``groups``: taken,
            # then the rows of ``members`` (a list written since replaces it there).
            saved = by_gid.get(gid, {})
            self._saved_members[gid] = saved.copy()
            entries = [MemberEntry(str(p), int(v), bool(j)) for p, v, j in json.loads(members)
                       if p not in saved]
            entries += saved.values()
            # The enums' strings as saved (the members are those strings).
            out.append(GroupRow(gid, desc, Order(order), GjlpState(state), version, entries))
        return out

    def _late(self, gid: str, pid: str, lo: int, hi: int, records: dict[int, _Record]
              ) -> dict[int, tuple[int | None, int | None]]:
        """What the notes say of ``records`` (seq -> record) of ``pid``, ``lo..hi``."""
        out = {}
        for seq, noted in notes_for(self._db, gid, pid, lo, hi).items():
            r = records.get(seq)
            if r is not None and (late := fold(noted, r[0])) is not None:
                out[seq] = late
        return out

    def get(self, gid: str, mid: MessageId) -> Message | None:
        found = self.seq_range(gid, mid.pid, mid.seq, mid.seq, 1)
        return found[0] if found else None

    def seq_range(self, gid: str, pid: str, lo: int, hi: int, limit: int) -> list[Message]:
        self._flush()
        if limit <= 0 or lo > hi:
            return []
        rows = self._db.execute(
            "SELECT lo, rowid, data FROM chunks WHERE gid = ? AND pid = ? AND lo BETWEEN ? "
            "AND ? AND hi >= ? ORDER BY lo, rowid", (gid, pid, lo - CHUNK_SPAN + 1, hi, lo))
        found: dict[int, tuple[int, _Record]] = {}
        for chunk_lo, rowid, data in rows:
            # Chunks come by their lowest seqno: once ``limit`` records below this
            # chunk are found, no later chunk can hold a lower one (nor a later write
            # of one: its seqno is at least the chunk's lowest).
            if len(found) >= limit and chunk_lo > sorted(found)[limit - 1]:
                break
            for r in msgpack.unpackb(data):
                seq = r[1]
                if lo <= seq <= hi:
                    # A later write of the same message replaces it: later is a greater
                    # rowid, which a chunk of a lower seqno, read first, may have.
                    earlier = found.get(seq)
                    if earlier is None or earlier[0] < rowid:
                        found[seq] = (rowid, r)
        seqs = sorted(found)[:limit]
        if not seqs:
            return []
        late = self._late(gid, pid, seqs[0], seqs[-1], {s: found[s][1] for s in seqs})
        resolved = self._resolved
        return [message_of(pid, r, late.get(seq))[0] for seq in seqs
                if (r := resolved(found[seq][1])) is not None]

    def gseq_range(self, gid: str, lo: int, hi: int, limit: int) -> list[Message]:
        self._flush()
        return [message for _, message in self.held_positions(gid, lo, hi, limit)]

    def held_positions(self, gid: str, lo: int, hi: int, limit: int
                       ) -> list[tuple[int, Message]]:
        """The messages this log holds at positions ``lo..hi`` now, by position, at most
        ``limit``. A note can name a position its message has since left (a record
        written again, or numbered again by a later sequencer): such a note is passed
        over, and since it took a place among the first positions the notes name,
        more are read until ``limit`` are found or the notes run out."""
        want = limit
        while True:
            found = notes_by_gseq(self._db, gid, lo, hi, want)
            out: list[tuple[int, Message]] = []
            seen: set[tuple[str, int]] = set()
            for gseq, pid, seq in found:
                if (pid, seq) in seen:
                    continue
                message = self.get(gid, MessageId(pid, seq))
                if message is not None and message.gseq == gseq:  # (its position now)
                    seen.add((pid, seq))
                    out.append((gseq, message))
                    if len(out) >= limit:
                        return out
            if len({g for g, _, _ in found}) < want:  # every position named was read
                return out
            want *= 2

    def load_messages(self, gid: str) -> list[StoredMessage]:
        self._flush()
        noted = notes_of_group(self._db, gid)
        latest: dict[tuple[str, int], _Record] = {}
        first: dict[tuple[str, int], int] = {}
        for pid, data in self._db.execute(
                "SELECT pid, data FROM chunks WHERE gid = ? ORDER BY rowid", (gid,)):
            for r in msgpack.unpackb(data):
                key = (pid, r[1])
                latest[key] = r
                first.setdefault(key, r[0])
        out = []
        for key in sorted(latest, key=first.__getitem__):
            r = self._resolved(latest[key])
            if r is None:
                continue
            message, delivered = message_of(key[0], r, fold(noted.get(key), r[0]))
            out.append(StoredMessage(message, delivered))
        return out

    def high_water(self, gid: str, pid: str) -> int:
        self._flush()
        row = self._db.execute("SELECT MAX(hi) FROM chunks WHERE gid = ? AND pid = ?",
                               (gid, pid)).fetchone()
        high = int(row[0]) if row and row[0] is not None else 0
        return max(high, self.stub_high_water(gid, pid))  # evicted ones are never reused

    def get_meta(self, key: str) -> str | None:
        self._flush()
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

