"""Several M2MP packets read at once and kept joined: :class:`Segments`.

With UDP receive offload (m2mc.transport.offload) the kernel hands a reader the
datagrams of one sender that arrived together in one buffer, all of one size but
the last. Cutting that buffer into one ``bytes`` per packet, only for the M2MP
layer to cut the header off each and join the rest again, was a good part of a
receiver's CPU per large message. A channel therefore hands the buffer on whole,
as a :class:`Segments`, to a reader that takes them (``Channel.offer_blocks``;
a stack with ``takes_blocks``): :meth:`M2MPLayer.receive_datagrams
<m2mc.wire.m2mp.M2MPLayer.receive_datagrams>` takes a run of one message's
fragments from it as it is, and cuts it apart only where it must.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from m2mc.native import consecutive
from m2mc.wire.packet import HEADER_SIZE, MAX_PACKET

__all__ = ["SEGMENT", "Segments", "consecutive", "header_slices", "segment_count", "segment_data",
           "split_block", "split_blocks"]

SEGMENT = MAX_PACKET  # the one segment size kept joined: a full M2MP packet


class Segments(bytes):
    """Several datagrams of one GRO read, :data:`SEGMENT` bytes each but the last
    (which is 1 to SEGMENT bytes), kept joined. A channel hands these only to a sink
    that asked for them (``Channel.offer_blocks``): the M2MP layer, which takes a
    run of one message's fragments from them without cutting them apart
    (``M2MPLayer.receive_datagrams``). Anyone else gets the datagrams one by one."""

    __slots__ = ()


_DATA: dict[tuple[int, int], Callable[[bytes], tuple[bytes, ...]]] = {}


def segment_data(block: bytes, skip: int = 0) -> list[bytes]:
    """Each datagram of a :class:`Segments`, without its first ``skip`` bytes.
    The full ones come out of one C call (a cached ``Struct`` per count, at most 129
    of them per ``skip``): half the CPU of slicing them one by one."""
    if not block:
        return []
    full = (len(block) - 1) // SEGMENT  # the full datagrams before the final one
    key = (full, skip)
    unpack = _DATA.get(key)
    if unpack is None:
        unpack = _DATA[key] = struct.Struct("=" + f"{skip}x{SEGMENT - skip}s" * full).unpack_from
    out = list(unpack(block))
    out.append(block[full * SEGMENT + skip:])
    return out


def header_slices(count: int) -> tuple[slice, ...]:
    """The slices of each packet's header in a :class:`Segments` of ``count``."""
    slices = _HEADERS.get(count)
    if slices is None:
        slices = _HEADERS[count] = tuple(slice(i * SEGMENT, i * SEGMENT + HEADER_SIZE)
                                         for i in range(count))
    return slices


_HEADERS: dict[int, tuple[slice, ...]] = {}


def segment_count(block: bytes) -> int:
    """How many datagrams a :class:`Segments` holds."""
    return -(-len(block) // SEGMENT)


def split_block(block: bytes) -> list[bytes]:
    """The datagrams of a :class:`Segments`, one by one."""
    return segment_data(block)


def split_blocks(batch: list[bytes]) -> list[bytes]:
    """``batch`` with each :class:`Segments` in it cut into its datagrams."""
    if not any(type(d) is Segments for d in batch):
        return batch
    out: list[bytes] = []
    for d in batch:
        if type(d) is Segments:
            out += split_block(d)
        else:
            out.append(d)
    return out
