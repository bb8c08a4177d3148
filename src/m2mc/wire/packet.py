"""The M2MP packet: 4-byte message ID, 1-bit last flag + 31-bit fragment number, fragment.

Bit-exact to docs/interfaces.md §1 and seeds/002 section 5 ("Packet Format").
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import repeat
from operator import add
from types import ModuleType

from m2mc.errors import DecodeError
from m2mc.speedups import NATIVE

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
    """Encoded packets of one message, in fragment order (seeds/002: n = q*500 + r)."""
    return iter(fragment_list(message_id, payload))


_RUN = 64  # full fragments taken out of a payload per struct call
_RUN_DATA = struct.Struct("=" + f"{MAX_FRAGMENT}s" * _RUN).unpack_from


def fragment_list_py(message_id: int, payload: bytes) -> list[bytes]:
    """:func:`fragment_list` in Python, built with C-level loops: each 64 fragments'
    data comes out of one struct call and every header is packed by ``map``."""
    size = len(payload)
    last = max(0, -(-size // MAX_FRAGMENT) - 1)  # the last fragment's number
    data: list[bytes] = []
    runs = last // _RUN
    for run in range(runs):
        data += _RUN_DATA(payload, run * _RUN * MAX_FRAGMENT)
    data += [payload[i:i + MAX_FRAGMENT]
             for i in range(runs * _RUN * MAX_FRAGMENT, last * MAX_FRAGMENT, MAX_FRAGMENT)]
    pack = _HEADER.pack
    out = list(map(add, map(pack, repeat(message_id, last), range(last)), data))
    out.append(pack(message_id, last | LAST_FLAG) + payload[last * MAX_FRAGMENT:])
    return out


def native_for_packets() -> ModuleType | None:
    """m2mc._speedups if it is built for this packet layout (its M2MP loops read and
    write headers at fixed offsets), else None."""
    native = NATIVE
    if native is None or (native.M2MP_SEGMENT, native.M2MP_HEADER, native.M2MP_LAST) != (
            MAX_PACKET, HEADER_SIZE, LAST_FLAG):
        return None
    return native


_NATIVE = native_for_packets()
_FRAGMENTS: Callable[[int, bytes], list[bytes] | None] | None = (
    None if _NATIVE is None else _NATIVE.fragments)


def fragment_list(message_id: int, payload: bytes) -> list[bytes]:
    """:func:`fragments` as a list: in C where m2mc._speedups is built (a sender's CPU
    per 64 KiB message: 46 to 11 µs), else :func:`fragment_list_py`; the same packets,
    and the Python's error for what it refuses (tests/group/test_speedups.py)."""
    if _FRAGMENTS is not None:
        packets = _FRAGMENTS(message_id, payload)
        if packets is not None:
            return packets
    return fragment_list_py(message_id, payload)
