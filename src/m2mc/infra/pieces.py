"""Cell frames larger than one IP packet, cut into pieces that each fit one: sans-IO.

An infrastructure frame travels whole in one UDP datagram (docs/infra.md), up to
65,507 bytes. On a link whose MTU is smaller, IP would cut such a datagram into
fragments, and the receiving kernel would hold every incomplete one for 30 s in a
reassembly buffer of 4 MiB per network namespace; under steady loss that buffer
fills with datagrams that lost a fragment, and from then on the kernel refuses every
new fragment: all large frames are lost until the old ones time out
(docs/decisions.md, "Cell frames never rely on IP fragmentation"). So the driver cuts
a frame that does not fit one packet into pieces that do, and puts them together
again here, with bounds of our own and the oldest partial frame given up first.

A piece on the wire (all integers big-endian)::

    b"IM\\x02" | frame id (4 bytes) | index (1 byte) | count (1 byte) | bytes

``count`` pieces (2 to 255) carry the frame's bytes in order; ``index`` is 0 to
count - 1. The id is the sender's (a counter), so a receiver keys a partial frame
by the datagram's source address and the id. Pieces carry no checksum and no seal
of their own: the frame put together is decoded and verified as any other (its
CRC-32, or its deployment key's tag), so a forged or mixed-up piece costs that one
frame, which the protocol sends again as it would a lost one.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass

from m2mc.errors import DecodeError

PIECE_MAGIC = b"IM\x02"
_HEAD = struct.Struct(">3sIBB")
PIECE_HEADER = _HEAD.size  # 9 bytes
MAX_PIECES = 255
IP_UDP_HEADERS = 28  # an IPv4 header without options (20) and a UDP header (8)
MIN_CELL_MTU = 576  # every IPv4 host takes datagrams of 576 bytes (RFC 791)
MAX_FRAME_BYTES = 65_507  # one UDP datagram over IPv4


def datagram_limit(mtu: int) -> int:
    """The most bytes of one UDP datagram that fit one IP packet on a link of ``mtu``."""
    return mtu - IP_UDP_HEADERS


def is_piece(data: bytes) -> bool:
    return data.startswith(PIECE_MAGIC)  # (every cell datagram: no slice copied)


def cut(frame: bytes, frame_id: int, limit: int) -> list[bytes]:
    """``frame`` as datagrams of at most ``limit`` bytes: itself if it fits, else its
    pieces. ``limit`` is at least ``datagram_limit(MIN_CELL_MTU)``, so a frame of
    65,507 bytes takes at most 123 pieces."""
    if len(frame) <= limit:
        return [frame]
    step = limit - PIECE_HEADER
    count = -(-len(frame) // step)
    if count > MAX_PIECES:
        raise ValueError(f"a frame of {len(frame)} bytes needs {count} pieces of {limit}")
    frame_id &= 0xFFFF_FFFF
    return [_HEAD.pack(PIECE_MAGIC, frame_id, i, count) + frame[i * step:(i + 1) * step]
            for i in range(count)]


@dataclass(slots=True)
class _Partial:
    count: int
    started: float
    parts: dict[int, bytes]
    size: int


@dataclass(slots=True)
class PieceStats:
    """Counters of one node's pieces, shared by its sockets (a move opens new ones)."""

    cut: int = 0  # frames sent in pieces
    frames: int = 0  # frames put together
    pieces: int = 0  # pieces taken (duplicates included)
    malformed: int = 0  # pieces refused (DecodeError)
    expired: int = 0  # partial frames given up after the timeout
    evicted: int = 0  # partial frames given up for a newer one (the bounds)

    def counters(self) -> dict[str, int]:
        """For a node's ``stats()``: frames sent in pieces, put together, pieces
        refused, partial frames given up (timed out or pushed out by the bounds)."""
        return {"frames_in_pieces": self.cut, "frames_put_together": self.frames,
                "pieces_refused": self.malformed,
                "partial_frames_given_up": self.expired + self.evicted}


class Reassembly:
    """Partial frames of one socket: at most ``max_frames`` of them and ``max_bytes``
    of pieces held together, each for at most ``timeout`` seconds.

    At a bound the oldest partial frame is given up, never the newest: the kernel's
    reassembly refuses new fragments once its buffer is full, which under loss
    stalls every large frame; giving up the oldest keeps the newest coming (a frame
    given up is a frame lost, which the protocol repairs)."""

    __slots__ = ("_partial", "_size", "max_bytes", "max_frames", "stats", "timeout")

    def __init__(self, *, max_frames: int = 256, max_bytes: int = 4 << 20,
                 timeout: float = 2.0, stats: PieceStats | None = None) -> None:
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.stats = stats if stats is not None else PieceStats()
        self._partial: OrderedDict[tuple[object, int], _Partial] = OrderedDict()
        self._size = 0

    @property
    def held_bytes(self) -> int:
        return self._size

    @property
    def held_frames(self) -> int:
        return len(self._partial)

    def feed(self, source: object, data: bytes, now: float) -> bytes | None:
        """Take one piece from ``source``: the frame it completes, or None.
        DecodeError (counted) for a datagram that is no well-formed piece."""
        self.expire(now)
        if len(data) <= PIECE_HEADER or not is_piece(data):
            self.stats.malformed += 1
            raise DecodeError("not a piece of a frame")
        _, frame_id, index, count = _HEAD.unpack_from(data)
        if count < 2 or index >= count:
            self.stats.malformed += 1
            raise DecodeError(f"piece {index} of {count}")
        self.stats.pieces += 1
        body = data[PIECE_HEADER:]
        key = (source, frame_id)
        partial = self._partial.get(key)
        if partial is not None and partial.count != count:
            self._drop(key, partial)  # the sender reused the id: start again
            partial = None
        if partial is None:
            partial = _Partial(count, now, {}, 0)
            self._partial[key] = partial
        if index in partial.parts:
            return None  # a duplicate
        partial.parts[index] = body
        partial.size += len(body)
        self._size += len(body)
        if len(partial.parts) == count:
            self._drop(key, partial)
            frame = b"".join(partial.parts[i] for i in range(count))
            if len(frame) > MAX_FRAME_BYTES:
                self.stats.malformed += 1
                raise DecodeError(f"a frame of {len(frame)} bytes put together")
            self.stats.frames += 1
            return frame
        while self._size > self.max_bytes or len(self._partial) > self.max_frames:
            old_key, old = next(iter(self._partial.items()))
            self._drop(old_key, old)
            self.stats.evicted += 1
        return None

    def expire(self, now: float) -> None:
        """Give up partial frames older than the timeout (oldest first)."""
        partial = self._partial
        while partial:
            key, oldest = next(iter(partial.items()))
            if now - oldest.started < self.timeout:
                return
            self._drop(key, oldest)
            self.stats.expired += 1

    def _drop(self, key: tuple[object, int], partial: _Partial) -> None:
        del self._partial[key]
        self._size -= partial.size


__all__ = ["MAX_PIECES", "MIN_CELL_MTU", "PIECE_HEADER", "PIECE_MAGIC", "PieceStats",
           "Reassembly", "cut", "datagram_limit", "is_piece"]
