"""Keeping what a log writes out of the machine's memory (docs/decisions.md, "Payload
files leave the page cache once synced").

The payload files of the log and the bodies of streams are written far faster than
anyone reads them back (a repair, a catch-up, a reader of a stream that has fallen
behind), and the kernel would keep every byte in its page cache. Beyond the memory,
on a virtual machine each page the guest had not used before cost several times a
recycled one to write into. So what these files hold is dropped from the cache but
for the last :data:`CACHED_TAIL` bytes, which recent repairs and readers use.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["CACHED_TAIL", "drop_cached"]

CACHED_TAIL = 16 << 20  # bytes at the end of a file being written left in the page cache

_fadvise = getattr(os, "posix_fadvise", None)  # (not on every system: then nothing is dropped)


def drop_cached(fd: int, length: int) -> None:
    """Drop the first ``length`` bytes (0: all) of ``fd`` from the page cache. Pages
    not yet written to the disk stay (the kernel starts writing them); nothing is
    ever lost by it, only read from the disk again."""
    if _fadvise is not None:
        with contextlib.suppress(OSError):
            _fadvise(fd, 0, length, os.POSIX_FADV_DONTNEED)
