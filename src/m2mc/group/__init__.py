"""The M2MC group layer (seeds/000): Group Manager, GJLP, MOP, MSP and loss repair,
as sans-IO cores. :class:`GroupNode` is the whole stack of one process; drivers
(asyncio runtime, simulator) feed it datagrams and time. See docs/group.md."""

from m2mc.group.config import ORDERS, GroupConfig
from m2mc.group.events import (
    CatchUpProgress,
    Delivered,
    DeliveredBatch,
    GroupCreated,
    GroupDiscovered,
    GroupEvent,
    MemberJoined,
    MemberLeft,
    MemberNamed,
    MessagesSkipped,
    Reconnected,
    Rejoined,
)
from m2mc.group.manager import GroupNode

__all__ = [
    "ORDERS",
    "CatchUpProgress",
    "Delivered",
    "DeliveredBatch",
    "GroupConfig",
    "GroupCreated",
    "GroupDiscovered",
    "GroupEvent",
    "GroupNode",
    "MemberJoined",
    "MemberLeft",
    "MemberNamed",
    "MessagesSkipped",
    "Reconnected",
    "Rejoined",
]
