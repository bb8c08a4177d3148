"""The durable :class:`~m2mc.store.GroupStore`: one SQLite file per node, WAL mode.

Message writes are buffered in memory and written with ``executemany`` on the
next read or :meth:`SqliteStore.commit`, so a burst of deliveries costs one
transaction. WAL with ``synchronous=NORMAL`` keeps every committed transaction
across a process crash (``kill -9``); only an operating-system crash may lose
the last ones, which the seed's MSP then recovers from the group.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import msgpack

from m2mc.errors import ConfigError
from m2mc.group.codec import MemberEntry
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import GroupRow, StoredMessage

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS groups (
    gid TEXT PRIMARY KEY, descr TEXT NOT NULL, ord TEXT NOT NULL, state TEXT NOT NULL,
    my_version INTEGER NOT NULL, members TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    gid TEXT NOT NULL, pid TEXT NOT NULL, seq INTEGER NOT NULL,
    ppid TEXT NOT NULL, pseq INTEGER NOT NULL, payload BLOB NOT NULL,
    gseq INTEGER, vclock BLOB, delivered INTEGER NOT NULL,
    PRIMARY KEY (gid, pid, seq));
CREATE INDEX IF NOT EXISTS messages_gseq ON messages (gid, gseq) WHERE gseq IS NOT NULL;
"""

_COLUMNS = "pid, seq, ppid, pseq, payload, gseq, vclock"
_Row = tuple[str, str, int, str, int, bytes, int | None, bytes | None, int]


def _row(gid: str, m: Message, delivered: bool) -> _Row:
    vclock = None if m.vclock is None else msgpack.packb(dict(m.vclock))
    return (gid, m.mid.pid, m.mid.seq, m.parent.pid, m.parent.seq, m.payload, m.gseq, vclock,
            1 if delivered else 0)


def _message(pid: str, seq: int, ppid: str, pseq: int, payload: bytes, gseq: int | None,
             vclock: bytes | None) -> Message:
    parent = MessageId(ppid, pseq) if ppid else ROOT
    clock = None if vclock is None else dict(msgpack.unpackb(vclock))
    return Message(MessageId(pid, seq), parent, bytes(payload), clock, gseq)


class SqliteStore:
    """GrpMsgList, GIIT rows and counters in ``path`` (created if absent)."""

    def __init__(self, path: str | Path, *, wal_autocheckpoint: int = 8192) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path))
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # A checkpoint (WAL copied into the database, with an fsync) stalls the
            # node for tens of milliseconds: do it every 32 MiB of log, not every 4.
            self._db.execute(f"PRAGMA wal_autocheckpoint={wal_autocheckpoint}")
            self._db.executescript(_SCHEMA)
            self._db.commit()
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot open the message store {self.path}: {exc}") from None
        # (gid, pid, seq) -> row; later writes to the same key replace earlier ones.
        self._pending: dict[tuple[str, str, int], _Row] = {}
        self._delivered: list[tuple[str, str, int]] = []
        self._gseqs: list[tuple[int, str, str, int]] = []

    # ------------------------------------------------------------------ writes
    def put(self, gid: str, message: Message, delivered: bool) -> None:
        mid = message.mid
        self._pending[(gid, mid.pid, mid.seq)] = _row(gid, message, delivered)

    def mark_delivered(self, gid: str, mid: MessageId) -> None:
        key = (gid, mid.pid, mid.seq)
        row = self._pending.get(key)
        if row is not None:
            self._pending[key] = (*row[:8], 1)
        else:
            self._delivered.append(key)

    def set_gseq(self, gid: str, mid: MessageId, gseq: int) -> None:
        key = (gid, mid.pid, mid.seq)
        row = self._pending.get(key)
        if row is not None:
            self._pending[key] = (*row[:6], gseq, row[7], row[8])
        else:
            self._gseqs.append((gseq, gid, mid.pid, mid.seq))

    def save_group(self, row: GroupRow) -> None:
        members = json.dumps([[e.pid, e.version, e.joined] for e in row.members])
        self._flush()
        self._db.execute(
            "INSERT OR REPLACE INTO groups VALUES (?, ?, ?, ?, ?, ?)",
            (row.gid, row.desc, row.order, row.state, row.my_version, members))

    def set_meta(self, key: str, value: str) -> None:
        self._flush()
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def _flush(self) -> None:
        db = self._db
        if self._pending:
            db.executemany("INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           self._pending.values())
            self._pending.clear()
        if self._delivered:
            db.executemany(
                "UPDATE messages SET delivered = 1 WHERE gid = ? AND pid = ? AND seq = ?",
                self._delivered)
            self._delivered.clear()
        if self._gseqs:
            db.executemany("UPDATE messages SET gseq = ? WHERE gid = ? AND pid = ? AND seq = ?",
                           self._gseqs)
            self._gseqs.clear()

    def commit(self) -> None:
        self._flush()
        self._db.commit()

    def close(self) -> None:
        try:
            self.commit()
        finally:
            self._db.close()

    # ------------------------------------------------------------------- reads
    def load_groups(self) -> list[GroupRow]:
        self._flush()
        rows = self._db.execute(
            "SELECT gid, descr, ord, state, my_version, members FROM groups ORDER BY rowid")
        out = []
        for gid, desc, order, state, version, members in rows:
            entries = [MemberEntry(str(p), int(v), bool(j)) for p, v, j in json.loads(members)]
            out.append(GroupRow(gid, desc, order, state, version, entries))
        return out

    def get(self, gid: str, mid: MessageId) -> Message | None:
        self._flush()
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE gid = ? AND pid = ? AND seq = ?",
            (gid, mid.pid, mid.seq)).fetchone()
        return None if row is None else _message(*row)

    def seq_range(self, gid: str, pid: str, lo: int, hi: int, limit: int) -> list[Message]:
        self._flush()
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE gid = ? AND pid = ? AND seq BETWEEN ? AND ?"
            " ORDER BY seq LIMIT ?", (gid, pid, lo, hi, limit))
        return [_message(*r) for r in rows]

    def gseq_range(self, gid: str, lo: int, hi: int, limit: int) -> list[Message]:
        self._flush()
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE gid = ? AND gseq BETWEEN ? AND ?"
            " ORDER BY gseq LIMIT ?", (gid, lo, hi, limit))
        return [_message(*r) for r in rows]

    def load_messages(self, gid: str) -> list[StoredMessage]:
        self._flush()
        rows = self._db.execute(
            f"SELECT {_COLUMNS}, delivered FROM messages WHERE gid = ? ORDER BY rowid", (gid,))
        return [StoredMessage(_message(*r[:7]), bool(r[7])) for r in rows]

    def high_water(self, gid: str, pid: str) -> int:
        self._flush()
        row = self._db.execute("SELECT MAX(seq) FROM messages WHERE gid = ? AND pid = ?",
                               (gid, pid)).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def get_meta(self, key: str) -> str | None:
        self._flush()
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])
