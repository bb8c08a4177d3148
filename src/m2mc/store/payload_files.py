"""Large payloads of the SQLite log, kept once in append-only files beside it.

SQLite writes each byte of a row twice, into its write-ahead log at the commit and
into the database at the next checkpoint, and splits a large row over a chain of
pages. For a 64 KiB message that was most of a node's CPU per message
(docs/decisions.md, "Large payloads beside the log"). So a payload of at least
:data:`LARGE_PAYLOAD` bytes is appended to a *segment* file in the directory
``<log file>-payloads`` (``00000001.seg``, ...: a new one past
:data:`SEGMENT_BYTES`), and its chunk record (m2mc.store.chunks) holds a
*reference* in its place, ``[segment, offset, length, crc32]``.

* **Order.** The payload is written (a plain ``write``, into the page cache)
  before the commit of the row that refers to it, so a process that dies never
  leaves a committed reference without its bytes. Against an operating-system
  crash, :meth:`PayloadFiles.sync` (the checkpoint thread calls it before each
  checkpoint, which is when SQLite syncs its log) makes the segments durable no
  later than the rows; a row that reaches the disk earlier anyway (the kernel
  writes pages back when it likes) and whose bytes did not is caught by the
  length and CRC-32 check on reading: :meth:`PayloadFiles.read` returns None and
  the log treats that message as one it does not have (counted, logged once), as
  it treats a row lost in such a crash.
* **Space.** A segment is deleted once no row refers to it any more and the
  commit that made it so is durable (:meth:`PayloadFiles.remove_below`: at the
  next checkpoint, after a retention pass). Retention writes the rows it keeps
  again (held messages), and copies their payloads into the current segment as
  it does, so old segments never stay for them.
* **Tail.** Bytes after the last committed reference (written just before a crash)
  are never read and go with their segment.
* **Page cache.** Once synced, a segment's bytes are dropped from the page cache
  (``posix_fadvise(DONTNEED)``) but for its last ``CACHED_TAIL`` bytes, which
  repairs of recent messages read (m2mc.store.page_cache).

Reading opens each segment once and keeps a few open (``pread``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

from m2mc.store import page_cache
from m2mc.store.crc import crc32

__all__ = ["LARGE_PAYLOAD", "SEGMENT_BYTES", "PayloadFiles", "is_reference", "reference_of",
           "segment_of"]

LARGE_PAYLOAD = 2048  # bytes: a payload this large or larger goes to a segment (half a page)
SEGMENT_BYTES = 64 << 20  # a segment this large is closed and the next one begun
OPEN_FOR_READING = 8  # segments kept open for reading at once
_SUFFIX = ".seg"

_log = logging.getLogger(__name__)


def is_reference(payload: object) -> bool:
    """True for a chunk record's payload that is a reference (not bytes, not None)."""
    return type(payload) is list


def reference_of(text: object) -> object:
    """A reference kept as JSON text (the infrastructure stores' ``ref`` column),
    decoded: whatever it holds, for :meth:`PayloadFiles.read` to check."""
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def segment_of(text: object) -> int | None:
    """The segment a reference kept as JSON text names (None if it names none)."""
    ref = reference_of(text)
    return ref[0] if isinstance(ref, list) and ref and type(ref[0]) is int else None


def _name(segment: int) -> str:
    return f"{segment:08d}{_SUFFIX}"


