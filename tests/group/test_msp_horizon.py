"""MSP answers a catch-up with the history before the requester came into view;
what the group sent after that reached the requester live (or gap repair gets it)."""

from __future__ import annotations

import random

from m2mc.group.codec import SyncReq
from m2mc.group.config import GroupConfig
from m2mc.group.msp import Msp
from m2mc.group.seqsets import Intervals
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import MemoryStore


class Sender:
    """A responder that has received ``count`` messages of ``x``."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.count = 0

    def receive(self, n: int) -> None:
        for _ in range(n):
            self.count += 1
            self.store.put("g", Message(MessageId("x", self.count), ROOT, b"m"), True)

    def digest(self) -> dict[str, Intervals]:
        return {"x": [(1, self.count)]} if self.count else {}

    def high_waters(self) -> dict[str, int]:
        return {"x": self.count}


def responder(sender: Sender) -> Msp:
    config = GroupConfig(sync_backoff=0.0)
    return Msp("r", "g", config, random.Random(1), sender.store, sender.digest,
               sender.high_waters)


def answered(msp: Msp, now: float) -> list[int]:
    """Everything the responder sends: the first response, then the rest of the series."""
    responses = msp.due(now) + msp.due(now + msp.config.sync_collision)
    return [m.mid.seq for resp in responses for m in resp.records]


def test_a_request_handled_late_is_answered_with_history_before_the_join() -> None:
    sender = Sender()
    sender.receive(100)
    msp = responder(sender)
    msp.mark("z", 10.0)  # z joins
    sender.receive(5000)  # the stream goes on; z hears it live
    msp.on_request(SyncReq("z", 1, {}), 10.5)  # z's request, handled late
    assert answered(msp, 11.0) == list(range(1, 101))


def test_a_repeated_request_keeps_the_horizon_of_the_first() -> None:
    sender = Sender()
    sender.receive(10)
    msp = responder(sender)
    msp.on_request(SyncReq("z", 1, {}), 1.0)  # no join seen: the horizon is now
    assert answered(msp, 1.1) == list(range(1, 11))
    sender.receive(500)
    msp.on_request(SyncReq("z", 2, {"x": [(1, 3)]}), 2.0)
    assert answered(msp, 2.1) == list(range(4, 11))


def test_a_request_long_after_the_join_gets_everything_up_to_now() -> None:
    # A restarted member asks again much later: what it missed while down is history.
    sender = Sender()
    msp = responder(sender)
    msp.mark("z", 0.0)
    sender.receive(300)
    msp.on_request(SyncReq("z", 1, {"x": [(1, 100)]}), 60.0)
    assert answered(msp, 61.0) == list(range(101, 301))


def test_marks_are_bounded() -> None:
    sender = Sender()
    msp = responder(sender)
    for i in range(msp.config.max_pssit + 50):
        msp.mark(f"p{i}", float(i))
    assert len(msp.marks) == msp.config.max_pssit
    assert "p0" not in msp.marks and f"p{msp.config.max_pssit + 49}" in msp.marks


def test_a_rejoin_soon_after_the_first_join_moves_the_horizon() -> None:
    # c joins, leaves, and rejoins within a few seconds, before the old horizon would
    # expire; what was sent while it was away must be in its catch-up.
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from harness import Net

    net = Net(seed=3)
    for p in "abc":
        net.add(p)
    gid = str(net.do("a", lambda n: n.create_group("g", net.now)))
    net.run(0.5)
    for p in "bc":
        net.do(p, lambda n: n.join_group(gid, net.now))
    net.run(0.3)
    net.partition(["a", "b"], ["c"])  # c does not hear its own leave answered, nor the data
    net.do("c", lambda n: n.leave_group(gid, net.now))
    prev = None
    for _ in range(200):
        prev = net.send("a", gid, b"x", prev)
    net.run(0.2)
    net.heal()
    net.do("c", lambda n: n.join_group(gid, net.now))
    net.run(3.0)
    net.check_group(gid, ["a", "b", "c"])
    sent = sum(net.nodes[p].group_stats(gid)["messages_sent"] for p in "ab")
    assert sent >= 200  # by MSP, not left to gap repair


def test_two_responders_that_start_together_do_not_both_send_the_history() -> None:
    from m2mc.group.codec import SyncResp

    sender = Sender()
    sender.receive(2000)
    a, b = responder(sender), responder(sender)
    a.pid, b.pid = "a", "b"
    for msp in (a, b):
        msp.mark("z", 1.0)
        msp.on_request(SyncReq("z", 1, {}), 1.0)
    first_a, first_b = a.due(1.0), b.due(1.0)  # both counters ran out at once
    assert len(first_a) == len(first_b) == 1
    a.on_response(first_b[0], 1.005)
    b.on_response(first_a[0], 1.005)
    rest_a, rest_b = a.due(1.1), b.due(1.1)
    assert rest_b == [] and b.stats.responses_suppressed > 0
    records = [m.mid.seq for r in [*first_a, *rest_a] for m in r.records]
    assert records == list(range(1, 2001))
    assert all(isinstance(r, SyncResp) for r in rest_a) and rest_a[-1].remaining == 0
