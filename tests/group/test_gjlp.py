"""GJLP: advertisement replies are backed off and suppressed (no broadcast storm),
the GIIT keeps N/A rows for rejected groups until the next advertisement, and
membership lists merge by version so a process that left can come back."""

from __future__ import annotations

import random

from m2mc.group.codec import HEADER_SIZE, Adv, Kind, MemberEntry
from m2mc.group.config import GroupConfig
from m2mc.group.events import GroupDiscovered
from m2mc.group.gjlp import MEMBER, Gjlp
from m2mc.group.membership import Membership
from m2mc.wire.packet import HEADER_SIZE as M2MP_HEADER

from .harness import Net


def _replies_per_join(n: int, backoff: float, seed: int, named: bool = False) -> int:
    count = [0]

    def counter(datagram: bytes) -> None:
        if (len(datagram) > M2MP_HEADER + HEADER_SIZE and datagram[4:8] == b"\x80\x00\x00\x00"
                and datagram[M2MP_HEADER + 11] == Kind.GRPS_INFO):
            count[0] += 1

    net = Net(seed=seed, config=lambda: GroupConfig(adv_reply_backoff=backoff))
    for i in range(n):
        if named:  # replies then carry the members' names (suppressed alike)
            net.names[f"p{i:02d}"] = f"member {i}"
        net.add(f"p{i:02d}")
        net.do(f"p{i:02d}", lambda node: node.join_group("room", net.now, order="sb"))
    net.run(1.0)
    net.counter = counter
    newcomer = net.add("zz")  # advertises on start
    net.run(0.5)
    assert newcomer.group_info("room") is not None
    return count[0]


def test_advertisement_replies_are_suppressed() -> None:
    n = 20
    with_suppression = [_replies_per_join(n, 0.2, seed) for seed in (1, 2)]
    seed_behaviour = _replies_per_join(n, 0.0, 1)  # no back-off: everyone answers
    assert seed_behaviour >= n - 1
    assert max(with_suppression) <= 2, with_suppression
    named = [_replies_per_join(n, 0.2, seed, named=True) for seed in (1, 2)]
    assert max(named) <= 2, named


def test_rejected_group_is_na_until_next_advertisement() -> None:
    net = Net(seed=2)
    net.add("a")
    net.add("b")
    gid = str(net.do("a", lambda n: n.create_group("g", net.now)))
    net.run(0.5)
    b = net.nodes["b"]

    def discovered() -> list[str]:
        found = [e.info.gid for e in net.events.pop("b", []) if isinstance(e, GroupDiscovered)]
        return found

    assert discovered() == [gid]
    b.reject_group(gid)
    assert b.gjlp.giit[gid].state == "rejected"
    net.do("a", lambda n: n.advertise(net.now))  # a's advertisement: b's N/A row holds
    net.run(0.5)
    assert discovered() == []
    net.do("b", lambda n: n.advertise(net.now))  # b's own advertisement clears N/A rows
    net.run(0.5)
    assert discovered() == [gid]


def test_membership_merge_keeps_the_newest_word_per_process() -> None:
    m = Membership(10, [MemberEntry("a", 1, True), MemberEntry("b", 1, True)])
    m.merge([MemberEntry("b", 2, False)])  # b left
    assert (m.current(), m.departed()) == (["a"], ["b"])
    m.merge([MemberEntry("b", 1, True)])  # stale news of b's first join changes nothing
    assert m.current() == ["a"]
    m.merge([MemberEntry("b", 3, True)])  # b rejoined: current again (the seed's rule
    assert m.current() == ["a", "b"]       # would have kept it in lMemList forever)
    assert m.covers([MemberEntry("b", 2, False), MemberEntry("a", 1, True)])
    assert not m.covers([MemberEntry("c", 1, True)])
    full = Membership(1, [MemberEntry("a", 1, True)])
    assert not full.apply(MemberEntry("x", 1, True)) and full.refused == 1


def _reply_time(seed: int, grow_to: int) -> float:
    """When a member that had just joined (itself the only member it knew) answers an
    advertisement heard at 0, after hearing of ``grow_to`` members in all at 1 ms."""
    gjlp = Gjlp("me", GroupConfig(adv_reply_backoff=0.2), random.Random(seed))
    row = gjlp.row("room")
    row.state = MEMBER
    row.membership.apply(MemberEntry("me", 1, True))
    gjlp.on_adv(Adv("newcomer"), 0.0)
    row.membership.merge([MemberEntry(f"p{i:03d}", 1, True) for i in range(grow_to - 1)])
    now = 0.001
    while (deadline := gjlp.next_deadline()) is not None:
        now = max(now, deadline)
        reply = gjlp.reply_due(now)
        if reply is not None:
            assert [g.gid for g in reply.groups] == ["room"]
            assert len(reply.groups[0].members) == grow_to
            return now
    raise AssertionError("no reply")


def test_a_member_that_heard_of_its_crowd_late_draws_again() -> None:
    """It drew uniform for a crowd of one; by its reply's time it knows of 50 members,
    and draws again from the truncated exponential, where few answer early: the early
    answers are what make a join cost more than one reply (docs/decisions.md,
    "Advertisement replies in a crowd")."""
    alone = [_reply_time(seed, 1) for seed in range(400)]
    crowd = [_reply_time(seed, 50) for seed in range(400)]
    assert all(0.0 <= t <= 0.2 for t in alone + crowd)
    early_alone = sum(t < 0.1 for t in alone) / len(alone)
    early_crowd = sum(t < 0.1 for t in crowd) / len(crowd)
    assert 0.4 < early_alone < 0.6  # uniform: about half in the first half
    assert early_crowd < 0.1, early_crowd  # max(uniform, exponential): about 4%
