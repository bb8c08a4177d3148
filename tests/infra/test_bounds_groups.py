"""Every table groups and history add is bounded, and what happens at the bound
(docs/security.md, "Bounds": the infra rows on groups and history)."""

from __future__ import annotations

import random

import pytest

from m2mc.api.infra_groups import GroupState
from m2mc.api.message import GroupMessage
from m2mc.errors import DecodeError
from m2mc.infra import codec, state
from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.gateway import Gateway
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.member import MemberCore
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState, pack_groups
from m2mc.ordering import ROOT, MessageId

A = MemberId("A", 1)


def test_the_tables_forget_the_oldest_empty_group_at_their_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "GROUP_TABLE_LIMIT", 3)
    s = CoordState()
    s.apply(m.Record(1, 1, m.JOINED, A, body=pack_groups(["a"])), 0.0)
    s.apply(m.Record(2, 2, m.APP, A, 1, 1, 0, b"", "a", 1), 0.0)
    for i, g in enumerate(("b", "c"), start=2):  # join then leave: empty groups kept
        s.apply(m.Record(2 * i - 1, 2 * i - 1, m.GJOINED, A, 2 * i - 2, 2 * i - 2, 0, b"", g, 0),
                0.0)
        s.apply(m.Record(2 * i, 2 * i, m.GLEFT, A, 2 * i - 1, 2 * i - 1, 0, b"", g, 0), 0.0)
    assert list(s.groups) == ["a", "b", "c"]
    s.apply(m.Record(7, 7, m.GJOINED, A, 6, 6, 0, b"", "d", 0), 0.0)
    assert list(s.groups) == ["a", "c", "d"]  # b (empty, oldest) forgotten; a has a member
    assert s.groups["a"].count == 1


def test_a_member_remembers_at_most_max_groups_names_it_saw() -> None:
    core = MemberCore("A", InfraConfig(max_groups=3).check(), random.Random(1))
    core.on_attach("cell", 0.0)
    core.receive(m.Beacon("G", 0, "up", "H1"), 0.0)
    mid = core.join(0.0, ["mine"])
    recs = [m.Record(1, 1, m.JOINED, mid, body=pack_groups(["mine"]))]
    recs += [m.Record(i, i, m.APP, MemberId("B", 2), i, i, 0, b"x", f"g{i}", 1)
             for i in range(2, 12)]
    core.receive(m.Normals("G", tuple(recs)), 0.0)
    assert list(core.known_groups) == ["g9", "g10", "g11"]  # the latest ones
    assert core.stats.other_groups == 10


def test_a_member_runs_at_most_max_member_groups_history_reads() -> None:
    core = MemberCore("A", InfraConfig(max_member_groups=2).check(), random.Random(1))
    core.on_attach("cell", 0.0)
    core.receive(m.Beacon("G", 0, "up", "H1"), 0.0)
    mid = core.join(0.0, ["a", "b"])
    core.receive(m.Normals("G", (m.Record(1, 1, m.JOINED, mid, body=pack_groups(["a", "b"])),)),
                 0.0)
    core.groups["c"] = 0  # (as if joined: the bound is on reads running at once)
    for g in ("a", "b", "c"):
        core.request_history(g, 1, 0.0)
    assert list(core.reads.fetches.running) == ["b", "c"]  # the oldest read gave way


def test_a_nodes_history_of_a_group_keeps_its_newest_bytes() -> None:
    st = GroupState()

    def msg(i: int) -> GroupMessage:
        return GroupMessage("g", MessageId("B", i), ROOT, bytes(36), i)

    st.set_older([msg(i) for i in range(1, 6)], 1000)
    for i in range(6, 20):
        st.keep(msg(i), 1000)  # 100 bytes each, counted with their overhead
    kept = [x.gseq for x in st.history()]
    assert kept == list(range(10, 20)) and st.held <= 1000
    st.keep(GroupMessage("g", MessageId("B", 20), ROOT, bytes(5000), 20), 1000)
    assert [x.gseq for x in st.history()] == [20]  # one message always kept


def test_history_requests_pass_the_gateways_rate_limit() -> None:
    log = ReplicaLog()
    work = CoordState()
    r = work.next_record(m.JOINED, A, body=pack_groups(["g"]))
    work.apply(r, 0.0)
    log.append((r,))
    log.commit_to(1, 0.0)
    g = Gateway("G", InfraConfig(control_rate=1.0, control_burst=3.0).check(), log)
    g.new_master("G", Epoch(1, 0.0, "G"), 0.0)
    g.cell_out.clear()
    for i in range(10):
        g.on_uplink("a", m.HistoryReq("A", "G", A, i, ("g",), 1, 1), 0.0)
    answers = [x for _, x in g.cell_out if isinstance(x, m.HistoryReply)]
    assert len(answers) == g.stats.history_served == 3 and g.stats.rate_limited == 7
    g.on_uplink("b", m.HistoryReq("B", "G", MemberId("B", 5), 1, ("g",), 1, 1), 1.0)
    assert g.stats.history_refused == 1  # not a member: no answer


def test_group_names_and_lists_are_bounded_on_the_wire() -> None:
    long_name = "x" * (m.MAX_GROUP_NAME + 1)
    with pytest.raises(DecodeError, match="group name"):
        codec.decode(codec.encode(m.JoinReq("A", "G", 1, A, (long_name,))))
    with pytest.raises(DecodeError, match="exceeds 4096"):
        codec.decode(codec.encode(m.HistoryReq("A", "G", A, 1, tuple(
            f"g{i}" for i in range(4097)), 1, 2)))
    with pytest.raises(DecodeError, match="item kind"):
        codec.decode(codec.encode(m.NewReq("A", "G", 1, A, (m.NewItem(1, 1, b"", "g", 4),))))
    with pytest.raises(state.StateError):  # a JOINED record naming more than 4096 groups
        state.unpack_groups(pack_groups([f"g{i}" for i in range(4097)]))
