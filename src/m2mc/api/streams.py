"""Group messages of any size as streams, in the application API (docs/api.md,
"Messages of any size"; the protocol: docs/group.md section 12).

    mid = await group.send_stream(open("video.mkv", "rb"), reply_to=question)
    async for message in group:
        if message.is_stream:
            async for piece in group.stream(message):    # StreamReader
                sink.write(piece)

:mod:`m2mc.api` re-exports :class:`StreamReader` and :class:`StreamError`; the ad
hoc group handle (:class:`~m2mc.api.adhoc.AdhocGroup`) calls :func:`send_stream` and
makes readers, both through its node's :class:`StreamPort` (this module knows no
node class).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from m2mc.api.message import GroupMessage, ReplyTo, _parent
from m2mc.errors import DecodeError, M2MCError, UsageError
from m2mc.group.backlog import must_wait
from m2mc.group.stream_codec import decode_descriptor
from m2mc.ordering import MessageId
from m2mc.store.bodies import FileBodyStore

if TYPE_CHECKING:
    from m2mc.group.manager import GroupNode

__all__ = ["READ_PIECE", "StreamError", "StreamPort", "StreamReader", "open_body_store",
           "send_stream"]

READ_PIECE = 1 << 20  # a reader gets at most this many bytes at a time
Source = bytes | bytearray | memoryview | AsyncIterable[bytes] | Iterable[bytes] | Any


class StreamError(M2MCError):
    """A streamed message's body will never be complete here: ``reason`` is
    ``timeout`` (no progress for ``stream_timeout``: its sender and every holder gone
    or cut off), ``aborted`` (its sender gave up), ``corrupt`` (its size or SHA-256
    disagree with its chunks), ``malformed``, ``store_full`` (larger than
    ``stream_store_bytes``), ``busy`` (``max_streams`` bodies being received) or
    ``gone`` (evicted from the body store while being read)."""

    def __init__(self, mid: MessageId, reason: str) -> None:
        super().__init__(f"stream {mid} failed: {reason}")
        self.mid = mid
        self.reason = reason


@dataclass(frozen=True, slots=True)
class StreamPort:
    """What streaming needs of its ad hoc node, which builds this port of its own
    calls: the running stack (``UsageError`` when it is not), its driver's clock,
    the driver's backlog, waiting for room to send, the driver's two pokes (now, and
    once this loop iteration is over), waiting for news of a body (``StreamUpdate``,
    by ``(gid, pid, seq)``; ``UsageError`` once the node closed), and whether the
    node has closed."""

    stack: Callable[[], GroupNode]
    now: Callable[[], float]
    backlog: Callable[[], int]
    room_for: Callable[[int], Awaitable[None]]
    poke: Callable[[], None]
    poke_soon: Callable[[], None]
    wait_news: Callable[[tuple[str, str, int]], Awaitable[None]]
    closed: Callable[[], bool]


def open_body_store(data_dir: str | Path | None, limit: int) -> tuple[FileBodyStore, Any]:
    """The body store of a node: ``<data_dir>/streams``, or a private temporary
    directory removed at close; returns the store and what to call at close."""
    if data_dir is not None:
        store = FileBodyStore(Path(data_dir) / "streams", limit)
        return store, store.close
    directory = tempfile.mkdtemp(prefix="m2mc-streams-")
    store = FileBodyStore(directory, limit)

    def close() -> None:
        store.close()
        shutil.rmtree(directory, ignore_errors=True)

    return store, close


async def send_stream(port: StreamPort, gid: str, source: Source, reply_to: ReplyTo = None,
                      size: int | None = None) -> MessageId:
    """:meth:`m2mc.api.Group.send_stream` of group ``gid``."""
    stack = port.stack()
    parent = reply_to if type(reply_to) is MessageId else _parent(reply_to)
    if size is not None and size < 0:
        raise UsageError(f"size must be >= 0, got {size}")
    if must_wait(stack, 64) or port.backlog():
        await port.room_for(64)
    streams = stack.streams
    mid = streams.open(gid, port.now(), parent, size)
    port.poke()  # the head is logged and queued before any of the body
    chunk = stack.config.stream_chunk_bytes
    key = (gid, mid.pid, mid.seq)
    try:
        async for piece in _pieces(source, chunk):
            if must_wait(stack, len(piece)) or port.backlog():
                await port.room_for(len(piece))
            while streams.paced(gid, mid, port.now()):  # the receivers are a window behind
                port.poke_soon()  # (the core's timer: when a silent one is left out)
                await port.wait_news(key)
            streams.write(gid, mid, piece, port.now())
            port.poke_soon()
        while streams.paced(gid, mid, port.now()):  # the last chunk too
            port.poke_soon()
            await port.wait_news(key)
        streams.close(gid, mid, port.now())
    except BaseException:
        if not port.closed():
            streams.abort(gid, mid, port.now())
            port.poke_soon()
        raise
    port.poke()
    return mid


async def _pieces(source: Source, most: int) -> AsyncIterator[bytes]:
    """``source``'s bytes in pieces of at most ``most``: bytes, a binary file (read
    here, so a pipe or socket that may keep us waiting is better given as an async
    iterable), an async iterable or an iterable of bytes."""
    if isinstance(source, bytes | bytearray | memoryview):
        view = memoryview(source)
        for start in range(0, len(view), most):
            yield bytes(view[start:start + most])
        return
    if isinstance(source, str):
        raise UsageError("send_stream takes bytes, a binary file or an iterable of bytes, "
                         "not str")
    read = getattr(source, "read", None)
    if callable(read):
        while piece := read(most):
            yield _checked(piece)
        return
    if isinstance(source, AsyncIterable):
        async for piece in source:
            for start in range(0, len(piece), most):
                yield _checked(piece[start:start + most])
        return
    if isinstance(source, Iterable):
        for piece in cast(Iterable[Any], source):
            for start in range(0, len(piece), most):
                yield _checked(piece[start:start + most])
        return
    raise UsageError(f"send_stream cannot read a {type(source).__name__}")


def _checked(piece: Any) -> bytes:
    if not isinstance(piece, bytes | bytearray | memoryview):
        raise UsageError(f"a stream's pieces are bytes, not {type(piece).__name__}")
    return bytes(piece)


class StreamReader:
    """The body of a streamed message, read in order as it arrives: ``async for piece
    in reader`` (pieces of at most 1 MiB) or ``await reader.read()``. Ends when the body
    is complete and checked (its size and SHA-256); raises :class:`StreamError` if it
    will never be."""

    def __init__(self, port: StreamPort, gid: str, message: GroupMessage) -> None:
        try:
            descriptor = decode_descriptor(message.data)
        except DecodeError:
            raise UsageError(f"message {message.mid} is not a stream") from None
        self.gid = gid
        self.mid = message.mid
        self.size_hint = descriptor.size  # the sender's word at the start, if it knew
        self.offset = 0  # bytes handed out so far
        self._port = port
        self._head = message.data
        self._asked = False

    def __aiter__(self) -> StreamReader:
        return self

    async def __anext__(self) -> bytes:
        port = self._port
        key = (self.gid, self.mid.pid, self.mid.seq)
        while True:
            streams = port.stack().streams
            status = streams.status(self.gid, self.mid)
            if self.offset < status.available:
                want = min(status.available - self.offset, READ_PIECE)
                piece = streams.store.read(key, self.offset, want)
                if not piece:
                    raise StreamError(self.mid, "gone")
                self.offset += len(piece)
                return piece
            if status.done:
                raise StopAsyncIteration
            if status.error is not None:
                raise StreamError(self.mid, status.error)
            if not self._asked:  # not held here and not arriving: fetch it
                self._asked = True
                streams.want(self.gid, self.mid, self._head, port.now())
                port.poke()
                continue
            await port.wait_news(key)

    async def read(self) -> bytes:
        """The rest of the body, whole (for bodies known to fit in memory)."""
        return b"".join([piece async for piece in self])


async def wait_for_update(waiters: dict[Any, list[asyncio.Future[None]]], key: Any) -> None:
    future = asyncio.get_running_loop().create_future()
    waiters.setdefault(key, []).append(future)
    await future
