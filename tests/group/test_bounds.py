"""Every bound of the group layer that an outsider can fill, filled from outside:
the table stops at its bound, the specified behaviour happens there, and the
bound's counter says so (docs/security.md, bounds table)."""

from __future__ import annotations

import random
from collections.abc import Callable

from m2mc.group.codec import (
    DISCOVERY_TAG,
    Body,
    Data,
    Decided,
    GrpInfo,
    GrpsInfo,
    Join,
    MemberEntry,
    Nack,
    Status,
    SyncReq,
    SyncResp,
    encode,
    group_tag,
    record_size,
)
from m2mc.group.config import GroupConfig
from m2mc.group.events import GroupDiscovered
from m2mc.group.manager import GroupNode
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.wire.packet import fragments

from .harness import Net

GID = "g"
TAG = group_tag(GID)


def group(config: Callable[[], GroupConfig], members: str = "ab", order: str = "sb",
          messages: int = 0, seed: int = 1) -> Net:
    """An open group of ``members``, the first of which sent ``messages``."""
    net = Net(seed=seed, config=config)
    for pid in members:
        net.add(pid)
    net.do(members[0], lambda n: n.create_group("bounds", net.now, order, gid=GID))
    for pid in members[1:]:
        net.do(pid, lambda n: n.join_group(GID, net.now, order=order))
    net.run(1.0)
    for i in range(messages):
        net.send(members[0], GID, f"message {i}".encode())
    net.run(2.0)
    return net


RNG = random.Random(0)  # M2MP message ids of the injected messages


def inject(net: Net, body: Body, to: str | None = None, tag: bytes = TAG) -> None:
    for datagram in fragments(RNG.getrandbits(32), encode(tag, body)):
        net.inject(datagram, to=to)


def msp_stats(node: GroupNode) -> dict[str, int]:
    return node.group_stats(GID)


# ------------------------------------------------------------------ MSP
def test_sync_series_stops_at_max_sync_messages_and_gap_repair_fetches_the_rest() -> None:
    net = group(lambda: GroupConfig(max_sync_messages=10), members="a", messages=35)
    a = net.nodes["a"]
    net.add("c")
    net.do("c", lambda n: n.join_group(GID, net.now, order="sb"))
    net.run(0.6)  # the catch-up series went out
    stats = msp_stats(a)
    assert stats["messages_sent"] == 10 and stats["sync_truncated"] == 1
    net.run(5.0)
    net.check_group(GID, ["a", "c"])  # the rest came by NACK repair
    assert msp_stats(a)["retransmitted"] >= 25


def test_sync_series_stops_at_max_sync_bytes() -> None:
    limit = 2000
    net = Net(seed=2, config=lambda: GroupConfig(max_sync_bytes=limit))
    net.add("a")
    net.do("a", lambda n: n.create_group("bounds", net.now, gid=GID))
    for i in range(30):
        net.send("a", GID, bytes([i]) * 300)
    net.run(1.0)
    size = record_size(Message(MessageId("a", 1), ROOT, bytes(300)))
    net.add("c")
    net.do("c", lambda n: n.join_group(GID, net.now, order="sb"))
    net.run(0.6)
    stats = msp_stats(net.nodes["a"])
    assert stats["sync_truncated"] == 1
    assert stats["messages_sent"] == limit // size
    net.run(5.0)
    net.check_group(GID, ["a", "c"])


def test_outsiders_sync_request_is_refused() -> None:
    net = group(GroupConfig, messages=40)
    before = {pid: msp_stats(net.nodes[pid]) for pid in "ab"}
    inject(net, SyncReq("eve", 1, {}))  # an empty digest: "send me everything"
    inject(net, SyncResp("mallory", "ghost", 1, [], 3))  # a response to a non-member
    net.run(2.0)
    for pid in "ab":
        stats = msp_stats(net.nodes[pid])
        assert stats["requests_refused"] - before[pid]["requests_refused"] == 1
        assert stats["responses_ignored"] - before[pid]["responses_ignored"] == 1
        assert stats["messages_sent"] == before[pid]["messages_sent"]
        assert stats["responses_sent"] == before[pid]["responses_sent"]
        assert stats["mirs"] == 0


