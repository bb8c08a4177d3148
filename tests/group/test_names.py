"""Display names in the group layer (docs/group.md, "Display names"): a member that never
writes is known by name everywhere from its JOIN; a restart under another name, or a
JOIN someone missed, is told by its status; a late joiner learns the names from the
discovery replies; a keyed group's names come only from its sealed messages; names
never change a view or the total-order log; every table stays bounded."""

from __future__ import annotations

import random

import pytest

from m2mc.group.codec import (
    DISCOVERY_TAG,
    MAX_NAME,
    GrpInfo,
    GrpsInfo,
    Join,
    MemberEntry,
    encode,
    group_tag,
)
from m2mc.group.config import GroupConfig
from m2mc.group.events import GroupDiscovered, MemberJoined, MemberNamed
from m2mc.group.gjlp import MEMBER, GiitRow, Gjlp
from m2mc.group.membership import Membership
from m2mc.group.names import MemberNames
from m2mc.security import GroupSecret
from m2mc.wire.packet import fragments

from .harness import Net

NAMES = {"a": "Alice", "b": "Bob", "c": "Carol", "d": "Dave", "e": "Eve"}
KEY = GroupSecret(bytes(range(32)))
QUIET = GroupConfig(status_interval=1000.0)  # no status before the test is over


def forge(net: Net, tag: bytes, body: object, seed: int = 7) -> None:
    rng = random.Random(seed)
    for datagram in fragments(rng.getrandbits(32), encode(tag, body)):  # type: ignore[arg-type]
        net.inject(datagram)


def group_of(net: Net, pids: str, order: str = "sb", keyed: bool = False) -> str:
    """``pids[0]`` creates a group, the others find it and join; nobody writes."""
    keys = {"team": KEY} if keyed else None
    for pid in pids:
        net.add(pid, keys=keys)
    gid = str(net.do(pids[0], lambda n: n.create_group("quiet", net.now, order=order,
                                                      gid="team" if keyed else None)))
    net.run(0.5)
    for pid in pids[1:]:
        if keyed:
            net.do(pid, lambda n: n.join_group(gid, net.now, order=order, desc="quiet"))
        else:
            net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(0.5)
    return gid


def names_told(net: Net, pid: str, about: str) -> list[str]:
    """The names that ``pid``'s events gave for member ``about``, in order."""
    return [e.name for e in net.events.get(pid, [])
            if isinstance(e, MemberJoined | MemberNamed) and e.pid == about]


# ------------------------------------------------------------------ from the JOIN
@pytest.mark.parametrize("order", ["sb", "total"])
def test_a_member_that_never_writes_is_known_by_name_everywhere_from_its_join(
        order: str) -> None:
    net = Net(seed=1, names=dict(NAMES), config=lambda: QUIET)
    gid = group_of(net, "abcd", order)
    net.add("e")
    net.run(0.5)
    net.do("e", lambda n: n.join_group(gid, net.now))
    net.run(0.1)  # a few one-way delays: the JOIN, and no status of e's (every 1000 s)
    for pid in "abcd":
        assert net.nodes[pid].member_names(gid)["e"] == "Eve", pid
        assert "Eve" in names_told(net, pid, "e"), pid
    joined = [e for e in net.events["a"] if isinstance(e, MemberJoined) and e.pid == "e"]
    assert joined == [MemberJoined(gid, "e", "Eve")]
    assert net.nodes["e"].member_names(gid)["e"] == "Eve"  # its own, at once


def test_a_keyed_group_learns_names_from_its_sealed_joins() -> None:
    net = Net(seed=2, names=dict(NAMES), config=lambda: QUIET)
    gid = group_of(net, "abc", keyed=True)
    for pid in "ab":
        assert net.nodes[pid].member_names(gid)["c"] == "Carol"
    assert net.nodes["a"].member_names(gid) == {"a": "Alice", "b": "Bob", "c": "Carol"}


