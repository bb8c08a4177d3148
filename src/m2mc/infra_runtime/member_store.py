"""The durable :class:`~m2mc.infra.persist.MemberStore` of an infrastructure-mode
member: one SQLite file (``<data_dir>/infra-member.sqlite3``), WAL mode.

``meta`` holds the process id, the message numbering (``app_seq``), the membership
(JSON, :func:`~m2mc.infra.persist.encode_membership`), the trace lines of the last
commit and the clean-close mark; ``pending`` holds the own messages not yet seen in
the total order. Each :meth:`SqliteMemberStore.commit` is one transaction. As in
:class:`~m2mc.store.sqlite.SqliteStore`, ``synchronous=NORMAL`` keeps every
committed transaction across a process crash (``kill -9``); only an operating
system crash may lose the last ones. ``checkpoint_thread`` (a real member; not the
simulator's) copies the log into the database on a thread of its own, as a host's
store does (m2mc.infra_runtime.host_store), so that a commit on the member's event
loop never carries the copy and its sync: a sender of 64,000-byte messages keeps each
in ``pending`` until it is ordered, about 4 MiB of log every 60 messages.

**Large bodies beside the log.** A pending body of :data:`LARGE_BODY` bytes or more
is not written into its row, where SQLite would write it twice (log, then database)
over a chain of pages, but appended once to a segment of
:class:`~m2mc.store.payload_files.PayloadFiles` in ``<file>-payloads``; the row's
``ref`` holds ``[segment, offset, length, crc32]`` and its ``body`` is empty. The
bytes are written before the commit of the row, so a process that dies keeps both;
the checkpoint thread syncs the segments before each checkpoint, so they are on the
disk no later than the rows that reach the database. A body an operating-system
crash took while its row survived reads back as ``None``, and
:func:`~m2mc.infra.persist.decode_saved` then joins afresh with the rest (a lost
body would leave a gap in the member's NEWs). A segment goes once no pending row
refers to it (docs/decisions.md, "A member's own large messages wait beside its
log"). Segments are :data:`SEGMENT_BYTES`: pending messages live for a round trip to
the hosts, so a small segment gives its space back soon.

Values are read back as stored and checked by
:func:`~m2mc.infra.persist.decode_saved`; a file SQLite cannot read raises
:class:`~m2mc.errors.SavedStateError`.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from m2mc.errors import SavedStateError
from m2mc.infra.persist import MemberCommit, StoredMember
from m2mc.store.checkpointer import Checkpointer, bound_log
from m2mc.store.payload_files import LARGE_PAYLOAD
from m2mc.store.row_segments import RowSegments

FILE_NAME = "infra-member.sqlite3"
PID, APP_SEQ, MEMBERSHIP = "pid", "app_seq", "membership"
TRACE_BATCH = "trace/last-batch"  # the trace lines of the last commit (runtime/tracing.py)
CLEAN_CLOSE = "clean-close"  # "1" once the node closed after its last commit
LARGE_BODY = LARGE_PAYLOAD  # bytes: a pending body this large goes to a segment
SEGMENT_BYTES = 8 << 20  # a segment of pending bodies this large is closed

# ``ref``: where a large body is (JSON ``[segment, offset, length, crc32]``), or NULL.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS pending (
    app_seq INTEGER PRIMARY KEY, nseq INTEGER NOT NULL, body BLOB NOT NULL,
    grp TEXT NOT NULL DEFAULT '', kind INTEGER NOT NULL DEFAULT 0, ref TEXT);
"""


