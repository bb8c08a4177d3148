"""Where a node keeps the bodies of streamed group messages (docs/group.md section 12).

The group log (SQLite or memory) keeps a streamed message's *head*, a record like
any other; its *body* can be any size, so it is kept beside the log, written at its
offset as chunks arrive (in any order) and read back to serve repairs and readers.
A :class:`BodyStore` is the narrow port the sans-IO core calls:

* :class:`FileBodyStore`: one file per body in a directory (``<data_dir>/streams``
  for a node with a durable log, a private temporary directory otherwise);
  ``.part`` while incomplete, ``.body`` plus ``.json`` (size, SHA-256, chunk size)
  once complete. A restarted node keeps the complete bodies and deletes the rest.
* :class:`MemoryBodyStore`: the same in memory (the simulator, tests).

A file body leaves the page cache as it is written, but for its last 16 MiB
(m2mc.store.page_cache): a 1 GiB stream would otherwise keep 1 GiB of the
machine's memory in every node that received it.

Both are bounded by ``limit`` bytes over all bodies, complete or not. A write that
would pass it first evicts complete bodies, oldest finished first; if that is not
enough the write is refused (the caller gives the stream up), so the bodies of
streams in progress are never evicted under their reader.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from m2mc.store import page_cache

__all__ = ["ADVISE_EVERY", "BodyInfo", "BodyStore", "FileBodyStore", "Key", "MemoryBodyStore"]

ADVISE_EVERY = 8 << 20  # bytes: how far a body grows between two drops from the page cache

Key = tuple[str, str, int]  # (group id, sender pid, seq): the message's identity


@dataclass(frozen=True, slots=True)
class BodyInfo:
    """A complete body: its size, SHA-256 and the chunk size it was sent in."""

    size: int
    sha256: bytes
    chunk_bytes: int


class BodyStore(Protocol):
    limit: int
    held_bytes: int  # bytes of every body held, complete or not
    evicted: int  # complete bodies evicted to make room

    def write(self, key: Key, offset: int, data: bytes) -> bool:
        """Put ``data`` at ``offset`` of the body of ``key``; False if the bound
        refuses it even after evicting every complete body."""
        ...

    def read(self, key: Key, offset: int, size: int) -> bytes | None:
        """Up to ``size`` bytes from ``offset``; None if this body is not held."""
        ...

    def finish(self, key: Key, info: BodyInfo) -> None: ...

    def info(self, key: Key) -> BodyInfo | None:
        """The description of a complete body held here, else None."""
        ...

    def drop(self, key: Key) -> None: ...

    def close(self) -> None: ...


class _Bounded:
    """The bound and the eviction order shared by both stores."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held_bytes = 0
        self.evicted = 0
        self._extent: dict[str, int] = {}  # name -> bytes held
        self._complete: OrderedDict[str, BodyInfo] = OrderedDict()  # oldest finished first

    def _room(self, name: str, end: int) -> bool:
        grow = end - self._extent.get(name, 0)
        if grow <= 0:
            return True
        while self.held_bytes + grow > self.limit:
            victim = next((n for n in self._complete if n != name), None)
            if victim is None:
                return False
            self._remove(victim)
            self.evicted += 1
        self._extent[name] = end
        self.held_bytes += grow
        return True

    def _forget(self, name: str) -> None:
        self.held_bytes -= self._extent.pop(name, 0)
        self._complete.pop(name, None)

    def _remove(self, name: str) -> None:
        raise NotImplementedError


def _name(key: Key) -> str:
    gid, pid, seq = key
    return hashlib.blake2b(f"{gid}\0{pid}\0{seq}".encode(), digest_size=16).hexdigest()


