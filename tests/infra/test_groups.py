"""Several groups in one deployment (seeds/001 2.2 (i) lifted; docs/infra.md "Groups"):
one order for the deployment, each group's membership and message count in the
coordinator's tables, items that join and leave groups in order with a member's
messages, and every member delivering exactly its groups' messages."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from infra_harness import Net, check_garbage_collected, check_groups, drain
from test_properties import EXTENSIONS

from m2mc.errors import UsageError
from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.coordinator import Coordinator
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.member import GroupJoined, GroupLeft, GroupRefused, MemberCore, Phase
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState, StateError, pack_groups, unpack_groups

E = Epoch(1, 0.0, "H1")
A = MemberId("A", 1)
B = MemberId("B", 2)


# ------------------------------------------------------------------ the coordinator
def coordinator(**cfg: object) -> Coordinator:
    return Coordinator("H1", E, InfraConfig(**cfg).check(), ReplicaLog(), CoordState(), 0.0)  # type: ignore[arg-type]


def forward(c: Coordinator, req: m.MemberRequest) -> None:
    c.handle_forward(m.Forward("H2", 1, req), 0.0)
    c.drain()


def items(c: Coordinator, mid: MemberId, *its: tuple[int, str]) -> None:
    """NEW items (kind, group) numbered after what the coordinator holds from ``mid``."""
    n = c.work.rows[mid].recv
    forward(c, m.NewReq(mid.node, "H2", 1, mid, tuple(
        m.NewItem(n + k, 100 + n + k, b"x" if kind == m.APP else b"", g, kind)
        for k, (kind, g) in enumerate(its, 1))))


def records(c: Coordinator) -> list[m.Record]:
    return [r for r in (c.log.get(i) for i in range(c.log.low, c.log.high + 1)) if r]


def test_join_names_groups_and_items_join_leave_and_send_in_order() -> None:
    c = coordinator()
    forward(c, m.JoinReq("A", "H2", 1, A, ("red", "blue")))
    forward(c, m.JoinReq("B", "H2", 1, B, ("red",)))
    items(c, A, (m.APP, "red"), (m.GLEFT, "red"), (m.APP, "red"), (m.APP, "blue"))
    items(c, B, (m.GJOINED, "green"), (m.APP, "green"), (m.APP, "red"))
    got = [(r.kind, r.mid.node, r.group, r.gpos) for r in records(c)]
    assert got == [(m.JOINED, "A", "", 0), (m.JOINED, "B", "", 0),
                   (m.APP, "A", "red", 1), (m.GLEFT, "A", "red", 1),
                   (m.NOOP, "A", "red", 0),  # no longer in red: its place, nobody's message
                   (m.APP, "A", "blue", 1),
                   (m.GJOINED, "B", "green", 0), (m.APP, "B", "green", 1),
                   (m.APP, "B", "red", 2)]
    assert unpack_groups(records(c)[0].body) == (("red", 0), ("blue", 0))
    w = c.work
    assert w.groups["red"].members == {B} and w.groups["red"].count == 2
    assert w.groups_of(A) == {"blue"} and w.groups_of(B) == {"red", "green"}
    assert w.rows[A].recv == 4 and w.rows[A].app_seq == 104  # the NOOP took its place
    assert c.stats.noops == 1


def test_groups_beyond_the_bounds_are_refused() -> None:
    c = coordinator(max_groups=2, max_member_groups=2)
    forward(c, m.JoinReq("A", "H2", 1, A, ("a", "b", "c", "")))  # c: over; "": no name
    assert unpack_groups(records(c)[0].body) == (("a", 0), ("b", 0))
    assert c.stats.groups_refused == 2
    forward(c, m.JoinReq("B", "H2", 1, B, ("c",)))  # a third group with members: refused
    forward(c, m.JoinReq("C", "H2", 1, MemberId("C", 3), ("a",)))
    assert unpack_groups(records(c)[1].body) == ()
    items(c, A, (m.GJOINED, "z"))  # A is in two groups already
    assert records(c)[-1].kind == m.NOOP and c.stats.groups_refused == 4
    items(c, A, (m.GLEFT, "b"), (m.GJOINED, "b"))  # b empty now: it may come back
    assert [r.kind for r in records(c)[-2:]] == [m.GLEFT, m.GJOINED]
    assert c.work.live_groups() == 2


def test_leaving_the_deployment_leaves_every_group_and_expulsion_says_what_was_sequenced() -> None:
    c = coordinator()
    forward(c, m.JoinReq("A", "H2", 1, A, ("red", "blue")))
    forward(c, m.JoinReq("B", "H2", 1, B, ("red",)))
    items(c, A, (m.APP, "red"), (m.APP, "blue"))
    c.expel(A, 1.0)
    expelled = next(r for r in records(c) if r.kind == m.EXPELLED)
    assert (expelled.nseq, expelled.app_seq) == (2, 102)  # its last NEW
    assert c.work.groups["red"].members == {B} and not c.work.groups["blue"].members
    forward(c, m.LeaveReq("B", "H2", 2, B))
    assert c.work.member_groups == {}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.tuples(st.sampled_from("AB"), st.sampled_from(
    [m.APP, m.GJOINED, m.GLEFT]), st.sampled_from(["r", "g", "b"])), max_size=40),
       cut=st.integers(0, 40))
def test_tables_follow_from_the_records_alone_and_snapshots_keep_them(
        ops: list[tuple[str, int, str]], cut: int) -> None:
    """Whatever items the members send, every record applies to a fresh copy of the
    tables in order (what every replica does) and gives the coordinator's tables; a
    snapshot taken at any point, then the rest of the records, gives them too."""
    c = coordinator(max_groups=2, max_member_groups=2)
    forward(c, m.JoinReq("A", "H2", 1, A, ("r",)))
    forward(c, m.JoinReq("B", "H2", 1, B, ("g", "b")))
    for who, kind, g in ops:
        items(c, A if who == "A" else B, (kind, g))
    recs = records(c)
    replica = CoordState()
    for r in recs[:cut]:
        replica.apply(r, 0.0)
    replica = CoordState.from_snapshot(replica.snapshot(), 0.0)
    for r in recs[cut:]:
        replica.apply(r, 0.0)
    assert replica.snapshot() == c.work.snapshot()
    for g, state in c.work.groups.items():  # each group's count is its APP records
        assert state.count == sum(1 for r in recs if r.kind == m.APP and r.group == g)
    assert c.work.live_groups() <= 2


def test_a_record_that_does_not_follow_is_refused() -> None:
    state = CoordState()
    state.apply(m.Record(1, 1, m.JOINED, A, body=pack_groups(["r"])), 0.0)
    bad = [m.Record(2, 2, m.APP, A, 1, 1, 0, b"", "g", 1),  # not in g
           m.Record(2, 2, m.APP, A, 1, 1, 0, b"", "r", 5),  # not the next gpos
           m.Record(2, 2, m.GJOINED, A, 1, 1, 0, b"", "r", 0),  # in r already
           m.Record(2, 2, m.GLEFT, A, 1, 1, 0, b"", "g", 0),  # not in g
           m.Record(2, 2, m.JOINED, B, body=b"\x91\x01")]  # groups that are not names
    for r in bad:
        with pytest.raises(StateError):
            state.copy(0.0).apply(r, 0.0)


# ------------------------------------------------------------------ the member
def member() -> MemberCore:
    core = MemberCore("A", InfraConfig(max_member_groups=3).check(), random.Random(1))
    core.on_attach("cell", 0.0)
    core.receive(m.Beacon("G", 0, "up", "H1"), 0.0)
    return core


def test_the_member_api_checks_its_groups() -> None:
    core = member()
    with pytest.raises(UsageError, match="group name"):
        core.join(0.0, ["x" * 201])
    mid = core.join(0.0, ["red"])
    core.send(b"ok", 0.0, "red")  # joining: sent once it is a member
    with pytest.raises(UsageError, match="not in group"):
        core.send(b"no", 0.0, "blue")
    core.receive(m.Normals("G", (m.Record(1, 1, m.JOINED, mid, body=pack_groups(["red"])),)),
                 0.0)
    core.join_group("blue", 0.0)
    core.send(b"yes", 0.0, "blue")  # after its join, in order
    core.join_group("green", 0.0)
    with pytest.raises(UsageError, match="at most 3"):
        core.join_group("white", 0.0)
    core.leave_group("green", 0.0)
    with pytest.raises(UsageError, match="not in group"):
        core.leave_group("green", 0.0)
    kinds = [(i.kind, i.group) for i in core.news]
    assert kinds == [(m.APP, "red"), (m.GJOINED, "blue"), (m.APP, "blue"),
                     (m.GJOINED, "green"), (m.GLEFT, "green")]


def ack(core: MemberCore) -> None:
    out = core.sender.outstanding
    assert out is not None
    core.receive(m.Ack("G", "A", out.rseq), 0.0)


def test_a_refused_join_is_told() -> None:
    core = member()
    mid = core.join(0.0, ["red", "blue"])
    core.receive(m.Normals("G", (m.Record(1, 1, m.JOINED, mid, body=pack_groups(["red"])),)),
                 0.0)
    ev = core.events()
    assert GroupJoined("red", 1) in ev and GroupRefused("blue", 1) in ev
    assert set(core.groups) == {"red"}
    ack(core)  # the JOIN
    core.join_group("x", 0.0)
    ack(core)  # the NEW item that asks for x
    (item,) = [i for i, _ in core.unconfirmed.values()]
    noop = m.Record(2, 2, m.NOOP, mid, item.nseq, item.app_seq, 0, b"", "x")
    core.receive(m.Normals("G", (noop,)), 0.0)
    assert GroupRefused("x", 2) in core.events() and core.stats.groups_refused == 2
    assert core.pending_sends == 0


# ------------------------------------------------------------------ on the network
def test_members_deliver_exactly_their_groups_in_one_order() -> None:
    """Three groups over three cells, 20% loss, members moving; some join and leave
    groups during the traffic."""
    net = Net(seed=31, loss=0.2)
    plan = {"M0": ("red",), "M1": ("red", "blue"), "M2": ("blue",), "M3": ("green", "red"),
            "M4": ("green",), "M5": ("blue", "green")}
    for i, (n, groups) in enumerate(plan.items()):
        net.add_member(n, net.host_ids[i % 3], groups=groups)
    net.run_until(3.0)
    for k in range(150):
        for n, core in net.members.items():
            mine = [g for g, leaving in sorted(core_groups(core).items()) if not leaving]
            if mine and net.rng.random() < 0.3 and core.phase == Phase.MEMBER:
                net.send(n, f"{n}-{k}".encode(), net.rng.choice(mine))
            if net.rng.random() < 0.02:
                net.move(n, net.rng.choice([*net.host_ids, None]))
        if k == 40:
            net.join_group("M0", "blue")
            net.leave_group("M1", "red")
        if k == 90:
            net.leave_group("M0", "red")
            net.join_group("M4", "red")
        net.run_until(net.now + 0.02)
    drain(net)
    check_groups(net)
    (joined,) = [e for e in net.logs["M0"].groups
                 if isinstance(e, GroupJoined) and e.group == "blue"]
    net.request_history("M0", "blue", joined.gseq)  # and who was in blue before M0
    assert net.run_while(lambda: not net.logs["M0"].histories, net.now + 5)
    views = {n: dict(c.views) for n, c in net.members.items()}
    assert views["M0"] == {"blue": {"M0", "M1", "M2", "M5"}}
    (story,) = net.logs["M0"].histories  # blue's messages before M0 joined it
    assert story.group == "blue" and story.gone == 0 and story.messages
    assert all(d.group == "blue" and d.gseq < joined.gseq for d in story.messages)
    for n, core in net.members.items():
        assert set(core.groups) == {g for g, v in views[n].items() if n in v}
    delivered = {n: {d.group for d in log.delivered} for n, log in net.logs.items()}
    assert delivered["M2"] == {"blue"} and "green" not in delivered["M0"]
    for n in net.members:
        net.leave(n)
    assert net.run_while(lambda: any(c.phase != Phase.LEFT for c in net.members.values()),
                         net.now + 30)
    net.run_until(net.now + 2.0)
    check_garbage_collected(net)
    c = net.hosts[net.coordinator() or ""].coordinator
    assert c is not None and c.work.member_groups == {}
    assert all(not g.members for g in c.work.groups.values())


def core_groups(core: MemberCore) -> dict[str, bool]:
    from m2mc.infra.member_groups import intended

    return intended(core)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), ext=st.sampled_from(sorted(EXTENSIONS)),
       loss=st.sampled_from([0.0, 0.2]), crash=st.booleans(),
       churn=st.lists(st.tuples(st.integers(0, 59), st.integers(0, 4), st.booleans(),
                                st.sampled_from("rgb")), max_size=8))
def test_groups_hold_for_random_runs(seed: int, ext: str, loss: float, crash: bool,
                                     churn: list[tuple[int, int, bool, str]]) -> None:
    """Random groups, joins and leaves of groups during the traffic, with each
    extension of seeds/001 section 4, with or without the coordinator crashing."""
    net = Net(seed=seed, loss=loss, cfg=InfraConfig(**EXTENSIONS[ext]))  # type: ignore[arg-type]
    names = [f"M{i}" for i in range(5)]
    for i, n in enumerate(names):
        net.add_member(n, net.host_ids[i % 3], groups=("rgb"[i % 3],))
    net.run_until(3.0)
    for k in range(60):
        for n in names:
            core = net.members[n]
            mine = [g for g, leaving in sorted(core_groups(core).items()) if not leaving]
            if mine and core.phase == Phase.MEMBER and net.rng.random() < 0.3:
                net.send(n, f"{n}-{k}".encode(), net.rng.choice(mine))
        for at, who, join, g in churn:
            core = net.members[names[who]]
            plan = core_groups(core)
            if at == k and core.phase == Phase.MEMBER:
                if join and plan.get(g) is not False:
                    net.join_group(names[who], g)
                elif not join and plan.get(g) is False and sum(
                        1 for x in plan.values() if not x) > 1:
                    net.leave_group(names[who], g)
        if crash and k == 30:
            net.crash(net.coordinator() or "")
        net.run_until(net.now + 0.03)
    drain(net)
    check_groups(net)
    for n in names:
        left = [e for e in net.logs[n].groups if isinstance(e, GroupLeft)]
        assert not any(e.expelled for e in left)