def test_request_overtaking_its_join_is_answered_when_the_join_arrives() -> None:
    net = group(GroupConfig, members="a", messages=5)
    inject(net, SyncReq("d", 1, {}))
    net.run(0.1)
    inject(net, Join("d", 1, "sb", ""))
    net.run(1.0)
    stats = msp_stats(net.nodes["a"])
    assert stats["requests_refused"] == 1 and stats["requests_admitted_late"] == 1
    assert stats["messages_sent"] == 5


def test_mirs_refused_at_max_mirs() -> None:
    net = group(lambda: GroupConfig(max_mirs=3), members="a", messages=5)
    for i in range(6):  # forged newcomers of an open group, each asking at once
        inject(net, Join(f"f{i}", 1, "sb", ""))
    net.run(0.01)
    for i in range(6):
        inject(net, SyncReq(f"f{i}", 1, {}))
    net.run(0.01)
    a = net.nodes["a"]
    stats = msp_stats(a)
    assert stats["requests_answered"] == 3 and stats["mirs_refused"] == 3
    net.run(2.0)
    # The three admitted were answered; the five messages went out once for all three
    # (every requester hears every response: docs/group.md section 6, Msp.broadcast).
    assert msp_stats(a)["responses_sent"] == 3
    assert msp_stats(a)["messages_sent"] == 5


def test_digest_of_our_request_and_of_theirs_is_cut_at_max_digest_intervals() -> None:
    net = group(lambda: GroupConfig(max_digest_intervals=5))
    b = net.nodes["b"]
    # Records of an invented sender with a gap after each: 11 intervals in b's digest.
    inject(net, Data("x", [Message(MessageId("x", s), ROOT, b"x") for s in range(1, 23, 2)]),
           to="b")
    net.run(0.01)
    inst = b.groups[GID]
    request = inst.msp.request(net.now)
    assert sum(len(ivs) for ivs in request.digest.values()) == 5
    assert request.digest["x"] == [(13, 13), (15, 15), (17, 17), (19, 19), (21, 21)]
    a = net.nodes["a"]
    inject(net, SyncReq("b", 7, {"x": [(s, s) for s in range(1, 41, 2)]}), to="a")
    net.run(0.01)
    assert msp_stats(b)["digests_truncated"] == 1
    assert msp_stats(a)["digests_truncated"] == 1


# ------------------------------------------------------------------ repair
def test_pending_repairs_stop_at_max_pending_repairs() -> None:
    net = group(lambda: GroupConfig(max_pending_repairs=10), messages=30)
    a = net.nodes["a"]
    inject(net, Nack("b", {"a": [(1, 30)]}, []), to="a")
    inject(net, Nack("b", {"a": [(11, 20)]}, []), to="a")
    net.run(0.001)  # before the repair back-off
    assert a.groups[GID].repair.pending_repairs == 10
    assert msp_stats(a)["repairs_refused"] == 2
    net.run(1.0)
    assert msp_stats(a)["retransmitted"] == 10


def test_nack_intervals_past_max_nack_intervals_are_ignored() -> None:
    net = group(lambda: GroupConfig(max_nack_intervals=4), members="abc", messages=20)
    a = net.nodes["a"]
    net.send("b", GID, b"one of b")
    net.run(1.0)
    ranges = {"a": [(s, s) for s in (1, 3, 5)], "b": [(1, 1)], "c": [(1, 1)]}
    ranges["a"] += [(s, s) for s in range(7, 20, 2)]
    inject(net, Nack("c", ranges, [(1, 5)]), to="a")
    net.run(0.001)
    pending = a.groups[GID].repair.pending
    assert sorted(str(mid) for mid in pending) == ["a:1", "a:3", "a:5", "a:7"]
    # 10 of a, b's and c's one each are past the bound; so is the gseq interval past one.
    assert msp_stats(a)["nack_intervals_ignored"] == 6 + 1 + 1 + 0


