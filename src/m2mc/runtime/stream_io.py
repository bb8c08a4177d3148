"""Messages written and read in pieces on an :class:`~m2mc.runtime.endpoint.M2MPEndpoint`
(seeds/002 section 4: ``createOutgoingMessage`` gives an output stream,
``acceptIncomingMessage`` an input stream).

    async with ep.open_message() as out:        # OutgoingMessage
        await out.write(b"first bytes")
        await out.write(more)                    # waits while the send queue is full
    incoming = await ep.accept()                 # IncomingMessage (whole or streamed)
    async for piece in incoming: ...             # MessageAbandonedError if given up

An endpoint reads messages as streams when ``M2MPConfig.stream_threshold`` is set;
messages shorter than it come whole, as one piece. What waits for the reader is
bounded: ``max_buffer`` bytes of pieces over all incoming messages not read yet
(accepted or not). A message whose next piece would pass it is abandoned (reason
``overflow``: the reader did not keep up, and M2MP never sends again), its later
packets ignored, and its reader gets the error.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

from m2mc.errors import M2MCError, UsageError
from m2mc.wire.m2mp import MessageAbandoned, MessageReceived
from m2mc.wire.streams import StreamChunk

__all__ = ["DEFAULT_MAX_STREAM_BUFFER", "IncomingMessage", "MessageAbandonedError",
           "MessageWriter", "OutgoingMessage", "StreamInbox"]

DEFAULT_MAX_STREAM_BUFFER = 4 << 20


class MessageAbandonedError(M2MCError):
    """An incoming message was abandoned before it completed (seeds/002 2.3)."""

    def __init__(self, event: MessageAbandoned) -> None:
        super().__init__(f"message {event.message_id} abandoned ({event.reason}) "
                         f"after {event.bytes} bytes")
        self.event = event


class MessageWriter(Protocol):
    """What an :class:`OutgoingMessage` needs of the endpoint it is written on
    (:class:`~m2mc.runtime.endpoint.M2MPEndpoint` is one): a port, so that this module,
    which the endpoint imports, never imports the endpoint."""

    async def write_piece(self, message_id: int, data: bytes, end: bool) -> None:
        """Queue a piece (``end``: the end of the message), with ``send``'s back-pressure."""

    def abort_message(self, message_id: int) -> None:
        """Send nothing more of the message: its receivers abandon it after their timeout."""


class IncomingMessage:
    """One incoming message, read in pieces in order: ``async for piece in message``
    or ``await message.read()``. Ends when the message is complete; raises
    :class:`MessageAbandonedError` if it was abandoned part-way (never a silent
    truncation)."""

    def __init__(self, message_id: int, inbox: StreamInbox) -> None:
        self.message_id = message_id
        self._inbox = inbox
        self._pieces: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.received = 0  # bytes that arrived so far
        self.complete = False  # every byte arrived
        self.error: MessageAbandonedError | None = None
        self.dropping = False  # given up for overflow; the layer's word is awaited

    def __aiter__(self) -> IncomingMessage:
        return self

    async def __anext__(self) -> bytes:
        while not self._pieces:
            if self.error is not None:
                raise self.error
            if self.complete:
                raise StopAsyncIteration
            if self._inbox.closed is not None:
                raise self._inbox.closed
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        piece = self._pieces.popleft()
        self._inbox.buffered -= len(piece)
        return piece

    async def read(self) -> bytes:
        """The rest of the message, whole (for messages known to be small)."""
        return b"".join([piece async for piece in self])

    # -------------------------------------------------------- from the inbox
    def _add(self, data: bytes, end: bool) -> None:
        if data:
            self._pieces.append(data)
            self.received += len(data)
        self.complete = self.complete or end
        self._wake()

    def _fail(self, event: MessageAbandoned) -> None:
        self.error = MessageAbandonedError(event)
        self._inbox.buffered -= sum(map(len, self._pieces))
        self._pieces.clear()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._waiter = None


