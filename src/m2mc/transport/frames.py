"""Length-prefixed frames carrying datagrams over the daemon's TCP connections.

A frame is a 2-byte big-endian length followed by that many bytes. The decoder
is pure (bytes in, datagrams out) and its buffer is bounded by one frame.
"""

from __future__ import annotations

import struct

MAX_FRAME = 0xFFFF
_LENGTH = struct.Struct(">H")


def encode_frame(datagram: bytes) -> bytes:
    if len(datagram) > MAX_FRAME:
        raise ValueError(f"datagram of {len(datagram)} bytes exceeds a frame ({MAX_FRAME})")
    return _LENGTH.pack(len(datagram)) + datagram


class FrameDecoder:
    """Feed stream bytes; get whole datagrams. Keeps at most one partial frame."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        out: list[bytes] = []
        position, end = 0, len(buffer)
        unpack = _LENGTH.unpack_from
        while end - position >= 2:
            (length,) = unpack(buffer, position)
            stop = position + 2 + length
            if stop > end:
                break
            out.append(bytes(buffer[position + 2:stop]))
            position = stop
        if position:
            del buffer[:position]
        return out