class SqliteMemberStore:
    """A member's saved state in ``path`` (created if absent)."""

    def __init__(self, path: str | Path, *, checkpoint_thread: bool = False) -> None:
        self.path = Path(path)
        self._checkpointer: Checkpointer | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path))
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if checkpoint_thread:
                bound_log(self._db, True)
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(pending)")}
            if "grp" not in columns:  # a file of one group per deployment: its own group
                self._db.execute("ALTER TABLE pending ADD COLUMN grp TEXT NOT NULL DEFAULT ''")
                self._db.execute("ALTER TABLE pending ADD COLUMN kind INTEGER NOT NULL "
                                 "DEFAULT 0")
            if "ref" not in columns:  # a file of an earlier version: bodies in their rows
                self._db.execute("ALTER TABLE pending ADD COLUMN ref TEXT")
            self._db.commit()
            # The bodies beside the log, and which segment holds whose, so that a
            # segment goes once none is left in it (whether or not load() is called).
            self._segments = RowSegments(self.path.with_name(self.path.name + "-payloads"),
                                         defer_sync=checkpoint_thread,
                                         segment_bytes=SEGMENT_BYTES)
            for app_seq, ref in self._db.execute(
                    "SELECT app_seq, ref FROM pending WHERE ref IS NOT NULL"):
                self._segments.track(app_seq, ref)
        except (sqlite3.Error, OSError) as exc:
            raise SavedStateError(f"cannot open the saved member state {self.path}: {exc}; "
                                  "move the file away to start afresh (with a new pid, "
                                  "or message ids may be reused)") from None
        if checkpoint_thread:  # (the segments are synced before each checkpoint)
            self._checkpointer = Checkpointer(self.path, writer=self._db,
                                              before=self._segments.sync,
                                              after=self._segments.remove_scheduled)

    def _body_of(self, body: object, ref: str | None) -> object:
        """A row's body: its own, or read back from its segment (None if it cannot
        be: the bytes an operating-system crash took)."""
        return body if ref is None else self._segments.read(ref)

    def _fail(self, what: str, exc: Exception) -> SavedStateError:
        return SavedStateError(f"cannot {what} the saved member state {self.path}: {exc}")

    def get_meta(self, key: str) -> object:
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            raise self._fail("read", exc) from None
        return None if row is None else row[0]

    def set_meta(self, key: str, value: object) -> None:
        """Set one meta value and commit at once."""
        try:
            with self._db:
                self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
        except sqlite3.Error as exc:
            raise self._fail("write", exc) from None

    def text_meta(self, key: str) -> str | None:
        value = self.get_meta(key)
        return value if isinstance(value, str) else None

    def load(self) -> StoredMember | None:
        try:
            meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
            rows = self._db.execute(
                "SELECT app_seq, nseq, body, grp, kind, ref FROM pending ORDER BY app_seq"
            ).fetchall()
            rows = [(a, n, self._body_of(body, ref), g, k) for a, n, body, g, k, ref in rows]
        except (sqlite3.Error, OSError) as exc:
            raise self._fail("read", exc) from None
        if APP_SEQ not in meta and MEMBERSHIP not in meta and not rows:
            return None  # nothing was ever saved
        pid = meta.get(PID)
        membership = meta.get(MEMBERSHIP)
        return StoredMember(pid if isinstance(pid, str) else "", meta.get(APP_SEQ),
                            membership if isinstance(membership, str) else None,
                            tuple(tuple(row) for row in rows))

    def commit(self, c: MemberCommit) -> None:
        meta = [(PID, c.pid), (APP_SEQ, c.app_seq), (MEMBERSHIP, c.membership)]
        if c.trace_batch is not None:
            meta.append((TRACE_BATCH, c.trace_batch))
        written = beside = 0
        rows: list[tuple[int, int, bytes, str, int, str | None]] = []
        try:
            for i in c.put:  # the large bodies first: written before the rows' commit
                if len(i.body) >= LARGE_BODY:
                    beside += len(i.body)
                    rows.append((i.app_seq, i.nseq, b"", i.group, i.kind,
                                 self._segments.write(i.body)))
                else:
                    written += len(i.body)
                    rows.append((i.app_seq, i.nseq, i.body, i.group, i.kind, None))
            with self._db:
                db = self._db
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta)
                if c.drop:
                    db.executemany("DELETE FROM pending WHERE app_seq = ?",
                                   [(a,) for a in c.drop])
                if rows:
                    db.executemany("INSERT OR REPLACE INTO pending VALUES (?, ?, ?, ?, ?, ?)",
                                   rows)
        except (sqlite3.Error, OSError) as exc:
            raise self._fail("write", exc) from None
        for a in c.drop:
            self._segments.track(a, None)
        for row in rows:
            self._segments.track(row[0], row[5])
        # Segments no pending row refers to go: at once without the thread, else once
        # a checkpoint made this commit durable.
        self._segments.release(now=self._checkpointer is None)
        if self._checkpointer is not None:
            self._checkpointer.committed(written, beside)

    def close(self) -> None:
        if self._checkpointer is not None:  # first: ours is then the last connection,
            self._checkpointer.close()  # whose close checkpoints what is left
            self._checkpointer = None
            threaded = True
        else:
            threaded = False
        self._segments.close(sync=True)  # (before the last checkpoint, the close's)
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        if threaded:
            with contextlib.suppress(OSError):
                self._segments.remove_scheduled()  # what waited for a checkpoint
