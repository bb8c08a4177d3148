"""The M2MP packet: 4-byte message ID, 1-bit last flag + 31-bit fragment number, fragment.

Bit-exact to docs/interfaces.md §1 and seeds/002 section 5 ("Packet Format").
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from m2mc.errors import ConfigError, DecodeError
from m2mc.native import fragment_list

MAX_PACKET = 508  # the default packet size: safe on any IPv4 path (docs/interfaces.md §1)
HEADER_SIZE = 8
MAX_FRAGMENT = MAX_PACKET - HEADER_SIZE  # 500
LAST_FLAG = 0x8000_0000
MAX_FRAGMENT_NUMBER = 0x7FFF_FFFF
# The largest packet a sender may be set to and a receiver accepts: the most a UDP
# datagram carries over IPv4 (65,535 - 20 bytes of IP header - 8 of UDP header). A
# packet size above MAX_PACKET is an option a user names (``?packet=N`` on a channel
# URL, M2MPConfig.packet_size); receivers take any size up to this whatever their own.
MAX_DATAGRAM = 65_507
MAX_DATA = MAX_DATAGRAM - HEADER_SIZE  # the most one fragment carries

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
    if len(packet.data) > MAX_DATA:
        raise ValueError(f"fragment of {len(packet.data)} bytes exceeds {MAX_DATA}")
    word = packet.fragment | (LAST_FLAG if packet.last else 0)
    return _HEADER.pack(packet.message_id, word) + packet.data


def decode(datagram: bytes) -> Packet:
    """Decode one datagram; raise :class:`DecodeError` if it is not an M2MP packet."""
    size = len(datagram)
    if size < HEADER_SIZE:
        raise DecodeError(f"packet of {size} bytes is shorter than the 8-byte header")
    if size > MAX_DATAGRAM:
        raise DecodeError(f"packet of {size} bytes exceeds {MAX_DATAGRAM}")
    message_id, word = _HEADER.unpack_from(datagram)
    return Packet(message_id, word & MAX_FRAGMENT_NUMBER, bool(word & LAST_FLAG),
                  bytes(datagram[HEADER_SIZE:]))


def check_packet_size(size: int) -> int:
    """``size`` if a sender may be set to packets of that many bytes (MAX_PACKET to
    MAX_DATAGRAM), else :class:`~m2mc.errors.ConfigError` with one line."""
    if type(size) is not int or not MAX_PACKET <= size <= MAX_DATAGRAM:
        raise ConfigError(f"packet size must be an integer in {MAX_PACKET}..{MAX_DATAGRAM} "
                          f"bytes, got {size!r}")
    return size


def fragment_count(size: int, packet_size: int = MAX_PACKET) -> int:
    """Number of packets for a message of ``size`` bytes (an empty message takes one)."""
    return max(1, -(-size // (packet_size - HEADER_SIZE)))


def fragments(message_id: int, payload: bytes, packet_size: int = MAX_PACKET) -> Iterator[bytes]:
    """Encoded packets of one message, in fragment order (seeds/002: n = q*500 + r;
    q*(P-8) + r at a packet size P). :func:`fragment_packets` makes them as a list."""
    return iter(fragment_packets(message_id, payload, packet_size))


def fragment_packets(message_id: int, payload: bytes, packet_size: int = MAX_PACKET
                     ) -> list[bytes]:
    """The encoded packets of one message cut at ``packet_size`` bytes: at the default
    size, m2mc.native's :func:`fragment_list` (in C where it is built); at a larger
    one, fragments of ``packet_size`` - 8 bytes cut here (the last one shorter or
    empty, with the last flag), the same layout."""
    if packet_size == MAX_PACKET:
        return fragment_list(message_id, payload)
    step = packet_size - HEADER_SIZE
    last = max(0, -(-len(payload) // step) - 1)
    pack = _HEADER.pack
    view = memoryview(payload)
    out = [pack(message_id, i) + view[i * step:(i + 1) * step] for i in range(last)]
    out.append(pack(message_id, last | LAST_FLAG) + view[last * step:])
    return out


