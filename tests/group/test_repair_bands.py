"""Who answers a NACK (group/repair.py): the message's sender at once; other holders
in bands of ``repair_band``, one band per ask, ranked the same way at every node.

Fifty holders of one message, a requester asking again and again: each ask is
answered by at most 1 + repair_band holders, never all fifty, and the bands take
turns until every holder has been called."""

from __future__ import annotations

import random

import pytest

from m2mc.group.codec import Nack
from m2mc.group.config import GroupConfig
from m2mc.group.repair import Repair
from m2mc.ordering import Message, MessageId
from m2mc.store import MemoryStore

GID = "g"
SENDER = "s"
REQUESTER = "r"
HOLDERS = [f"h{i:02d}" for i in range(50)]
MEMBERS = sorted([SENDER, REQUESTER, *HOLDERS])
MESSAGE = Message(MessageId(SENDER, 1), payload=b"hello")
ASK = Nack(REQUESTER, {SENDER: [(1, 1)]}, [])


def holder(pid: str, *, sender_alive: bool, config: GroupConfig | None = None) -> Repair:
    store = MemoryStore()
    store.put(GID, MESSAGE, True)
    repair = Repair(pid, GID, config or GroupConfig(), random.Random(pid), store)
    repair.members = lambda: MEMBERS
    repair.sender_alive = lambda p, now: sender_alive and p == SENDER
    return repair


def answering(repairs: dict[str, Repair], now: float) -> set[str]:
    """Send one ask to every holder; who retransmits once its back-off is over?"""
    for r in repairs.values():
        r.on_nack(ASK, now)
    return {pid for pid, r in repairs.items() if r.repair_due(now + 10.0)}


def test_while_the_sender_is_heard_it_alone_answers_a_first_ask() -> None:
    repairs = {pid: holder(pid, sender_alive=True) for pid in [SENDER, *HOLDERS]}
    assert answering(repairs, 0.0) == {SENDER}


@pytest.mark.parametrize("alive", [True, False])
def test_each_further_ask_calls_one_band_and_the_bands_take_turns(alive: bool) -> None:
    band = GroupConfig().repair_band
    repairs = {pid: holder(pid, sender_alive=alive) for pid in HOLDERS}
    called: list[set[str]] = []
    now = 0.0
    if alive:  # the first ask was the sender's to answer
        assert answering(repairs, now) == set()
        now += 0.5
    bands = -(-(len(MEMBERS) - 1) // band)  # every member but the requester is ranked
    for _ in range(bands):
        called.append(answering(repairs, now))
        now += 0.5
    # The holders agree on the ranking: one band a time, each holder in one band.
    assert all(1 <= len(c) <= band for c in called)
    assert sum(map(len, called)) == len(HOLDERS)
    assert set().union(*called) == set(HOLDERS)  # every holder gets its turn
    assert answering(repairs, now) == called[0]  # and round again


def test_a_band_waits_longer_than_the_sender_and_a_copy_heard_cancels_it() -> None:
    repairs = {pid: holder(pid, sender_alive=False) for pid in [SENDER, *HOLDERS]}
    for r in repairs.values():
        r.on_nack(ASK, 0.0)
    own = repairs[SENDER].repair_deadline
    backups = [r for pid, r in repairs.items() if pid != SENDER and r.pending]
    assert own is not None and len(backups) == GroupConfig().repair_band
    for r in backups:
        deadline = r.repair_deadline
        assert deadline is not None and deadline > own
        r.overheard(MESSAGE.mid)  # the sender's copy went by
        assert r.repair_due(deadline) == []
    assert repairs[SENDER].repair_due(1.0) == [MESSAGE]


def test_a_requester_quiet_for_long_starts_again_at_its_first_ask() -> None:
    config = GroupConfig()
    repairs = {pid: holder(pid, sender_alive=True) for pid in HOLDERS}
    assert answering(repairs, 0.0) == set()
    first_band = answering(repairs, 0.5)
    later = 0.5 + 2 * config.nack_holdoff_max + 1
    assert answering(repairs, later) == set()  # a first ask again: the sender's
    assert answering(repairs, later + 0.5) == first_band


def test_alone_with_the_requester_a_holder_answers_every_ask() -> None:
    store = MemoryStore()
    store.put(GID, MESSAGE, True)
    repair = Repair("h", GID, GroupConfig(), random.Random(1), store)  # no members known
    repair.on_nack(ASK, 0.0)
    assert repair.repair_due(1.0) == [MESSAGE]
