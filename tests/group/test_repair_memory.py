"""A holder forgets the asks it has answered once they are too old to count
(group/repair.py): a holder keeps the asks of the last ``2 * nack_holdoff_max``
seconds, not ``max_pending_repairs`` of them whatever their age, which every node of a
long-lived group used to fill (issue 35 item 4, a day in the simulator). That what is
remembered still counts is tests/group/test_repair_bands.py's."""

from __future__ import annotations

import gc
import random

from m2mc.group.codec import Nack
from m2mc.group.config import GroupConfig
from m2mc.group.repair import Repair
from m2mc.ordering import Message, MessageId
from m2mc.store import MemoryStore

GID = "g"
SENDER = "s"
ASKER = "asker-"


def remembered_asks() -> int:
    """Live (requester, message) pairs of our askers: what the holder remembers."""
    return sum(1 for o in gc.get_objects()
               if type(o) is tuple and len(o) == 2 and isinstance(o[0], str)
               and o[0].startswith(ASKER) and isinstance(o[1], MessageId))


def test_a_day_of_asks_leaves_only_the_recent_ones_remembered() -> None:
    config = GroupConfig()
    store = MemoryStore()
    store.put(GID, Message(MessageId(SENDER, 1), payload=b"hello"), True)
    holder = Repair("h", GID, config, random.Random(1), store)
    members = sorted(["h", SENDER, *(f"m{i}" for i in range(config.repair_everyone + 1))])
    holder.members = lambda: members  # a group large enough for answers in bands
    holder.sender_alive = lambda pid, now: False
    now, step = 0.0, 1.0
    for i in range(20_000):  # a new requester every second: 5.5 hours of asks
        holder.on_nack(Nack(f"{ASKER}{i}", {SENDER: [(1, 1)]}, []), now)
        now += step
    recent = 2 * config.nack_holdoff_max / step
    assert 0 < remembered_asks() <= recent + 1
