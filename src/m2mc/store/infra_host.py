"""The durable :class:`~m2mc.infra.host_persist.HostStore` of an infrastructure host:
one SQLite file (``<data_dir>/infra-host.sqlite3``), WAL mode (docs/infra.md,
"Durable hosts").

``meta`` holds the host's id, its promise, its log's epoch, its commit point and
the checkpoint of the committed tables; ``records`` holds the log, one row per
record, as the msgpack of its wire fields (m2mc.infra.codec's stored forms, read
back through the network's checks). Each :meth:`SqliteHostStore.commit` is one
transaction.

``sync="full"`` (the default) makes SQLite wait for the disk at each commit
(``synchronous=FULL``): a power cut or an operating system crash loses nothing a
host answered. ``sync="normal"`` keeps every commit across a crash of the process
(``kill -9``) only, and costs less (docs/decisions.md, "Hosts keep their promise
and their log", has the figures).
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from m2mc.errors import DecodeError, SavedStateError
from m2mc.infra import codec
from m2mc.infra.host_persist import HostCommit, StoredHost
from m2mc.infra.ids import NO_EPOCH, Epoch

FILE_NAME = "infra-host.sqlite3"
SYNC_MODES = ("full", "normal", "off")  # "off": the simulator (its crashes keep the file)
HOST, PROMISED, LOG_EPOCH, APPLIED, CHECKPOINT = (
    "host", "promised", "log_epoch", "applied", "checkpoint")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS records (lsn INTEGER PRIMARY KEY, data BLOB NOT NULL);
"""


class SqliteHostStore:
    """Host ``host``'s saved state in ``path`` (created if absent). A file that holds
    another host's state, or that SQLite cannot read, raises
    :class:`~m2mc.errors.SavedStateError`."""

    def __init__(self, path: str | Path, host: str, *, sync: str = "full") -> None:
        if sync not in SYNC_MODES:
            raise ValueError(f"sync must be one of {', '.join(SYNC_MODES)}")
        self.path = Path(path)
        self.host = host
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path))
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={sync.upper()}")
            self._db.executescript(_SCHEMA)
            self._db.commit()
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (HOST,)).fetchone()
        except (sqlite3.Error, OSError) as exc:
            raise SavedStateError(f"cannot open the saved host state {self.path}: {exc}; "
                                  "move the file away to start this host afresh") from None
        if row is None:
            with self._db:
                self._db.execute("INSERT INTO meta VALUES (?, ?)", (HOST, host))
        elif row[0] != host:
            self._db.close()
            raise SavedStateError(f"{self.path} holds the state of host {row[0]!r}, not "
                                  f"{host!r}: give each host its own --data-dir")

    def _fail(self, what: str, exc: Exception) -> SavedStateError:
        return SavedStateError(f"cannot {what} the saved host state {self.path}: {exc}")

    def load(self) -> StoredHost:
        try:
            meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
            rows = self._db.execute("SELECT lsn, data FROM records ORDER BY lsn").fetchall()
        except sqlite3.Error as exc:
            raise self._fail("read", exc) from None
        try:
            promised = _epoch(meta.get(PROMISED))
            log_epoch = _epoch(meta.get(LOG_EPOCH))
            ck = meta.get(CHECKPOINT)
            checkpoint = codec.unpack_snapshot(ck) if isinstance(ck, bytes) else None
            records = tuple(codec.unpack_record(data) for _, data in rows)
        except DecodeError as exc:
            raise self._fail("decode", exc) from None
        applied = meta.get(APPLIED, 0)
        if type(applied) is not int or applied < 0:
            raise self._fail("read", ValueError(f"bad commit point {applied!r:.40}"))
        for (lsn, _), r in zip(rows, records, strict=True):
            if lsn != r.lsn:
                raise self._fail("read", ValueError(f"record {r.lsn} filed under {lsn}"))
        return StoredHost(promised, log_epoch, applied, checkpoint, records)

    def commit(self, c: HostCommit) -> None:
        meta: list[tuple[str, object]] = [
            (PROMISED, codec.pack_epoch(c.promised)), (LOG_EPOCH, codec.pack_epoch(c.log_epoch)),
            (APPLIED, c.applied)]
        try:
            with self._db:
                db = self._db
                if c.reset:
                    db.execute("DELETE FROM records")
                    db.execute("DELETE FROM meta WHERE key = ?", (CHECKPOINT,))
                if c.checkpoint is not None:
                    meta.append((CHECKPOINT, codec.pack_snapshot(c.checkpoint)))
                if c.truncate_after is not None:
                    db.execute("DELETE FROM records WHERE lsn > ?", (c.truncate_after,))
                if c.records:
                    db.executemany("INSERT OR REPLACE INTO records VALUES (?, ?)",
                                   [(r.lsn, codec.pack_record(r)) for r in c.records])
                if c.drop_below:
                    db.execute("DELETE FROM records WHERE lsn < ?", (c.drop_below,))
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta)
        except sqlite3.Error as exc:
            raise self._fail("write", exc) from None

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()


def _epoch(value: object) -> Epoch:
    if value is None:
        return NO_EPOCH
    if not isinstance(value, bytes):
        raise DecodeError(f"stored epoch is {type(value).__name__}, not bytes")
    return codec.unpack_epoch(value)
