"""Total order at its bounds: a side without a majority holds its messages (at
most ``max_unstamped``; beyond, ``send`` refuses with BufferFullError instead of
losing them), a sequencer without a majority stops stamping after
``max_uncommitted`` stamps; after the heal everything held is delivered, in one
order, everywhere."""

from __future__ import annotations

import pytest

from m2mc.errors import BufferFullError
from m2mc.group.config import GroupConfig
from m2mc.ordering import MessageId

from .harness import Net


def _net(**bounds: int) -> tuple[Net, str]:
    net = Net(seed=53, loss=0.02, config=lambda: GroupConfig(**bounds))  # type: ignore[arg-type]
    for pid in ("a", "b", "c"):
        net.add(pid)
    gid = str(net.do("a", lambda n: n.create_group("t", net.now, order="total")))
    net.run(0.3)
    for pid in ("b", "c"):
        net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(1.5)
    return net, gid


def _same_order(net: Net, gid: str) -> None:
    net.check_group(gid, ["a", "b", "c"])
    sequences = [net.delivered[pid][gid] for pid in ("a", "b", "c")]
    assert sequences[0] == sequences[1] == sequences[2]


def test_a_minority_holds_at_most_max_unstamped_and_send_says_so() -> None:
    net, gid = _net(max_unstamped=20)
    net.partition(["a", "b"], ["c"])  # c alone: no majority
    held: list[MessageId] = []
    for i in range(20):
        held.append(net.send("c", gid, f"held {i}".encode()))
        net.run(0.02)
    assert len(net.nodes["c"].groups[gid].mop.unstamped) == 20
    with pytest.raises(BufferFullError):
        net.nodes["c"].send(gid, b"one too many", net.now)
    assert net.nodes["c"].groups[gid].mop.own_seq == 20  # no identity used up
    assert not set(held) & set(net.delivered["c"].get(gid, []))  # nothing delivered meanwhile
    for i in range(5):
        net.send("ab"[i % 2], gid, f"majority {i}".encode())
        net.run(0.05)
    net.heal()
    # c first gets its own messages ordered (the buffer is full: it refuses others'
    # data until then, and repair fetches them again afterwards).
    net.run(15.0)
    _same_order(net, gid)
    net.send("c", gid, b"room again")
    net.run(2.0)
    _same_order(net, gid)


def test_a_sequencer_without_a_majority_stops_at_max_uncommitted() -> None:
    net, gid = _net(max_uncommitted=8)
    net.partition(["a"], ["b", "c"])  # the sequencer alone
    for i in range(15):
        net.send("a", gid, f"a {i}".encode())
        net.run(0.02)
    log = net.nodes["a"].groups[gid].mop.log
    assert log.is_leader and log.high - log.commit_b == 8 and log.stats.log_full > 0
    net.run(6.0)  # b and c take over meanwhile, and go on
    for i in range(6):
        net.send("bc"[i % 2], gid, f"bc {i}".encode())
        net.run(0.05)
    net.heal()
    net.run(8.0)
    _same_order(net, gid)


def test_decided_positions_whose_data_is_missing_are_bounded_and_asked_for_again() -> None:
    from m2mc.group.total.mop import TotalMop
    from m2mc.ordering import Message
    from m2mc.store import MemoryStore

    mop = TotalMop("r", "g", "total", GroupConfig(max_unstamped=4), MemoryStore())
    mop.log.is_member = lambda pid: True
    mids = [MessageId("s", i) for i in range(1, 11)]
    mop.log.on_decided(list(enumerate(mids, start=1)))  # ten positions, no data yet
    assert mop.pump() == []
    assert len(mop.stamps) <= 5  # the bound, and the position delivery waits for
    assert mop.missing_gseqs()  # the others are asked for again
    delivered: list[Message] = []
    for mid in mids:  # the data arrives (a repair); what does not fit is refused ...
        _, out = mop.accept(Message(mid, payload=b"x"))
        delivered += out
    mop.log.on_decided(list(enumerate(mids, start=1)))  # ... the NACKed positions come
    delivered += mop.pump()
    assert set(mop.missing()) == set(mids) - {m.mid for m in delivered}  # NACKed by id
    for mid in mop.missing():
        _, out = mop.accept(Message(mid, payload=b"x"))
        delivered += out
    assert [m.mid for m in delivered] == mids
    assert [m.gseq for m in delivered] == list(range(1, 11))
    assert mop.missing_gseqs() == [] and mop.stamps == {} and mop.unstamped == {}
