"""The sender's back-pressure rule (docs/api.md, ``Group.send``), in one place.

A node's *send backlog* is what it has accepted from the application and not yet
handed to the channel: the packets M2MP holds back (flow control) and the data
records not packed into a message yet. It is bounded twice:

* in packets (``GroupConfig.send_backlog``, a record counting as one): this keeps
  small messages batched and bounds the per-packet work queued;
* in bytes (``GroupConfig.send_backlog_bytes``): packet bytes plus record bytes
  (plus the group messages made since the driver last ran: a stream's chunks).
  A packet count alone let a sender of 64 KiB messages queue 4,096 of them
  (256 MiB) before it waited, since a record counts as one until it is packed
  into its 130 packets.

A message waits while either bound would be passed, its bytes counted as its
payload plus the 8-byte header of each of its packets; one larger than the whole
byte bound goes when the backlog is empty. So the node never holds more than
``send_backlog_bytes`` plus the group header of the last message taken (its record
and frame headers, a few dozen bytes), or one message alone if it is larger.
Blocked senders are woken once both counts are down to half their bound, so a
sender wakes once per half a bound, not once per packet.

A message also waits while a group's receivers are a window behind
(:mod:`m2mc.group.window`): what the node has sent, not what it holds; and, in a
total-order group, while four times ``max_uncommitted`` of its messages are not
delivered here yet (the order is behind: docs/group.md section 11), unless its
deliveries have not moved for ``send_window_wait`` (no majority: the messages wait
unstamped, as before).

:func:`send_room` answers the same question for many sends at once: how many more
messages of at most a size are sure to pass :func:`must_wait` if nothing but those
sends happens in between (a lower bound). The API asks it once and then skips the
check for that many sends (``GroupNode.send_room``, which each send counts down and
every other step of the node sets back to 0): the check was a tenth of a sender's
CPU per 100-byte message in an S_b group, and 6% in a total-order one (whose
pacing by the order is counted in too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from m2mc.group.wire_bounds import MAX_PID
from m2mc.kinds import Order
from m2mc.wire.packet import HEADER_SIZE, MAX_FRAGMENT

if TYPE_CHECKING:
    from collections.abc import Mapping

    from m2mc.group.config import GroupConfig
    from m2mc.group.instance import GroupInstance
    from m2mc.wire.m2mp import M2MPLayer

__all__ = ["RECORD_OVERHEAD", "BacklogPort", "must_wait", "room_made", "send_room"]


class BacklogPort(Protocol):
    """The node as its back-pressure rule sees it (a GroupNode)."""

    @property
    def config(self) -> GroupConfig: ...
    @property
    def m2mp(self) -> M2MPLayer: ...
    @property
    def outbox(self) -> list[bytes]: ...  # group messages made since the driver last ran
    @property
    def groups(self) -> Mapping[str, GroupInstance]: ...
    @property
    def send_backlog(self) -> int: ...
    @property
    def send_backlog_bytes(self) -> int: ...

# The most a data record of an S_b or total-order group adds to its payload (a sent
# record has no position or vector clock; codec.record_size): the
# payload's length prefix, the array header, two process ids and two seqnos.
RECORD_OVERHEAD = 5 + 3 + 2 * MAX_PID + 2 * 9
# Read once per message: a module global is faster than Order.SB, an enum's
# attribute lookup.
_SB = Order.SB
_TOTAL = Order.TOTAL


def must_wait(node: BacklogPort, size: int) -> bool:
    """True while a message of ``size`` bytes must wait before ``node.send`` takes it."""
    m2mp = node.m2mp
    out = node.outbox  # group messages made since the driver last ran (stream chunks)
    packets = m2mp.queued_packets
    held = m2mp.queued_bytes
    if out:
        packets += len(out)
        held += sum(map(len, out))
    for inst in node.groups.values():  # (a loop: a generator costs more, every send)
        if inst.window.blocked or inst.ordering.blocked:
            return True  # receivers are a window behind (group/window.py), or the order
        packets += inst.pending_records
        held += inst.pending_bytes
    if not packets:
        return False
    config = node.config
    # (fragment_count inline: this runs for every message sent)
    return (packets >= config.send_backlog or held + size + HEADER_SIZE * (
        -(-size // MAX_FRAGMENT) or 1) > config.send_backlog_bytes)


def room_made(node: BacklogPort) -> bool:
    """True once the backlog is down to half of both bounds: wake blocked senders."""
    config = node.config
    for inst in node.groups.values():
        if inst.window.blocked or inst.ordering.blocked:
            return False
    return (node.send_backlog <= config.send_backlog // 2
            and node.send_backlog_bytes <= config.send_backlog_bytes // 2)


def send_room(node: BacklogPort, size: int) -> int:
    """How many more messages of at most ``size`` payload bytes ``node.send`` takes
    without :func:`must_wait` becoming true, if nothing else changes (a lower bound;
    0: check each). Only for S_b and total-order groups, whose records have a bounded
    overhead; a total-order group's pacing (its ``OrderStrategy.send_room``) counts."""
    m2mp = node.m2mp
    out = node.outbox
    packets = m2mp.queued_packets + len(out)
    held = m2mp.queued_bytes + sum(map(len, out))
    config = node.config
    fragments = -(-size // MAX_FRAGMENT) or 1
    # The k-th next send (from 0) passes while packets + k < send_backlog and held +
    # k * (size + RECORD_OVERHEAD) + size + its headers <= send_backlog_bytes.
    free_bytes = config.send_backlog_bytes - size - HEADER_SIZE * fragments
    room = config.send_backlog
    for inst in node.groups.values():
        order = inst.mop.order
        if order is not _SB and order is not _TOTAL:
            return 0  # (a causal record's vector clock has no bound here)
        if order is _TOTAL:  # its sender's pacing (a sent record carries no position)
            room = min(room, inst.ordering.send_room())
        packets += inst.pending_records
        held += inst.pending_bytes
        window = inst.window.room(size)
        if window >= 0:
            room = min(room, window)
    free_bytes -= held
    if free_bytes < 0:
        return 0
    return max(0, min(room, config.send_backlog - packets,
                      free_bytes // (size + RECORD_OVERHEAD) + 1))
