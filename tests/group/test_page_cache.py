"""What the log writes leaves the page cache (m2mc.store.page_cache): payload files
once synced, stream bodies as they are written, each but for its recent tail; and
every byte still reads back. Residency is measured with ``mincore``."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from pathlib import Path

import pytest

from m2mc.store import bodies as bodies_module
from m2mc.store import page_cache
from m2mc.store import payload_files as payload_files_module
from m2mc.store.bodies import BodyInfo, FileBodyStore
from m2mc.store.payload_files import PayloadFiles

BIG = 64 * 1024


def resident_bytes(path: Path) -> int:
    """How many bytes of ``path`` are in the page cache (mincore on a mapping that
    is never touched, so asking does not read anything in)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    page = os.sysconf("SC_PAGE_SIZE")
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value)
        pages = ctypes.create_string_buffer((size + page - 1) // page)
        try:
            assert libc.mincore(address, size, pages) == 0, ctypes.get_errno()
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)
    return page * sum(b & 1 for b in pages.raw)


@pytest.fixture
def droppable(tmp_path: Path) -> Path:
    """``tmp_path``, if its file system drops synced pages when asked (tmpfs cannot)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "posix_fadvise"):
        pytest.skip("page-cache advice is Linux's")
    probe = tmp_path / "probe"
    probe.write_bytes(b"x" * (1 << 20))
    fd = os.open(probe, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    if resident_bytes(probe) > 64 * 1024:
        pytest.skip("this file system keeps its pages in memory")
    probe.unlink()
    return tmp_path


def test_synced_payloads_leave_the_page_cache_but_the_recent_tail(
        droppable: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log that writes payloads faster than anyone reads them back does not fill the
    machine's memory: once synced, all but the current segment's last CACHED_TAIL
    bytes are dropped from the page cache, and every payload still reads back."""
    monkeypatch.setattr(page_cache, "CACHED_TAIL", 4 * BIG)
    monkeypatch.setattr(payload_files_module, "SEGMENT_BYTES", 20 * BIG)
    files = PayloadFiles(droppable / "p", defer_sync=True)
    payloads = [os.urandom(BIG) for _ in range(30)]
    refs = [files.write(p) for p in payloads]
    first, current = droppable / "p" / "00000001.seg", droppable / "p" / "00000002.seg"
    assert files.current == 2
    # Written, not yet synced: dirty pages, all in memory (nothing is lost or dropped).
    assert resident_bytes(first) == 20 * BIG and resident_bytes(current) == 10 * BIG
    files.sync()
    assert resident_bytes(first) == 0  # closed and synced: dropped whole
    assert resident_bytes(current) == 4 * BIG  # the recent tail stays for repairs
    assert [files.read(r) for r in refs] == payloads  # read back from the disk
    files.close()


def test_a_segment_shorter_than_the_tail_stays_in_the_cache(droppable: Path) -> None:
    files = PayloadFiles(droppable / "p")
    ref = files.write(b"z" * BIG)
    files.sync()
    assert resident_bytes(droppable / "p" / "00000001.seg") == BIG
    assert files.read(ref) == b"z" * BIG
    files.close()


def test_a_segment_closed_after_its_sync_leaves_the_cache_whole(
        droppable: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_cache, "CACHED_TAIL", 4 * BIG)
    monkeypatch.setattr(payload_files_module, "SEGMENT_BYTES", 20 * BIG)
    files = PayloadFiles(droppable / "p", defer_sync=True)
    refs = [files.write(bytes([i]) * BIG) for i in range(20)]
    files.sync()
    first = droppable / "p" / "00000001.seg"
    assert resident_bytes(first) == 4 * BIG
    refs.append(files.write(b"n" * BIG))  # the next segment begins; the first was synced
    assert files.current == 2 and resident_bytes(first) == 0
    assert [files.read(r) for r in refs] == [bytes([i]) * BIG for i in range(20)] + [b"n" * BIG]
    files.close()


def test_a_stream_body_leaves_the_cache_as_it_is_written(
        droppable: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A body is not synced; every ADVISE_EVERY bytes the store asks the kernel to
    write what it holds and drops what was written, so a long stream keeps about
    CACHED_TAIL plus what is still being written, not the whole body."""
    monkeypatch.setattr(page_cache, "CACHED_TAIL", 4 * BIG)
    monkeypatch.setattr(bodies_module, "ADVISE_EVERY", 8 * BIG)
    store = FileBodyStore(droppable / "bodies", limit=1 << 30)
    key = ("g", "a", 1)
    chunks = [os.urandom(BIG) for _ in range(24)]
    for i, chunk in enumerate(chunks[:16]):
        assert store.write(key, i * BIG, chunk)
    part = droppable / "bodies" / next(p.name for p in (droppable / "bodies").iterdir())
    fd = os.open(part, os.O_RDONLY)
    os.fsync(fd)  # (what the kernel would write by itself, soon)
    os.close(fd)
    for i, chunk in enumerate(chunks[16:], start=16):
        assert store.write(key, i * BIG, chunk)
    # Dropped: the first 16 chunks, written to the disk. Kept: at least the tail.
    assert 4 * BIG <= resident_bytes(part) <= 8 * BIG
    assert store.read(key, 0, 24 * BIG) == b"".join(chunks)
    store.finish(key, BodyInfo(24 * BIG, b"\0" * 32, BIG))
    assert store.read(key, 3 * BIG, BIG) == chunks[3]
    store.close()


def test_a_short_body_is_never_advised(droppable: Path) -> None:
    store = FileBodyStore(droppable / "bodies", limit=1 << 30)
    key = ("g", "a", 1)
    assert store.write(key, 0, b"s" * BIG)
    part = next((droppable / "bodies").iterdir())
    assert resident_bytes(part) == BIG
    store.close()
