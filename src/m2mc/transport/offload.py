"""UDP segmentation offload (Linux GSO/GRO): many M2MP packets per system call.

The wire does not change: every packet is still its own UDP datagram of at most
508 bytes (docs/interfaces.md section 1), or of the larger packet size a user named
(``packet=``). What changes is how many cross the system-call boundary at once.

- Sending (``UDP_SEGMENT``): a run of packets of one size S, the last possibly
  shorter, goes to the kernel as one buffer, and the kernel (or the network card)
  cuts it back into datagrams of S bytes. We only join full packets
  (:data:`SEGMENT`, 508 bytes) plus the one after them: the fragments of a message
  are exactly that, and a capture on the sending host, which may see the joined
  buffer before it is cut, can then always be split at 508 bytes (m2mc.lua does).
  A channel set to a larger packet size S (``packet=``) joins its full packets of S
  bytes the same way, fewer per send (:func:`segments_per_send`: 44 at 1472 bytes)
  and not at all past 32,753 bytes, where two would not fit one send; m2mc.lua
  finds S in such a buffer from the header of its second packet.
- Receiving (``UDP_GRO``): the kernel may hand several datagrams of one size from
  one sender over in one read, with the segment size in a control message; we cut
  them apart again (:func:`split_segments`), whatever their size: packets of
  another sender's larger packet size are cut at that size. Without the option, a
  joined buffer is cut by the kernel before our socket sees it.

Both are per socket and optional: where the kernel refuses them (not Linux, a
kernel older than 4.18 for sending or 5.0 for receiving), the channel sends and
reads one datagram per call, as before. docs/decisions.md, "UDP segmentation
offload", says why this keeps the contract.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
from collections.abc import Callable, Sequence

from m2mc.wire.packet import MAX_DATAGRAM
from m2mc.wire.segments import Segments

SEGMENT = 508  # the M2MP packet size: the only segment size we send with
MAX_SEGMENTS = 64  # per send (the kernel's UDP_MAX_SEGMENTS since 4.18; newer ones allow more)
GRO_READ_SIZE = 65535  # a read with GRO on may return up to a whole IP datagram's worth

# Linux option numbers (include/uapi/linux/udp.h); Python names them only from 3.12 on.
UDP_SEGMENT: int = getattr(socket, "UDP_SEGMENT", 103)
UDP_GRO: int = getattr(socket, "UDP_GRO", 104)
SOL_UDP: int = getattr(socket, "SOL_UDP", 17)
GRO_ANCILLARY = socket.CMSG_SPACE(4) if hasattr(socket, "CMSG_SPACE") else 0
_INT = struct.Struct("=i")


def segments_per_send(segment: int) -> int:
    """Packets of ``segment`` bytes one joined send may carry: MAX_SEGMENTS, fewer
    where they would pass what one UDP datagram over IPv4 carries (MAX_DATAGRAM)."""
    return min(MAX_SEGMENTS, MAX_DATAGRAM // segment)


def enable_gso(sock: socket.socket, segment: int = SEGMENT) -> bool:
    """Make sends longer than ``segment`` bytes (the channel's packet size) go out as
    datagrams of that size. False where the kernel has no UDP segmentation (then
    nothing changed)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        sock.setsockopt(SOL_UDP, UDP_SEGMENT, segment)
    except OSError:
        return False
    return True


def disable_gso(sock: socket.socket) -> None:
    """Back to one datagram per send (after the route refused a joined send)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(SOL_UDP, UDP_SEGMENT, 0)


def enable_gro(sock: socket.socket) -> bool:
    """Let reads return several same-size datagrams at once (then read with
    :func:`read_segments`). False where the kernel cannot (nothing changed)."""
    if not sys.platform.startswith("linux") or not GRO_ANCILLARY:
        return False
    try:
        sock.setsockopt(SOL_UDP, UDP_GRO, 1)
    except OSError:
        return False
    return True


def run_end(datagrams: Sequence[bytes], start: int, segment: int = SEGMENT,
            most: int = MAX_SEGMENTS) -> int:
    """End (exclusive) of the run that can go in one send from ``start``: the full
    packets (``segment`` bytes) from there, at most ``most`` (:func:`segments_per_send`),
    plus the datagram after them if it still fits (the kernel wants every segment but
    the last of one size)."""
    end = start
    limit = min(len(datagrams), start + most)
    while end < limit and len(datagrams[end]) == segment:
        end += 1
    if end < limit:
        end += 1  # the shorter one, or any one when no full packet starts the run
    return end


def split_segments(data: bytes, ancillary: list[tuple[int, int, bytes]],
                   append: Callable[[bytes], None], keep: int = MAX_DATAGRAM + 1,
                   blocks: bool = False) -> int:
    """Append the datagrams of one GRO read (``recvmsg``'s data and ancillary data)
    and return how many. Without a segment size it is one datagram. Each is cut to
    ``keep`` bytes, as a plain read of that size cuts a datagram: anything over
    MAX_DATAGRAM bytes is no M2MP packet (the layer above counts it malformed), and
    each datagram a channel holds stays bounded, whatever senders send.
    ``blocks``: datagrams of :data:`SEGMENT` bytes are appended as one
    :class:`Segments` rather than one by one."""
    size = 0
    for level, kind, value in ancillary:
        if level == SOL_UDP and kind == UDP_GRO and len(value) >= _INT.size:
            size = _INT.unpack_from(value)[0]
    length = len(data)
    if size <= 0 or length <= size:
        append(data if length <= keep else data[:keep])
        return 1
    if blocks and size == SEGMENT:
        append(Segments(data))
        return -(-length // size)
    piece = min(size, keep)
    count = 0
    for offset in range(0, length, size):
        append(data[offset:offset + piece])  # (slicing bytes: half a memoryview's cost)
        count += 1
    return count
