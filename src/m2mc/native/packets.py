"""The pure-Python versions of the compiled M2MP loops (m2mc.native chooses):
cutting a message into its packets, and checking that a GRO block is one run of a
message's fragments. Both work on the packet layout of :mod:`m2mc.native.layout`,
which m2mc.wire.packet's constants equal (tests/native/test_loader.py)."""

from __future__ import annotations

import struct
from itertools import repeat
from operator import add

from m2mc.native.layout import M2MP_HEADER, M2MP_LAST, M2MP_SEGMENT

__all__ = ["consecutive_py", "fragment_list_py"]

_FRAGMENT = M2MP_SEGMENT - M2MP_HEADER  # the payload bytes a packet carries
_HEADER = struct.Struct(">II")
_FULL_PACKET = struct.Struct(f">II{_FRAGMENT}x")  # its header; the rest skipped
_RUN = 64  # full fragments taken out of a payload per struct call
_RUN_DATA = struct.Struct("=" + f"{_FRAGMENT}s" * _RUN).unpack_from


def fragment_list_py(message_id: int, payload: bytes) -> list[bytes]:
    """m2mc.wire.packet.fragment_list in Python, built with C-level loops: each 64
    fragments' data comes out of one struct call and every header is packed by ``map``."""
    size = len(payload)
    last = max(0, -(-size // _FRAGMENT) - 1)  # the last fragment's number
    data: list[bytes] = []
    runs = last // _RUN
    for run in range(runs):
        data += _RUN_DATA(payload, run * _RUN * _FRAGMENT)
    data += [payload[i:i + _FRAGMENT]
             for i in range(runs * _RUN * _FRAGMENT, last * _FRAGMENT, _FRAGMENT)]
    pack = _HEADER.pack
    out = list(map(add, map(pack, repeat(message_id, last), range(last)), data))
    out.append(pack(message_id, last | M2MP_LAST) + payload[last * _FRAGMENT:])
    return out


def consecutive_py(block: bytes, count: int, message_id: int, word: int) -> int:
    """Whether the ``count`` packets of ``block`` (a joined GRO read: M2MP_SEGMENT bytes
    each but the last), the first of which has the header (``message_id``, ``word``),
    are fragments ``word``, ``word`` + 1, ... of that message: 1 if so and
    the final one is the message's last, 0 if so and none is, -1 if not (or the final
    packet is shorter than a header). m2mc.wire.segments.consecutive (``count`` >= 1)."""
    full = (count - 1) * M2MP_SEGMENT
    end = word + count - 1
    if len(block) - full < M2MP_HEADER or end >= M2MP_LAST or word >= M2MP_LAST:
        return -1
    if list(_FULL_PACKET.iter_unpack(memoryview(block)[:full])) != list(
            zip(repeat(message_id, count - 1), range(word, end), strict=True)):
        return -1
    final_id, final_word = _HEADER.unpack_from(block, full)
    if final_id != message_id:
        return -1
    if final_word == end:
        return 0
    return 1 if final_word == end | M2MP_LAST else -1
