"""The M2MP packet: 4-byte message ID, 1-bit last flag + 31-bit fragment number, fragment.

Bit-exact to docs/interfaces.md §1 and seeds/002 section 5 ("Packet Format").
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from m2mc.errors import DecodeError
from m2mc.native import fragment_list

MAX_PACKET = 508
HEADER_SIZE = 8
MAX_FRAGMENT = MAX_PACKET - HEADER_SIZE  # 500
LAST_FLAG = 0x8000_0000
MAX_FRAGMENT_NUMBER = 0x7FFF_FFFF

_HEADER = struct.Struct(">II")


@dataclass(frozen=True, slots=True)
class Packet:
    message_id: int
    fragment: int
    last: bool
    data: bytes


def encode(packet: Packet) -> bytes:
    if not 0 <= packet.message_id <= 0xFFFF_FFFF:
        raise ValueError(f"message id out of range: {packet.message_id}")
    if not 0 <= packet.fragment <= MAX_FRAGMENT_NUMBER:
        raise ValueError(f"fragment number out of range: {packet.fragment}")
    if len(packet.data) > MAX_FRAGMENT:
        raise ValueError(f"fragment of {len(packet.data)} bytes exceeds {MAX_FRAGMENT}")
    word = packet.fragment | (LAST_FLAG if packet.last else 0)
    return _HEADER.pack(packet.message_id, word) + packet.data


def decode(datagram: bytes) -> Packet:
    """Decode one datagram; raise :class:`DecodeError` if it is not an M2MP packet."""
    size = len(datagram)
    if size < HEADER_SIZE:
        raise DecodeError(f"packet of {size} bytes is shorter than the 8-byte header")
    if size > MAX_PACKET:
        raise DecodeError(f"packet of {size} bytes exceeds {MAX_PACKET}")
    message_id, word = _HEADER.unpack_from(datagram)
    return Packet(message_id, word & MAX_FRAGMENT_NUMBER, bool(word & LAST_FLAG),
                  bytes(datagram[HEADER_SIZE:]))


def fragment_count(size: int) -> int:
    """Number of packets for a message of ``size`` bytes (an empty message takes one)."""
    return max(1, -(-size // MAX_FRAGMENT))


def fragments(message_id: int, payload: bytes) -> Iterator[bytes]:
    """Encoded packets of one message, in fragment order (seeds/002: n = q*500 + r).
    :func:`fragment_list` makes them as a list: m2mc.native's, in C where it is built,
    else :func:`fragment_list_py`."""
    return iter(fragment_list(message_id, payload))


