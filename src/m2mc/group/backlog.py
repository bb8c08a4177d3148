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
(:mod:`m2mc.group.window`): what the node has sent, not what it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m2mc.wire.packet import HEADER_SIZE, MAX_FRAGMENT

if TYPE_CHECKING:
    from m2mc.group.manager import GroupNode

__all__ = ["must_wait", "room_made"]


def must_wait(node: GroupNode, size: int) -> bool:
    """True while a message of ``size`` bytes must wait before ``node.send`` takes it."""
    m2mp = node.m2mp
    out = node._out  # group messages made since the driver last ran (stream chunks)
    packets = m2mp.queued_packets
    held = m2mp.queued_bytes
    if out:
        packets += len(out)
        held += sum(map(len, out))
    for inst in node.groups.values():  # (a loop: a generator costs more, every send)
        if inst.window.blocked:
            return True  # receivers are a window behind (group/window.py)
        packets += inst.pending_records
        held += inst.pending_bytes
    if not packets:
        return False
    config = node.config
    # (fragment_count inline: this runs for every message sent)
    return (packets >= config.send_backlog or held + size + HEADER_SIZE * (
        -(-size // MAX_FRAGMENT) or 1) > config.send_backlog_bytes)


def room_made(node: GroupNode) -> bool:
    """True once the backlog is down to half of both bounds: wake blocked senders."""
    config = node.config
    for inst in node.groups.values():
        if inst.window.blocked:
            return False
    return (node.send_backlog <= config.send_backlog // 2
            and node.send_backlog_bytes <= config.send_backlog_bytes // 2)