class MemoryBodyStore(_Bounded):
    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._bodies: dict[str, bytearray] = {}

    def write(self, key: Key, offset: int, data: bytes) -> bool:
        name = _name(key)
        if not self._room(name, offset + len(data)):
            return False
        body = self._bodies.setdefault(name, bytearray())
        if len(body) < offset:
            body.extend(bytes(offset - len(body)))
        body[offset:offset + len(data)] = data
        return True

    def read(self, key: Key, offset: int, size: int) -> bytes | None:
        body = self._bodies.get(_name(key))
        return None if body is None else bytes(body[offset:offset + size])

    def finish(self, key: Key, info: BodyInfo) -> None:
        name = _name(key)
        self._bodies.setdefault(name, bytearray())
        self._extent.setdefault(name, 0)
        self._complete[name] = info

    def info(self, key: Key) -> BodyInfo | None:
        return self._complete.get(_name(key))

    def drop(self, key: Key) -> None:
        self._remove(_name(key))

    def close(self) -> None:
        self._bodies.clear()

    def _remove(self, name: str) -> None:
        self._bodies.pop(name, None)
        self._forget(name)


class FileBodyStore(_Bounded):
    """Bodies as files in ``directory`` (created private to the user if missing)."""

    def __init__(self, directory: str | os.PathLike[str], limit: int) -> None:
        super().__init__(limit)
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._open: dict[str, int] = {}  # file descriptors of the bodies being written
        self._advised: dict[str, int] = {}  # body -> its end when last dropped from the cache
        for part in self.directory.glob("*.part"):  # a crash left them: never complete
            part.unlink(missing_ok=True)
        found = []
        for meta in self.directory.glob("*.json"):
            body = meta.with_suffix(".body")
            try:
                raw = json.loads(meta.read_text())
                info = BodyInfo(int(raw["size"]), bytes.fromhex(raw["sha256"]),
                                int(raw["chunk_bytes"]))
                found.append((body.stat().st_mtime, meta.stem, info))
            except (OSError, ValueError, KeyError, TypeError):
                meta.unlink(missing_ok=True)
                body.unlink(missing_ok=True)
        for _, name, info in sorted(found):
            self._complete[name] = info
            self._extent[name] = info.size
            self.held_bytes += info.size
        while self.held_bytes > self.limit and self._complete:  # a smaller bound than before
            self._remove(next(iter(self._complete)))
            self.evicted += 1

    def write(self, key: Key, offset: int, data: bytes) -> bool:
        name = _name(key)
        if not self._room(name, offset + len(data)):
            return False
        fd = self._open.get(name)
        if fd is None:
            fd = self._open[name] = os.open(self._path(name, ".part"),
                                            os.O_RDWR | os.O_CREAT, 0o600)
        os.pwrite(fd, data, offset)
        end = offset + len(data)
        if end >= self._advised.get(name, 0) + ADVISE_EVERY and end > page_cache.CACHED_TAIL:
            # Written pages go once the kernel has written them: a drop asks it to
            # start, and the next drop takes what it wrote meanwhile.
            self._advised[name] = end
            page_cache.drop_cached(fd, end - page_cache.CACHED_TAIL)
        return True

    def read(self, key: Key, offset: int, size: int) -> bytes | None:
        name = _name(key)
        fd = self._open.get(name)
        if fd is not None:
            return os.pread(fd, size, offset)
        try:
            with open(self._path(name, ".body"), "rb") as body:
                return os.pread(body.fileno(), size, offset)
        except OSError:
            return None

    def finish(self, key: Key, info: BodyInfo) -> None:
        name = _name(key)
        fd = self._open.pop(name, None)
        part = self._path(name, ".part")
        self._advised.pop(name, None)
        if fd is not None:
            os.close(fd)
        else:
            part.touch()  # an empty body: never written
        part.replace(self._path(name, ".body"))
        self._path(name, ".json").write_text(json.dumps(
            {"size": info.size, "sha256": info.sha256.hex(), "chunk_bytes": info.chunk_bytes}))
        self._extent.setdefault(name, 0)
        self._complete[name] = info

    def info(self, key: Key) -> BodyInfo | None:
        return self._complete.get(_name(key))

    def drop(self, key: Key) -> None:
        self._remove(_name(key))

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()

    def _remove(self, name: str) -> None:
        fd = self._open.pop(name, None)
        self._advised.pop(name, None)
        if fd is not None:
            os.close(fd)
        for suffix in (".part", ".body", ".json"):
            with contextlib.suppress(OSError):
                self._path(name, suffix).unlink()
        self._forget(name)

    def _path(self, name: str, suffix: str) -> Path:
        return self.directory / (name + suffix)