class StreamInbox:
    """The endpoint's incoming messages in stream mode: routes the layer's events to
    their :class:`IncomingMessage`, and holds new ones until ``accept()``."""

    def __init__(self, max_buffer: int, max_pending: int,
                 drop: Callable[[int], bool]) -> None:
        self.max_buffer = max_buffer
        self.max_pending = max_pending  # messages not accepted yet (oldest dropped)
        self._drop = drop  # tells the layer to give a stream up ("overflow"): True if it did
        self.open: dict[int, IncomingMessage] = {}  # being received
        self.pending: deque[IncomingMessage] = deque()  # not accepted yet
        self.buffered = 0
        self.overflow = 0  # messages abandoned because the reader fell behind
        self.dropped = 0  # messages dropped unaccepted at max_pending
        self.closed: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._ignored: dict[int, None] = {}  # dropped unaccepted (oldest forgotten)

    def on_event(self, event: MessageReceived | MessageAbandoned | StreamChunk) -> None:
        if type(event) is MessageReceived:
            self._put(self._new(event.message_id), event.payload, True)
            return
        message_id = event.message_id
        if message_id in self._ignored:  # dropped unaccepted: its later events too
            return
        if type(event) is StreamChunk:
            message = self.open.get(message_id)
            if message is None:
                message = self.open[message_id] = self._new(message_id)
            elif message.dropping:
                return
            if self.buffered + len(event.data) > self.max_buffer:
                self.overflow += 1
                message.dropping = True
                if not self._drop(message_id):  # the layer had finished it: fail it here
                    del self.open[message_id]
                    message._fail(MessageAbandoned(message_id, "overflow", message.received))
                return  # else the layer's MessageAbandoned (overflow) follows
            self._put(message, event.data, event.end)
            if event.end:
                del self.open[message_id]
        elif isinstance(event, MessageAbandoned):
            message = self.open.pop(message_id, None)
            if message is None:  # abandoned before it was a stream: its reader is told too
                message = self._new(message_id)
            message._fail(event)

    async def accept(self) -> IncomingMessage:
        while not self.pending:
            if self.closed is not None:
                raise self.closed
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        return self.pending.popleft()

    def close(self, error: Exception) -> None:
        self.closed = error
        for message in [*self.open.values(), *self.pending]:
            message._wake()
        self._wake()

    def _new(self, message_id: int) -> IncomingMessage:
        message = IncomingMessage(message_id, self)
        if len(self.pending) >= self.max_pending:  # the oldest unaccepted one goes
            old = self.pending.popleft()
            self.buffered -= sum(map(len, old._pieces))
            old._pieces.clear()
            self.dropped += 1
            if self.open.pop(old.message_id, None) is not None:
                self._ignored[old.message_id] = None
                if len(self._ignored) > self.max_pending:
                    del self._ignored[next(iter(self._ignored))]
                self._drop(old.message_id)
        self.pending.append(message)
        self._wake()
        return message

    def _put(self, message: IncomingMessage, data: bytes, end: bool) -> None:
        self.buffered += len(data)
        message._add(data, end)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._waiter = None


class OutgoingMessage:
    """One outgoing message written in pieces (``M2MPEndpoint.open_message()``).

    ``write`` waits while the endpoint's send queue is full (back-pressure). Close
    it when done (``async with`` does, and gives it up on an exception); a message
    never closed is abandoned by its receivers after their message timeout, and so
    is one whose writer pauses longer than that between two pieces (seeds/002 2.2).
    """

    def __init__(self, writer: MessageWriter, message_id: int) -> None:
        self._writer = writer
        self.message_id = message_id
        self.written = 0
        self.closed = False

    async def write(self, data: bytes) -> None:
        if self.closed:
            raise UsageError(f"message {self.message_id} is closed")
        if not data:
            return
        await self._writer.write_piece(self.message_id, bytes(data), False)
        self.written += len(data)

    async def close(self) -> int:
        """Send the end of the message; return its message ID."""
        if not self.closed:
            self.closed = True
            await self._writer.write_piece(self.message_id, b"", True)
        return self.message_id

    def abort(self) -> None:
        """Send nothing more: receivers abandon the message after their timeout."""
        if not self.closed:
            self.closed = True
            self._writer.abort_message(self.message_id)

    async def __aenter__(self) -> OutgoingMessage:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is None:
            await self.close()
        else:
            self.abort()
