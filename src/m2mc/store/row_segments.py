"""Large values of a SQLite table's rows, kept once in segment files beside the log.

The infrastructure stores (a host's records, a member's pending messages:
m2mc.infra_runtime) keep a value of their own bound's size or more out of its row, in
a :class:`~m2mc.store.payload_files.PayloadFiles` segment, and the row keeps where it is
as JSON text (``[segment, offset, length, crc32]``, the store's ``ref`` column).
:class:`RowSegments` is that part of such a store: it writes and reads the values,
counts the rows each segment holds by the rows' integer keys, and deletes the
segments below the oldest one a row still refers to. When the values must be on the
disk, and when a deletion may run, is the store's to say (its sync mode, its
checkpoint thread): see each method.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from m2mc.store.payload_files import PayloadFiles, reference_of, segment_of

__all__ = ["RowSegments"]


class RowSegments:
    """The segments of one table's large values, in ``directory`` (made when the first
    one is written). ``defer_sync``: segments closed on the way are synced by
    :meth:`sync` (the store's checkpoint thread, or its commit) rather than at once.
    ``segment_bytes``: where a segment is closed (None: PayloadFiles' own).
    ``never_sync``: nothing is ever synced (PayloadFiles says how)."""

    def __init__(self, directory: Path, *, defer_sync: bool,
                 segment_bytes: int | None = None, never_sync: bool = False) -> None:
        self.directory = directory
        self._defer_sync = defer_sync
        self._segment_bytes = segment_bytes
        self._never_sync = never_sync
        self._files: PayloadFiles | None = None
        self._in_segment: dict[int, int] = {}  # row key -> segment of its value
        self._segment_rows: Counter[int] = Counter()  # segment -> rows with a value in it
        self._lowest_kept = 0  # segments below this one were handed to remove_below

    def _payload_files(self) -> PayloadFiles:
        files = self._files
        if files is None:
            files = self._files = PayloadFiles(self.directory, defer_sync=self._defer_sync,
                                               segment_bytes=self._segment_bytes,
                                               never_sync=self._never_sync)
        return files

    # ------------------------------------------------------------------ values
    def write(self, value: bytes) -> str:
        """Append ``value`` (before the commit of the row that will refer to it); its
        reference, to keep in the row (OSError if the disk refuses)."""
        return json.dumps(self._payload_files().write(value))

    def read(self, ref: str) -> bytes | None:
        """The value ``ref`` names, or None if it cannot be read back whole and intact."""
        return self._payload_files().read(reference_of(ref))

    # ------------------------------------------------------------------ rows
    def track(self, key: int, ref: object) -> None:
        """Row ``key`` now refers to ``ref`` (None: it keeps its value itself, or it is
        gone). Called for every row the store writes or deletes, once it is committed,
        and for every row with a reference when the store opens."""
        old = self._in_segment.pop(key, None)
        if old is not None:
            self._segment_rows[old] -= 1
            if not self._segment_rows[old]:
                del self._segment_rows[old]
        segment = segment_of(ref)
        if segment is not None:
            self._in_segment[key] = segment
            self._segment_rows[segment] += 1

    def untrack_all(self) -> None:
        """Every row is gone (a table emptied)."""
        self._in_segment.clear()
        self._segment_rows.clear()

    def tracks_any(self) -> bool:
        return bool(self._in_segment)

    # ------------------------------------------------------------------ the disk
    def sync(self) -> None:
        """Make every value written so far durable. Safe from another thread."""
        if self._files is not None:
            self._files.sync()

    def release(self, now: bool) -> None:
        """After a commit: hand the segments below the oldest one a row refers to over
        for deletion, and delete them ``now`` (the commit is as durable as it will
        get) or at the next :meth:`remove_scheduled` (after a checkpoint)."""
        files = self._files
        if files is None:
            return
        lowest = min(self._segment_rows, default=files.current)
        if lowest > self._lowest_kept:
            self._lowest_kept = lowest
            files.remove_below(lowest)
            if now:
                files.remove_scheduled()

    def remove_scheduled(self) -> None:
        """Delete what :meth:`release` handed over. Safe from another thread."""
        if self._files is not None:
            self._files.remove_scheduled()

    def close(self, *, sync: bool) -> None:
        """Close the files, syncing them first if ``sync``. :meth:`remove_scheduled`
        still works after it (the store calls it once its last checkpoint ran: the
        close of its connection)."""
        if self._files is not None:
            self._files.close(sync=sync)