class PayloadFiles:
    """The segments of one log. ``defer_sync``: leave the syncs of closed segments to
    :meth:`sync` (a thread calls it) rather than doing them on the caller's thread.
    ``segment_bytes``: where a segment is closed, if not :data:`SEGMENT_BYTES` (a
    store whose payloads are short-lived frees its space sooner with smaller ones).
    ``never_sync``: nothing is ever synced (a store that promises nothing of the disk:
    the simulator's hosts); a closed segment is closed at once."""

    def __init__(self, directory: Path, *, defer_sync: bool = False,
                 segment_bytes: int | None = None, never_sync: bool = False) -> None:
        self.directory = directory
        self._segment_bytes = segment_bytes  # None: SEGMENT_BYTES (read when it is used)
        directory.mkdir(parents=True, exist_ok=True)
        numbers = self.segments()
        self.current = numbers[-1] if numbers else 1
        path = directory / _name(self.current)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._size = os.fstat(self._fd).st_size
        self._defer_sync = defer_sync
        self._never_sync = never_sync
        self._lock = threading.Lock()  # the write fd and the closed ones, against sync()
        self._unsynced: list[int] = []  # fds of closed segments not yet synced
        self._dirty = False  # the current segment was written since the last sync
        self._readers: OrderedDict[int, int] = OrderedDict()  # segment -> fd
        self._remove_below = 0  # segments below this one may be deleted
        self.removed = 0  # segments deleted
        self.unreadable = 0  # references whose bytes were missing or wrong

    def segments(self) -> list[int]:
        """The segment numbers present, in order."""
        found = []
        for entry in self.directory.iterdir():
            stem, suffix = entry.name[:-len(_SUFFIX)], entry.name[-len(_SUFFIX):]
            if suffix == _SUFFIX and stem.isdigit():
                found.append(int(stem))
        return sorted(found)

    # ------------------------------------------------------------------ writing
    def write(self, payload: bytes) -> list[int]:
        """Append ``payload``; return its reference (OSError if the disk refuses)."""
        if self._size >= (self._segment_bytes or SEGMENT_BYTES):
            self._next_segment()
        offset = self._size
        written = os.write(self._fd, payload)
        while written < len(payload):  # (a regular file takes it whole, but be exact)
            written += os.write(self._fd, memoryview(payload)[written:])
        self._size += written
        self._dirty = True
        return [self.current, offset, written, crc32(payload)]

    def _next_segment(self) -> None:
        fd = os.open(self.directory / _name(self.current + 1),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with self._lock:
            old, self._fd = self._fd, fd
            self.current += 1
            self._size = 0
            if self._dirty and not self._never_sync:
                self._unsynced.append(old)
                old = -1
            self._dirty = False
        if old != -1:  # (nothing written since its last sync, or nothing ever synced)
            page_cache.drop_cached(old, 0)
            os.close(old)
        elif not self._defer_sync:
            self.sync()

    def sync(self) -> None:
        """Make what was written so far durable (``fdatasync``); closed segments'
        descriptors are closed once synced. Safe from another thread, and the disk is
        waited for outside the lock, so a writer starting the next segment meanwhile
        does not wait (the current segment is synced through a duplicate descriptor)."""
        with self._lock:
            closed, self._unsynced = self._unsynced, []
            current = os.dup(self._fd) if self._dirty and self._fd >= 0 else -1
            synced = self._size  # (what the current segment holds now is what gets synced)
            self._dirty = False
        try:
            for fd in closed:
                with contextlib.suppress(OSError):
                    os.fdatasync(fd)
                    page_cache.drop_cached(fd, 0)
                os.close(fd)
            if current != -1:
                os.fdatasync(current)
                if synced > page_cache.CACHED_TAIL:
                    page_cache.drop_cached(current, synced - page_cache.CACHED_TAIL)
        finally:
            if current != -1:
                os.close(current)

    # ------------------------------------------------------------------ reading
    def read(self, ref: object) -> bytes | None:
        """The payload of ``ref``, or None if it cannot be read back whole and intact
        (a reference that is not one, a segment gone or short, a CRC mismatch)."""
        data: bytes | None = None
        length = crc = -1
        if type(ref) is list and len(ref) == 4 and all(type(v) is int for v in ref):
            segment, offset, length, crc = ref
            with contextlib.suppress(OSError, ValueError, OverflowError):
                fd = self._reader(segment)
                # (a length past the file's end is not read: nothing that big is allocated)
                if offset >= 0 and 0 <= length <= os.fstat(fd).st_size - offset:
                    data = os.pread(fd, length, offset)
        if data is None or len(data) != length or crc32(data) != crc:
            self.unreadable += 1
            if self.unreadable == 1:
                _log.warning("a payload in %s cannot be read back (%r); that message is "
                             "treated as not stored", self.directory, ref)
            return None
        return data

    def _reader(self, segment: int) -> int:
        readers = self._readers
        fd = readers.get(segment)
        if fd is not None:
            readers.move_to_end(segment)
            return fd
        fd = os.open(self.directory / _name(segment), os.O_RDONLY)
        readers[segment] = fd
        if len(readers) > OPEN_FOR_READING:
            os.close(readers.popitem(last=False)[1])
        return fd

    # ------------------------------------------------------------------- space
    def remove_below(self, segment: int) -> None:
        """Delete the segments numbered below ``segment`` (never the current one) once
        the commit that stopped referring to them is durable: at once without
        ``defer_sync``, else at the next :meth:`remove_scheduled` (the checkpoint
        thread calls it after a checkpoint, which synced the log)."""
        with self._lock:
            self._remove_below = max(self._remove_below, min(segment, self.current))
        if not self._defer_sync:
            self.remove_scheduled()

    def remove_scheduled(self) -> int:
        """Delete the segments :meth:`remove_below` scheduled; return how many went.
        Safe from another thread (a descriptor open for reading one stays valid)."""
        with self._lock:
            below = self._remove_below
        removed = 0
        for number in self.segments():
            if number >= below:
                break
            with contextlib.suppress(FileNotFoundError):
                (self.directory / _name(number)).unlink()
                removed += 1
        self.removed += removed
        return removed

    def close(self, sync: bool = True) -> None:
        """Sync (unless told not to: a store that promises nothing of the disk) and
        close everything."""
        if sync:
            with contextlib.suppress(OSError):
                self.sync()
        with self._lock:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
        for fd in self._readers.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._readers.clear()