def test_overheard_nack_holdoffs_are_bounded_by_max_senders() -> None:
    net = group(lambda: GroupConfig(max_senders=16))
    a = net.nodes["a"]
    inject(net, Nack("b", {f"p{i}": [(1, 1)] for i in range(100)}, []), to="a")
    net.run(0.001)
    stats = msp_stats(a)
    assert stats["holdoff_senders"] == 16 and stats["holdoffs_refused"] == 84
    net.run(1.0)  # the hold-offs expired: new senders are admitted again
    inject(net, Nack("b", {f"q{i}": [(1, 1)] for i in range(4)}, []), to="a")
    net.run(0.001)
    assert msp_stats(a)["holdoff_senders"] == 4
    assert msp_stats(a)["holdoffs_refused"] == 84


def test_status_we_send_keeps_the_highest_max_status_senders() -> None:
    net = group(lambda: GroupConfig(max_status_senders=8))
    a = net.nodes["a"]
    for i in range(20):  # 20 invented senders, sender i at seqno i + 1
        inject(net, Data(f"s{i:02}", [Message(MessageId(f"s{i:02}", i + 1), ROOT, b"x")]),
               to="a")
    net.run(0.01)
    status = a.groups[GID].make_status()
    assert sorted(status.summary) == [f"s{i:02}" for i in range(12, 20)]
    assert msp_stats(a)["status_truncated"] >= 1
    # A status naming more is read up to the bound.
    b = net.nodes["b"]
    summary = {f"t{i:02}": 5 for i in range(20)}
    inject(net, Status("a", 0, summary, (), None, 0), to="b")
    net.run(0.01)
    hw = b.groups[GID].repair.hw
    assert [pid for pid in hw if pid.startswith("t")] == [f"t{i:02}" for i in range(8)]
    assert msp_stats(b)["status_entries_ignored"] == 12


# ------------------------------------------------------------------ MOP (total order)
def test_unstamped_data_and_early_stamps_stop_at_max_unstamped() -> None:
    net = group(lambda: GroupConfig(max_unstamped=8), order="total")
    b = net.nodes["b"]  # not the sequencer: data waits for its stamp here
    refused = b.node_stats()["refused"]
    inject(net, Data("x", [Message(MessageId("x", s), ROOT, b"x") for s in range(1, 21)]),
           to="b")
    net.run(0.01)
    stats = msp_stats(b)
    assert stats["unstamped"] == 8 and stats["unstamped_refused"] == 12
    assert b.node_stats()["refused"] - refused == 12
    # Committed positions of data b lacks (what a forged DECIDED claims): the next one
    # always fits, the others up to the bound; past it a position is forgotten by the
    # log (asked for again once there is room) and counted.
    mop = b.groups[GID].mop
    base = mop.core.next_gseq
    claimed = [(base + s, MessageId("y", s + 1)) for s in range(20)]
    inject(net, Decided("a", claimed), to="b")
    net.run(0.01)
    stats = msp_stats(b)
    assert len(mop.stamps) == 8 and stats["stamps_refused"] == 12


