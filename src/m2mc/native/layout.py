"""What the compiled code (``_speedups.c``) is built for, as the Python sees it: the
ABI version of its functions, M2MP's packet header, the slots of the classes it
builds and reads, and how deep its msgpack writer goes.

``_speedups.c`` holds the same values as C constants and exports, at import, its
``ABI`` and ``LAYOUT_HASH``: the FNV-1a (64 bits) of :data:`LAYOUT`'s text built from
its own constants. :mod:`m2mc.native.loader` compares both with these; a build made
from an older ``_speedups.c`` (another ABI, another layout) is not used, and says so.

Raise :data:`ABI` whenever a function of the C changes what it takes or returns; a
layout value changed here must be changed in the C too (the hashes then differ until
the C is rebuilt). The classes and constants that the layouts describe are checked
against these where they are defined (tests/native/test_loader.py).
"""

from __future__ import annotations

__all__ = ["ABI", "GROUP_MESSAGE_SLOTS", "LAYOUT", "LAYOUT_HASH", "M2MP_HEADER", "M2MP_LAST",
           "M2MP_SEGMENT", "MESSAGE_ID_SLOTS", "MESSAGE_SLOTS", "PACK_DEPTH", "fnv1a64",
           "layout_text"]

ABI = 2  # 1: the functions as first built (no ABI export); 2: this package

M2MP_SEGMENT = 508  # m2mc.wire.packet.MAX_PACKET: a full packet, one GRO segment
M2MP_HEADER = 8  # HEADER_SIZE: message id, then the fragment word
M2MP_LAST = 0x8000_0000  # LAST_FLAG, in the fragment word

MESSAGE_ID_SLOTS = ("pid", "seq")  # m2mc.ordering.ids.MessageId
MESSAGE_SLOTS = ("mid", "parent", "payload", "vclock", "gseq")  # m2mc.ordering.ids.Message
GROUP_MESSAGE_SLOTS = ("gid", "mid", "parent", "data", "gseq")  # m2mc.api.message.GroupMessage
PACK_DEPTH = 8  # containers nested deeper go to msgpack itself


def layout_text(segment: int = M2MP_SEGMENT, header: int = M2MP_HEADER, last: int = M2MP_LAST,
                mid: tuple[str, ...] = MESSAGE_ID_SLOTS, message: tuple[str, ...] = MESSAGE_SLOTS,
                group_message: tuple[str, ...] = GROUP_MESSAGE_SLOTS,
                depth: int = PACK_DEPTH) -> str:
    """The layout as one line of text (``_speedups.c``'s ``layout_text`` writes the same)."""
    return (f"m2mp:{segment},{header},{last};MessageId:{','.join(mid)};"
            f"Message:{','.join(message)};GroupMessage:{','.join(group_message)};"
            f"pack:{depth}")


def fnv1a64(text: str) -> int:
    """FNV-1a, 64 bits, of ``text``'s UTF-8 bytes (``_speedups.c``'s ``fnv1a64``)."""
    h = 0xCBF2_9CE4_8422_2325
    for byte in text.encode():
        h = ((h ^ byte) * 0x0000_0100_0000_01B3) & 0xFFFF_FFFF_FFFF_FFFF
    return h


LAYOUT = layout_text()
LAYOUT_HASH = fnv1a64(LAYOUT)