# ------------------------------------------------------------------ from the STATUS
def test_a_restart_under_another_name_reaches_everyone_by_its_status() -> None:
    net = Net(seed=3, names=dict(NAMES))
    gid = group_of(net, "abc")
    net.run(12.0)  # every member's keepalive: everyone knows everyone
    for pid in "abc":
        assert net.nodes[pid].member_names(gid) == {"a": "Alice", "b": "Bob", "c": "Carol"}
    net.crash("b")
    net.names["b"] = "Robert"
    net.restart("b")  # its log keeps the membership: no JOIN, statuses
    assert net.nodes["b"].member_names(gid) == {"b": "Robert"}
    net.run(1.0)  # the others' answers to its advertisement carry their names
    assert net.nodes["b"].member_names(gid) == {"a": "Alice", "b": "Robert", "c": "Carol"}
    net.run(11.0)  # within its keepalive
    for pid in "ac":
        assert net.nodes[pid].member_names(gid)["b"] == "Robert", pid
        assert names_told(net, pid, "b")[-1] == "Robert"
        assert MemberNamed(gid, "b", "Robert") in net.events[pid]
    # A stale discovery reply (someone still saying "Bob") undoes nothing.
    forge(net, DISCOVERY_TAG, GrpsInfo("a", (GrpInfo(gid, "quiet", "sb", (
        MemberEntry("b", 1, True),), False, (("b", "Bob"),)),)))
    net.run(0.5)
    for pid in "ac":
        assert net.nodes[pid].member_names(gid)["b"] == "Robert", pid


def test_a_member_that_missed_the_join_learns_the_name_from_the_status() -> None:
    net = Net(seed=4, names=dict(NAMES))
    gid = group_of(net, "abc")
    net.add("d")
    net.run(0.5)
    net.partition(["a", "b", "d"], ["c"])
    net.do("d", lambda n: n.join_group(gid, net.now))
    net.run(1.0)
    assert "d" not in net.nodes["c"].member_names(gid)
    net.heal()
    net.run(12.0)
    assert net.nodes["c"].member_names(gid)["d"] == "Dave"
    assert "Dave" in names_told(net, "c", "d")


def test_a_name_changed_at_run_time_or_dropped_is_told_at_once() -> None:
    net = Net(seed=5, names=dict(NAMES), config=lambda: QUIET)
    gid = group_of(net, "abc", order="total")
    views = len([e for e in net.trace.events if e.event == "view"])
    entries = {pid: net.nodes[pid].groups[gid].row.membership.entries() for pid in "abc"}
    log = {pid: dict(net.nodes[pid].groups[gid].mop.log.conf) for pid in "abc"}
    net.do("a", lambda n: n.set_name("Alicia", net.now))
    net.run(0.3)  # status_delay, not the 1000 s status interval
    for pid in "bc":
        assert net.nodes[pid].member_names(gid)["a"] == "Alicia"
        assert net.events[pid][-1] == MemberNamed(gid, "a", "Alicia")
    net.do("a", lambda n: n.set_name("", net.now))
    net.run(0.3)
    for pid in "bc":
        assert "a" not in net.nodes[pid].member_names(gid)
        assert net.events[pid][-1] == MemberNamed(gid, "a", "")
    # Names are beside the membership: no view, no membership entry, no log record changed.
    assert len([e for e in net.trace.events if e.event == "view"]) == views
    for pid in "abc":
        assert net.nodes[pid].groups[gid].row.membership.entries() == entries[pid]
        assert dict(net.nodes[pid].groups[gid].mop.log.conf) == log[pid]


# ------------------------------------------------------------------ from discovery
def test_a_late_joiner_learns_the_names_from_the_discovery_replies() -> None:
    net = Net(seed=6, names=dict(NAMES), config=lambda: QUIET)
    gid = group_of(net, "abc")
    net.do("c", lambda n: n.leave_group(gid, net.now))
    net.run(0.5)
    net.add("d")  # advertises on start; the members answer
    net.run(0.5)
    found = [e.info for e in net.events["d"] if isinstance(e, GroupDiscovered)]
    assert [(i.gid, i.names) for i in found] == [(gid, (("a", "Alice"), ("b", "Bob")))]
    net.do("d", lambda n: n.join_group(gid, net.now))
    assert net.nodes["d"].member_names(gid) == {"a": "Alice", "b": "Bob", "d": "Dave"}


def test_a_keyed_groups_names_never_travel_in_the_clear() -> None:
    net = Net(seed=7, names=dict(NAMES))
    gid = group_of(net, "ab", keyed=True)
    net.run(12.0)  # (a joiner by key learns the earlier members from their statuses)
    assert net.nodes["b"].member_names(gid) == {"a": "Alice", "b": "Bob"}
    net.add("e")  # no key: sees the group, keyed, without its members' names
    net.run(0.5)
    found = [e.info for e in net.events["e"] if isinstance(e, GroupDiscovered)]
    assert [(i.gid, i.keyed, i.names) for i in found] == [(gid, True, ())]
    assert len(found[0].members) == 2