# ------------------------------------------------------------------ GJLP
def test_groups_past_max_groups_are_dropped_and_counted() -> None:
    net = Net(seed=3, config=lambda: GroupConfig(max_groups=8))
    z = net.add("z")
    net.do("z", lambda n: n.create_group("mine", net.now, gid="mine"))
    net.run(1.0)
    spam = tuple(GrpInfo(f"spam/{i}", "", "sb", (MemberEntry("m", 1, True),))
                 for i in range(20))
    inject(net, GrpsInfo("m", spam), tag=DISCOVERY_TAG)
    net.run(0.01)
    assert len(z.gjlp.giit) + len(z.gjlp.discovered) == 8
    assert z.node_stats()["gjlp_groups_dropped"] == 13
    offered = [e.info.gid for e in net.events["z"] if isinstance(e, GroupDiscovered)]
    assert offered == [f"spam/{i}" for i in range(7)]
    # A known group still updates; a group the table has no room for is still dropped,
    # and can be joined by name.
    update = GrpInfo("spam/0", "", "sb", (MemberEntry("m2", 1, True),))
    inject(net, GrpsInfo("m2", (update, GrpInfo("late", "", "sb", ()))), tag=DISCOVERY_TAG)
    net.run(0.01)
    assert {e.pid for e in z.gjlp.discovered["spam/0"].members} == {"m", "m2"}
    assert "late" not in z.gjlp.discovered and z.node_stats()["gjlp_groups_dropped"] == 14
    net.do("z", lambda n: n.join_group("late", net.now, order="sb"))
    assert z.is_member("late")


def test_pssit_forgets_the_least_recently_heard_requester_past_max_pssit() -> None:
    net = group(lambda: GroupConfig(max_pssit=3), members="a", messages=2)
    for i in range(5):
        inject(net, Join(f"f{i}", 1, "sb", ""))
    net.run(0.01)
    for i in range(5):
        inject(net, SyncReq(f"f{i}", 4, {}))
        net.run(0.001)
    msp = net.nodes["a"].groups[GID].msp
    assert list(msp.pssit) == ["f2", "f3", "f4"]
    assert all(pid in ("f2", "f3", "f4") for pid, _ in msp.mirs)  # the others' MIRs went


def test_records_of_senders_past_max_senders_are_dropped_but_members_are_tracked() -> None:
    net = group(lambda: GroupConfig(max_senders=8))
    a = net.nodes["a"]
    for i in range(12):
        inject(net, Data(f"s{i}", [Message(MessageId(f"s{i}", 1), ROOT, b"x")]), to="a")
    net.run(0.01)
    delivered = net.delivered["a"].get(GID, [])
    assert [str(m) for m in delivered] == [f"s{i}:1" for i in range(8)]
    assert msp_stats(a)["senders_refused"] == 4
    m = net.send("b", GID, b"a member is tracked past the bound")
    net.run(1.0)
    assert m in net.delivered["a"][GID]


def test_oversized_group_messages_are_dropped_undecoded() -> None:
    net = group(lambda: GroupConfig(max_message_bytes=1000))
    inject(net, Data("x", [Message(MessageId("x", 1), ROOT, bytes(2000))]), to="a")
    inject(net, Data("x", [Message(MessageId("x", 2), ROOT, bytes(500))]), to="a")
    net.run(0.01)
    a = net.nodes["a"]
    assert a.node_stats()["oversized"] == 1
    assert [str(m) for m in net.delivered["a"][GID]] == ["x:2"]


def test_absurd_sequence_numbers_are_dropped_and_counted() -> None:
    net = group(lambda: GroupConfig(max_seq=1 << 30, max_seq_jump=1000))
    a = net.nodes["a"]
    inject(net, Data("x", [Message(MessageId("x", 1 << 30), ROOT, b"x")]), to="a")  # >= max_seq
    inject(net, Data("y", [Message(MessageId("y", 1001), ROOT, b"y")]), to="a")  # a jump
    inject(net, Status("z", 5000, {}, (), None, 0), to="a")  # a high-water jump
    inject(net, Data("y", [Message(MessageId("y", 1000), ROOT, b"y")]), to="a")  # just within
    net.run(0.01)
    stats = a.node_stats()
    group_stats = msp_stats(a)
    assert stats["malformed"] == 1
    assert group_stats["absurd_seq"] == 1 and group_stats["absurd_high_water"] == 1
    assert "z" not in a.groups[GID].repair.hw
    assert a.groups[GID].repair.hw["y"] == 1000
