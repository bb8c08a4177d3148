"""Causal, FIFO and total order groups under loss; the total-order sequencer
hands over when it leaves and is replaced when it goes silent."""

from __future__ import annotations

import pytest

from m2mc.ordering import MessageId

from .harness import Net


def _group(net: Net, order: str, pids: list[str]) -> str:
    for pid in pids:
        net.add(pid)
    gid = str(net.do(pids[0], lambda n: n.create_group(order, net.now, order=order)))
    net.run(0.3)
    for pid in pids[1:]:  # by name and order: under loss its advertisement may not be in
        net.do(pid, lambda n: n.join_group(gid, net.now, order=order))
    net.run(1.0)
    return gid


def _sequence_of(net: Net, pid: str, gid: str) -> list[MessageId]:
    return net.delivered[pid][gid]


@pytest.mark.parametrize("order", ["causal", "fifo", "total", "sb"])
def test_order_under_loss(order: str) -> None:
    net = Net(seed=23, loss=0.15)
    pids = ["a", "b", "c", "d"]
    gid = _group(net, order, pids)
    last: MessageId | None = None
    for i in range(80):
        sender = pids[i % 4]
        # FIFO only promises per-sender order: replies stay within one sender there.
        parent = last if order != "fifo" else None
        last = net.send(sender, gid, f"{order}{i}".encode(), reply_to=parent)
        net.run(0.005)
    net.run(6.0)
    net.check_group(gid, pids)
    sequences = [_sequence_of(net, pid, gid) for pid in pids]
    for seq in sequences:
        per_sender: dict[str, list[int]] = {}
        for mid in seq:
            per_sender.setdefault(mid.pid, []).append(mid.seq)
        if order in ("fifo", "causal", "total"):
            assert all(s == sorted(s) for s in per_sender.values())
    if order == "total":
        assert all(seq == sequences[0] for seq in sequences)


def test_total_order_sequencer_hands_over_on_leave() -> None:
    net = Net(seed=29, loss=0.05)
    pids = ["a", "b", "c"]
    gid = _group(net, "total", pids)
    for i in range(10):
        net.send(pids[i % 3], gid, b"x")
    net.run(1.0)
    assert net.nodes["a"].groups[gid].mop.is_sequencer
    net.do("a", lambda n: n.leave_group(gid, net.now))
    net.run(1.0)
    assert net.nodes["b"].groups[gid].mop.is_sequencer
    for i in range(10):
        net.send(pids[1 + i % 2], gid, b"y")
    net.run(3.0)
    net.check_group(gid, ["b", "c"])
    assert _sequence_of(net, "b", gid) == _sequence_of(net, "c", gid)


def test_total_order_silent_sequencer_is_replaced() -> None:
    net = Net(seed=31)
    pids = ["a", "b", "c"]
    gid = _group(net, "total", pids)
    net.send("b", gid, b"before")
    net.run(1.0)
    net.crash("a")
    for i in range(6):
        net.send(pids[1 + i % 2], gid, b"during")
    net.run(10.0)
    assert net.nodes["b"].groups[gid].mop.is_sequencer
    net.check_group(gid, ["b", "c"])
    assert _sequence_of(net, "b", gid) == _sequence_of(net, "c", gid)


def test_lower_id_joining_takes_the_sequencer_role() -> None:
    net = Net(seed=37)
    gid = _group(net, "total", ["m", "n"])
    net.add("a")
    net.run(0.5)  # discovery: a learns the group and its order from m's grpsInfoList
    net.do("a", lambda n: n.join_group(gid, net.now))
    net.run(2.0)
    assert net.nodes["a"].groups[gid].mop.is_sequencer
    assert not net.nodes["m"].groups[gid].mop.is_sequencer
    for i in range(9):
        net.send("amn"[i % 3], gid, b"z")
    net.run(3.0)
    net.check_group(gid, ["a", "m", "n"])
    assert _sequence_of(net, "m", gid)[-9:] == _sequence_of(net, "a", gid)[-9:]
