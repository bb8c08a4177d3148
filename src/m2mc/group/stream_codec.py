"""Wire format of group messages sent as streams (docs/group.md section 12).

A streamed message is an ordinary data record, its *head*, ordered, logged and
repaired like any message, whose payload is a descriptor::

    STREAM_MAGIC + msgpack [version, chunk_bytes, size or nil(, window)]

(``window``: the chunks its sender may have past its slowest receiver, who
acknowledges each quarter of it, m2mc.group.stream_pace; absent before pacing, and
ignored by the nodes of that version, which read three elements and skip the rest)

and a *body* that travels beside the ordering, in STREAM messages (kind 17) of one
chunk each, asked for again by STREAM_NACK (kind 18):

* STREAM ``[sender, pid, seq, index, chunk_bytes, data, state, size, sha256]``: chunk
  ``index`` (bytes ``index * chunk_bytes`` on) of the body of message ``pid:seq``,
  sent by ``sender`` (``pid`` itself, or a member repairing it); ``state`` 0: more
  follow (``data`` is exactly ``chunk_bytes``), 1: the last chunk (``data`` 0 to
  ``chunk_bytes`` bytes; ``size`` and ``sha256`` are the whole body's), 2: the sender
  gave up (no data; the body will never be complete);
* STREAM_NACK ``[sender, pid, seq, [lo1, hi1, lo2, hi2, ...]]``: chunks of message
  ``pid:seq`` the sender still lacks (inclusive ranges of indexes);
* STREAM_ACK ``[sender, pid, seq, next]`` (kind 19): ``sender`` holds chunks ``0 ..
  next - 1`` of message ``pid:seq`` in its body store, in order: how far the sender of
  the body may go (m2mc.group.stream_pace).

``Group.send`` refuses a payload that starts with the magic, so an application's
message is never taken for a head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from m2mc.errors import DecodeError

__all__ = [
    "MAX_CHUNK_BYTES",
    "STREAM_MAGIC",
    "Descriptor",
    "StreamAck",
    "StreamData",
    "StreamNack",
    "decode_descriptor",
    "encode_descriptor",
    "is_head",
]

# 14 bytes no text and no msgpack document starts with: NUL, "M2MC-STREAM", NUL, version.
STREAM_MAGIC = b"\x00M2MC-STREAM\x00\x01"
MAX_CHUNK_BYTES = 65536
MAX_CHUNKS = 1 << 32  # chunk indexes (at 16,000 bytes a chunk: 68 TB)
MORE, LAST, ABORTED = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Descriptor:
    """What a head says of its body: the chunk size, and its size if the sender knew it."""

    chunk_bytes: int
    size: int | None = None
    window: int | None = None  # the sender's pacing window in chunks, if it paces


def encode_descriptor(descriptor: Descriptor) -> bytes:
    fields = [1, descriptor.chunk_bytes, descriptor.size]
    if descriptor.window is not None:
        fields.append(descriptor.window)
    packed: bytes = msgpack.packb(fields)
    return STREAM_MAGIC + packed


def is_head(payload: bytes) -> bool:
    return payload.startswith(STREAM_MAGIC)


def decode_descriptor(payload: bytes) -> Descriptor:
    """The descriptor of a head; DecodeError if ``payload`` is not one."""
    if not is_head(payload):
        raise DecodeError("not a stream head")
    try:
        raw = msgpack.unpackb(payload[len(STREAM_MAGIC):])
    except Exception as exc:
        raise DecodeError(f"bad stream descriptor: {exc}") from None
    if type(raw) is not list or len(raw) < 3 or raw[0] != 1:
        raise DecodeError("bad stream descriptor")
    chunk, size = raw[1], raw[2]
    if type(chunk) is not int or not 1 <= chunk <= MAX_CHUNK_BYTES:
        raise DecodeError("bad stream chunk size")
    if size is not None and (type(size) is not int or size < 0):
        raise DecodeError("bad stream size")
    window = raw[3] if len(raw) > 3 else None
    if window is not None and (type(window) is not int or not 1 <= window <= MAX_CHUNKS):
        window = None  # (a later version's meaning, perhaps: not ours to refuse)
    return Descriptor(chunk, size, window)


@dataclass(frozen=True, slots=True)
class StreamData:
    sender: str
    pid: str
    seq: int
    index: int
    chunk_bytes: int
    data: bytes
    state: int = MORE
    size: int = 0
    sha256: bytes = b""


@dataclass(frozen=True, slots=True)
class StreamNack:
    sender: str
    pid: str
    seq: int
    chunks: list[tuple[int, int]]  # inclusive ranges of chunk indexes


@dataclass(frozen=True, slots=True)
class StreamAck:
    sender: str
    pid: str
    seq: int
    next: int  # chunks 0 .. next - 1 are in the sender's store, in order


def stream_to_wire(body: StreamData | StreamNack | StreamAck) -> list[Any]:
    if isinstance(body, StreamData):
        return [body.sender, body.pid, body.seq, body.index, body.chunk_bytes, body.data,
                body.state, body.size, body.sha256]
    if isinstance(body, StreamAck):
        return [body.sender, body.pid, body.seq, body.next]
    return [body.sender, body.pid, body.seq, [v for pair in body.chunks for v in pair]]


def stream_from_wire(is_data: bool, r: list[Any], max_seq: int,
                     max_ranges: int = 1024) -> StreamData | StreamNack:
    """Decode a STREAM (``is_data``) or STREAM_NACK body; DecodeError if malformed."""
    if is_data:
        if len(r) != 9:
            raise DecodeError("expected a list of the right length")
        sender, pid, seq, index, chunk, data, state, size, digest = r
        _pid(sender)
        _pid(pid)
        _uint(seq, 1, max_seq)
        _uint(index, 0, MAX_CHUNKS)
        _uint(chunk, 1, MAX_CHUNK_BYTES + 1)
        _uint(state, 0, 3)
        _uint(size, 0, MAX_CHUNKS * MAX_CHUNK_BYTES)
        if type(data) is not bytes or type(digest) is not bytes:
            raise DecodeError("bad stream chunk")
        if state == MORE and (len(data) != chunk or size or digest):
            raise DecodeError("bad stream chunk")
        if state == LAST and (len(data) > chunk or len(digest) != 32
                              or size != index * chunk + len(data)):
            raise DecodeError("bad last stream chunk")
        if state == ABORTED and (data or size or digest):
            raise DecodeError("bad stream abort")
        return StreamData(sender, pid, seq, index, chunk, data, state, size, digest)
    sender, pid, seq, flat = _body_of_four(r, max_seq)
    if type(flat) is not list or len(flat) % 2 or len(flat) > 2 * max_ranges:
        raise DecodeError("bad stream ranges")
    ranges = []
    for lo, hi in zip(flat[::2], flat[1::2], strict=True):
        _uint(lo, 0, MAX_CHUNKS)
        _uint(hi, lo, MAX_CHUNKS)
        ranges.append((lo, hi))
    return StreamNack(sender, pid, seq, ranges)


def stream_ack_from_wire(r: list[Any], max_seq: int) -> StreamAck:
    """Decode a STREAM_ACK body; DecodeError if malformed."""
    sender, pid, seq, upto = _body_of_four(r, max_seq)
    _uint(upto, 0, MAX_CHUNKS + 1)
    return StreamAck(sender, pid, seq, upto)


def _body_of_four(r: list[Any], max_seq: int) -> tuple[str, str, int, Any]:
    """A STREAM_NACK's or STREAM_ACK's ``[sender, pid, seq, last]``, the first three
    checked; DecodeError if malformed."""
    if len(r) != 4:
        raise DecodeError("expected a list of the right length")
    sender, pid, seq, last = r
    _pid(sender)
    _pid(pid)
    _uint(seq, 1, max_seq)
    return sender, pid, seq, last


def _pid(value: Any) -> None:
    if type(value) is not str or not 0 < len(value) <= 64:
        raise DecodeError("bad process id")


def _uint(value: Any, low: int, high: int) -> None:
    if type(value) is not int or not low <= value < high:
        raise DecodeError("integer out of range")
