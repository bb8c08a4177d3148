"""WAL checkpoints of a :class:`~m2mc.store.sqlite.SqliteStore` on a thread of their own.

A checkpoint copies the write-ahead log into the database file and syncs it to disk.
Run by the connection that commits (SQLite's automatic checkpoint, every
``wal_autocheckpoint`` pages of log), it blocks the node's event loop for as long as
the disk takes: measured 2026-11-26 at 20 to 50 ms about every second for a sender
of 40,000 messages/s, and every message sent or delivered in that time waited with it
(the p99 latency of bench/peers.py).

Here a thread runs a ``PASSIVE`` checkpoint on a connection of its own every
``every_commits`` commits or ``every_bytes`` bytes of rows written, whichever comes
first: SQLite lets it copy the log while the node goes on appending to it, and
Python's sqlite3 releases the GIL while SQLite works, so the node's thread does not
wait for the disk. The committing connection keeps its automatic checkpoint: a log
that is always being appended to is never copied to its end by a concurrent
checkpoint, and only a checkpoint between two commits lets the next one start the
log over, which bounds its size. That one now finds the log
copied but for its last pages, so it is short.

Bytes as well as commits: with 64 KiB messages, about one per commit, 256 commits
are 16 MiB of log, copied and synced at once; the node's own writes waited behind
such syncs, and the p99 latency of bench/peers.py at 64 KiB was 65 to 94 ms. Woken
every 512 KiB it is 5 to 10 ms (docs/decisions.md, "The durable log is
checkpointed by a thread of its own").

The committing connection's own checkpoint, which could start the log over, gives up
whenever it finds the thread's running, and a writer that commits faster than the disk
takes the copies (a member committing 64 KiB messages in a loop, with
``synchronous=NORMAL``: 2,000 of them in 1.2 s) keeps the thread busy back to back: its
log reached 17.6 to 59 MB against a bound of 4 MiB. So once the log has grown past
twice ``log_bound`` bytes, :meth:`committed` (which the store calls after each commit
of ``writer``, its own connection) has that connection run a ``RESTART`` checkpoint: it waits for
the thread's copy, copies what is left and lets the next commit start the log over. The
writer then pays for the copy, as it would without the thread, but only when it has
outrun the thread (``restarts`` counts those times; docs/decisions.md, "A host's log is
checkpointed by a thread").

``before``, if given, runs on the thread before each checkpoint: the store syncs
its payload files there (m2mc.store.payload_files), so they are on the disk no
later than the log rows that refer to them. Their bytes are counted apart, and wake
the thread every 4 MiB (``EVERY_PAYLOAD_BYTES``): a sync every 512 KiB of them was
9% of a receiver's CPU at 64 KiB per message, and a payload file's sync holds up no
commit (docs/decisions.md, "Payload files are synced every 4 MiB"). ``after`` runs
after each checkpoint, where the store deletes the payload files that a now durable
commit stopped referring to. An error in either counts as a failed checkpoint.

Nothing about durability changes: a commit is durable in the log whether or not a
checkpoint has copied it yet, and a log left behind by a crash is replayed when the
file is next opened.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["AUTOCHECKPOINT_BYTES", "EVERY_PAYLOAD_BYTES", "THREAD_AUTOCHECKPOINT_BYTES",
           "Checkpointer", "bound_log"]

# Payload files are synced with the checkpoint they precede; see the module text.
EVERY_PAYLOAD_BYTES = 4 << 20
# Bytes of log before a commit checkpoints it itself (and so the log's size, which
# starts over only after such a checkpoint): a store without the checkpoint thread
# (tools) pays the whole copy and sync then, so seldom; with the thread (every node
# and host) little is left to copy, and the bound is what a laptop's disk keeps
# (docs/decisions.md, "A node's write-ahead log is bounded at 4 MiB").
AUTOCHECKPOINT_BYTES = 32 << 20
THREAD_AUTOCHECKPOINT_BYTES = 4 << 20

_log = logging.getLogger(__name__)


def bound_log(db: sqlite3.Connection, checkpoint_thread: bool,
              pages: int | None = None) -> int:
    """Set when ``db``'s own commits checkpoint the log (``pages`` of the file's page
    size, else :data:`THREAD_AUTOCHECKPOINT_BYTES` with the thread and
    :data:`AUTOCHECKPOINT_BYTES` without), and cut a log that a burst grew past that
    back to it when the log starts over (``journal_size_limit``). Returns that bound in
    bytes (a :class:`Checkpointer`'s ``log_bound``)."""
    page = db.execute("PRAGMA page_size").fetchone()[0]
    if pages is None:
        pages = (THREAD_AUTOCHECKPOINT_BYTES if checkpoint_thread else AUTOCHECKPOINT_BYTES) // page
    db.execute(f"PRAGMA wal_autocheckpoint={pages}")
    db.execute(f"PRAGMA journal_size_limit={pages * page}")
    return int(pages * page)


class Checkpointer:
    """One thread that checkpoints ``path``'s log when :meth:`committed` has been
    called ``every_commits`` times, or told of ``every_bytes`` bytes of rows or
    ``every_payload_bytes`` bytes of payload files written, since the thread was last
    woken. :meth:`close` stops it."""

    def __init__(self, path: Path, every_commits: int = 256,
                 every_bytes: int = 1 << 19,
                 before: Callable[[], None] | None = None,
                 after: Callable[[], None] | None = None,
                 every_payload_bytes: int = EVERY_PAYLOAD_BYTES,
                 log_bound: int = THREAD_AUTOCHECKPOINT_BYTES,
                 writer: sqlite3.Connection | None = None) -> None:
        for name, value in (("every_commits", every_commits), ("every_bytes", every_bytes),
                            ("every_payload_bytes", every_payload_bytes)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.path = path
        self._before = before  # run on the thread before each checkpoint
        self._after = after  # and after each one that succeeded
        self.every_commits = every_commits
        self.every_bytes = every_bytes
        self.every_payload_bytes = every_payload_bytes
        self.checkpoints = 0  # checkpoints run (read by tests and stats)
        self.restarts = 0  # RESTART checkpoints the writer ran: the log passed 2 x log_bound
        self.errors = 0
        self._wal = path.with_name(path.name + "-wal")
        self._copying = threading.Lock()  # held by whichever connection checkpoints
        self._restart_past = 2 * log_bound
        self._writer = writer  # the store's connection (None: nobody copies past the bound)
        self._since = 0  # commits since the thread was last woken
        self._since_bytes = 0  # and bytes of rows written by them
        self._since_payload = 0  # and of payload files
        self._wake = threading.Condition()
        self._wanted = 0  # checkpoints asked for (the thread catches up to it)
        self._done = 0  # the value of _wanted when the thread last started one
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=f"m2mc-checkpoint {path.name}",
                                        daemon=True)
        self._thread.start()

    def committed(self, written: int = 0, payload: int = 0) -> None:
        """Called after each commit of the store's own connection (its hot path), with
        about how many bytes of rows it wrote, and how many of payload files before it;
        copies the log on that connection if it outran the thread (module text)."""
        if self._writer is not None:
            self._restart_if_overgrown(self._writer)
        self._since += 1
        self._since_bytes += written
        self._since_payload += payload
        if (self._since >= self.every_commits or self._since_bytes >= self.every_bytes
                or self._since_payload >= self.every_payload_bytes):
            self._since = self._since_bytes = self._since_payload = 0
            self.request()

    def request(self) -> None:
        """Ask for a checkpoint now (it runs on the thread; this does not wait)."""
        with self._wake:
            self._wanted += 1
            self._wake.notify()

    def wait_for(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` checkpoints have run (tests); False at ``timeout``."""
        with self._wake:
            return self._wake.wait_for(lambda: self.checkpoints >= count, timeout)

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify_all()
        self._thread.join()

    def _restart_if_overgrown(self, db: sqlite3.Connection) -> None:
        """After a commit on ``db`` (the store's own connection, on the store's thread):
        if the log has grown past twice ``log_bound``, copy it whole and start it over
        now (see the module text). A checkpoint that fails is counted (``errors``), as
        the thread's are: the commit it follows is on disk all the same."""
        try:
            if self._wal.stat().st_size <= self._restart_past:
                return
            # SQLite answers "busy" at once, without waiting, to a checkpoint asked
            # for while another connection's runs: wait for the thread's here.
            with self._copying:
                if self._before is not None:  # (the payload files first, as the thread does)
                    self._before()
                db.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
        except (sqlite3.Error, OSError) as exc:
            self.errors += 1
            if self.errors == 1:
                _log.warning("checkpoint of %s failed: %s", self.path, exc)
            return
        self.restarts += 1

    def _woken(self) -> bool:
        return self._closing or self._wanted > self._done

    def _run(self) -> None:
        try:
            db = sqlite3.connect(str(self.path))
        except sqlite3.Error as exc:  # the store's own connection opened it: unlikely
            _log.warning("checkpoint thread cannot open %s: %s", self.path, exc)
            return
        try:
            while True:
                with self._wake:
                    self._wake.wait_for(self._woken)
                    if self._closing:
                        return
                    self._done = self._wanted
                try:
                    with self._copying:
                        if self._before is not None:
                            self._before()
                        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    if self._after is not None:
                        self._after()
                except (sqlite3.Error, OSError) as exc:
                    self.errors += 1
                    if self.errors == 1:
                        _log.warning("checkpoint of %s failed: %s", self.path, exc)
                with self._wake:
                    self.checkpoints += 1
                    self._wake.notify_all()
        finally:
            db.close()