def test_unauthenticated_news_never_names_a_keyed_groups_members() -> None:
    net = Net(seed=8, names=dict(NAMES))
    gid = group_of(net, "abc", keyed=True)
    net.run(12.0)
    forge(net, DISCOVERY_TAG, GrpsInfo("mallory", (GrpInfo(gid, "quiet", "sb", (
        MemberEntry("b", 1, True), MemberEntry("c", 1, True)), False,
        (("b", "Mallory"), ("c", "Mallory"))),)))
    net.run(0.5)
    for pid in "abc":
        node = net.nodes[pid]
        assert node.member_names(gid) == {"a": "Alice", "b": "Bob", "c": "Carol"}, pid
        assert node.node_stats()["gjlp_keyed_members_ignored"] >= 1
        assert node.node_stats()["gjlp_names_relayed"] == 0


def test_relayed_names_fill_in_only_where_a_members_own_word_is_unknown() -> None:
    """GJLP alone: an open group takes a reply's name for a member it has not heard
    name itself, never over its own word; a keyed group takes none."""
    gjlp = Gjlp("a", GroupConfig(), random.Random(1))
    for gid, keyed in (("open", False), ("keyed", True)):
        row = GiitRow(gid, "", "sb", MEMBER, Membership(8), keyed=keyed, names=MemberNames(8))
        row.membership.merge([MemberEntry(p, 1, True) for p in "abc"])
        row.names.said("b", "Bob")
        gjlp.giit[gid] = row
    everyone = tuple(MemberEntry(p, 1, True) for p in "abc")
    news = (("b", "Robert"), ("c", "Carol"), ("x", "Xavier"))
    _, _, renamed = gjlp.on_grps_info(GrpsInfo("m", tuple(
        GrpInfo(gid, "", "sb", everyone, False, news) for gid in ("open", "keyed"))))
    assert renamed == [("open", "c")]
    assert gjlp.giit["open"].names.of("abcx") == (("b", "Bob"), ("c", "Carol"))
    assert gjlp.giit["keyed"].names.of("abcx") == (("b", "Bob"),)


# ------------------------------------------------------------------ bounds
def test_names_are_bounded_by_the_membership_and_bad_names_are_malformed() -> None:
    net = Net(seed=9, names=dict(NAMES), config=lambda: GroupConfig(max_members=4,
                                                                     status_interval=1000.0))
    gid = group_of(net, "ab")
    tag = group_tag(gid)
    for i in range(40):
        forge(net, tag, Join(f"fake{i}", 1, "sb", "", "x" * MAX_NAME), seed=i)
    net.run(0.5)
    for pid in "ab":
        inst = net.nodes[pid].groups[gid]
        assert len(inst.row.membership) == 4 and len(inst.row.names) <= 4
        assert net.nodes[pid].group_stats(gid)["members_refused"] > 0
        assert net.nodes[pid].member_names(gid)["a"] == "Alice"
    before = net.nodes["a"].node_stats()["malformed"]
    wire = encode(tag, Join("late", 1, "sb", "", "x"))
    bad = wire[:-2] + b"\xd9\x81" + b"x" * 129  # the name: a str8 of 129 bytes
    for datagram in fragments(99, bad):
        net.inject(datagram, to="a")
    net.run(0.2)
    assert net.nodes["a"].node_stats()["malformed"] == before + 1
    assert "late" not in net.nodes["a"].members(gid)


def test_discovered_groups_keep_names_of_listed_current_members_only() -> None:
    net = Net(seed=10, config=lambda: QUIET)
    net.add("z")
    forge(net, DISCOVERY_TAG, GrpsInfo("m", (GrpInfo("far", "", "sb", (
        MemberEntry("p", 1, True), MemberEntry("q", 2, False)), False,
        (("p", "Pia"), ("q", "Quinn"), ("r", "Rita"))),)))
    net.run(0.2)
    assert net.nodes["z"].member_names("far") == {"p": "Pia"}
    forge(net, DISCOVERY_TAG, GrpsInfo("n", (GrpInfo("far", "", "sb", (
        MemberEntry("q", 3, True),), False, (("p", "Pippa"), ("q", "Quinn"))),)), seed=8)
    net.run(0.2)
    assert net.nodes["z"].member_names("far") == {"p": "Pippa", "q": "Quinn"}
