"""A group member (seeds/001 3.3, figure 6; A1-A3; 4.2; 4.3)."""

from __future__ import annotations

import random

import pytest

from m2mc.errors import BufferFullError, UsageError
from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.ids import MemberId
from m2mc.infra.member import Delivered, Joined, Left, MemberCore, MoveRequest, Phase, ViewChange
from m2mc.infra.state import pack_groups
from m2mc.trace.schema import ListSink

B = MemberId("B", 7)


def member(**cfg: object) -> MemberCore:
    core = MemberCore("A", InfraConfig(**cfg).check(), random.Random(1))  # type: ignore[arg-type]
    core.on_attach("cell", 0.0)
    core.receive(m.Beacon("G", 0, "up", "H1"), 0.0)
    core.drain()
    return core


def frames(core: MemberCore) -> list[m.UplinkMessage]:
    return [u.message for u in core.drain()]


def ack_last(core: MemberCore, now: float = 0.0) -> None:
    out = core.sender.outstanding
    assert out is not None
    core.receive(m.Ack("G", "A", out.rseq), now)


def rec(g: int, kind: int = m.APP, mid: MemberId = B, prememb: int = 0,
        group: str = "infra") -> m.Record:
    return m.Record(g, g, kind, mid, g, g, prememb, f"b{g}".encode(), group)


def has_joined(s0: int, mid: MemberId, groups: tuple[str, ...] = ("infra",)) -> m.Record:
    """A JOINED record: ``mid`` joins the deployment with ``groups``."""
    return m.Record(s0, s0, m.JOINED, mid, body=pack_groups(groups))


def joined(core: MemberCore, s0: int = 1) -> None:
    """Join and receive our 'has joined' at s0."""
    mid = core.join(0.0)
    (j,) = frames(core)
    assert isinstance(j, m.JoinReq) and j.mid == mid
    ack_last(core)
    core.receive(m.Normals("G", (has_joined(s0, mid),)), 0.0)


def delivered(core: MemberCore) -> list[int]:
    return [e.gseq for e in core.events() if isinstance(e, Delivered)]


def test_join_uses_a_fresh_join_id_and_starts_at_has_joined() -> None:
    core = member()
    mid = core.join(0.0)
    assert core.phase == Phase.JOINING and mid.node == "A"
    (j,) = frames(core)
    assert j == m.JoinReq("A", "G", j.rseq, mid, ("infra",))
    core.receive(m.Normals("G", (rec(3), rec(4))), 0.0)  # before our join: not delivered
    core.receive(m.Normals("G", (has_joined(5, mid), rec(6))), 0.0)
    ev = core.events()
    assert ev[0] == Joined(mid, 5)
    assert [e.gseq for e in ev if isinstance(e, Delivered)] == [6]
    assert core.mystable == 6 and core.phase == Phase.MEMBER
    core.leave(0.0)
    assert core.join is not None
    with pytest.raises(UsageError):
        core.join(0.0)


def test_out_of_order_is_buffered_and_nacked_then_delivered_in_order() -> None:
    core = member()
    joined(core)
    frames(core)
    core.events()
    core.receive(m.Normals("G", (rec(4),)), 0.0)
    assert core.mybuf.keys() == {4}
    (nack,) = frames(core)
    assert isinstance(nack, m.NackReq) and (nack.s1, nack.s2) == (1, 4)  # <NACK, mystable, mylow>
    core.receive(m.Transfer("G", core.mid, (rec(2), rec(3))), 0.0)  # type: ignore[arg-type]
    assert delivered(core) == [2, 3, 4]
    assert core.mybuf == {}


def test_duplicates_are_discarded() -> None:
    core = member()
    joined(core)
    core.events()
    core.receive(m.Normals("G", (rec(2), rec(2))), 0.0)
    core.receive(m.Normals("G", (rec(1), rec(2))), 0.0)
    assert delivered(core) == [2]
    assert core.stats.duplicates == 3


def test_nack_timer_suppresses_then_repeats_while_still_missing() -> None:
    core = member(nack_timer=1.0)
    joined(core)
    frames(core)
    core.receive(m.Normals("G", (rec(4),)), 0.0)
    ack_last(core)
    frames(core)
    core.receive(m.Normals("G", (rec(6),)), 0.1)  # timer running: no further NACK
    assert [f for f in frames(core) if isinstance(f, m.NackReq)] == []
    core.on_timer(1.0)  # lines 18-21: still missing -> NACK with current values
    (nack,) = [f for f in frames(core) if isinstance(f, m.NackReq)]
    # 2 and 3 missing, 4 held, 5 missing: one NACK asks for all three holes (4 again,
    # since three of the four are missing: docs/decisions.md, "A NACK asks for the
    # holes close together")
    assert (nack.s1, nack.s2) == (1, 6)
    ack_last(core, 1.0)
    core.receive(m.Transfer("G", core.mid, tuple(rec(g) for g in (2, 3, 5))), 1.1)  # type: ignore[arg-type]
    core.on_timer(2.0)  # line 23: nothing missing -> mynack := null
    assert core.nacks.mynack is None


def test_one_frame_outstanding_resent_until_acked_duplicate_acks_ignored() -> None:
    core = member(retransmit=0.5)
    joined(core)
    frames(core)
    core.send(b"x", 0.0)
    (f1,) = frames(core)
    core.send(b"y", 0.0)
    core.send(b"z", 0.0)
    assert frames(core) == []  # A1: nothing new until ack(f1)
    core.on_timer(0.6)
    assert frames(core) == [f1]  # resent, same frame
    core.receive(m.Ack("G", "A", f1.rseq), 0.7)  # type: ignore[union-attr]
    (f2,) = frames(core)
    assert isinstance(f2, m.NewReq) and [i.body for i in f2.items] == [b"y", b"z"]  # batched
    core.receive(m.Ack("G", "A", f1.rseq), 0.7)  # type: ignore[union-attr]  # A3
    assert core.sender.outstanding is not None


def test_no_retransmission_out_of_coverage() -> None:
    core = member(retransmit=0.5)
    joined(core)
    frames(core)
    core.send(b"x", 0.0)
    frames(core)
    core.on_attach(None, 0.1)
    core.on_timer(5.0)
    assert frames(core) == []
    core.on_attach("cell2", 5.0)
    core.receive(m.Beacon("G2", 0, "up2", "H1"), 5.0)
    out = core.drain()
    assert any(isinstance(u.message, m.NewReq) and u.host == "G2" for u in out)


def test_own_news_are_resent_until_sequenced() -> None:
    core = member(confirm_timeout=2.0)
    joined(core)
    frames(core)
    core.send(b"x", 0.0)
    ack_last(core)
    frames(core)
    core.on_timer(2.5)  # acked but never seen in the total order
    (again,) = frames(core)
    assert isinstance(again, m.NewReq) and again.items[0].nseq == 1
    ack_last(core, 2.5)
    core.receive(m.Normals("G", (m.Record(2, 2, m.APP, core.mid, 1, 1, 0, b"x", "infra"),)), 2.6)  # type: ignore[arg-type]
    assert core.pending_sends == 0


def test_leave_waits_for_own_news_then_leaveok_after_has_left() -> None:
    core = member()
    joined(core)
    frames(core)
    core.send(b"x", 0.0)
    ack_last(core)
    core.leave(0.0)
    assert [type(f) for f in frames(core)] == [m.NewReq]
    mid = core.mid
    core.receive(m.Normals("G", (m.Record(2, 2, m.APP, mid, 1, 1, 0, b"x", "infra"),)), 0.1)  # type: ignore[arg-type]
    (leave,) = frames(core)
    assert isinstance(leave, m.LeaveReq)
    ack_last(core, 0.1)
    core.receive(m.Normals("G", (rec(4), m.Record(3, 3, m.LEFT, mid))), 0.2)  # type: ignore[arg-type]
    assert core.phase == Phase.CLOSING
    (_ok,) = [f for f in frames(core) if isinstance(f, m.LeaveOkReq)]
    ev = core.events()
    assert Left(mid, 3, False) in ev  # type: ignore[arg-type]
    assert 4 not in [e.gseq for e in ev if isinstance(e, Delivered)]  # not after last
    ack_last(core, 0.3)
    assert core.phase == Phase.LEFT


def test_bounded_buffer_keeps_the_lowest_and_still_recovers() -> None:
    core = member(member_buffer=2)
    joined(core)
    frames(core)
    core.receive(m.Normals("G", (rec(5), rec(7), rec(6), rec(9))), 0.0)
    assert sorted(core.mybuf) == [5, 6]  # 4.2 (iii): 7 evicted for 6; 9 discarded
    core.receive(m.Transfer("G", core.mid, (rec(2), rec(3), rec(4))), 0.0)  # type: ignore[arg-type]
    assert delivered(core) == [2, 3, 4, 5, 6]
    assert core.seen_high == 9  # still known to be missing: NACKed again
    core.on_timer(10.0)
    nacks = [f for f in frames(core) if isinstance(f, m.NackReq)]
    assert nacks and nacks[-1].s1 == 6


def test_zero_buffer_delivers_a_transfer_in_sequence() -> None:
    core = member(member_buffer=0)
    joined(core)
    core.receive(m.Transfer("G", core.mid, tuple(rec(g) for g in range(2, 10))), 0.0)  # type: ignore[arg-type]
    assert delivered(core) == list(range(2, 10))


def test_skip_membership_fills_holes_with_dummies() -> None:
    core = member(skip_membership=True)
    joined(core)
    core.events()
    core.receive(m.Normals("G", (rec(2), rec(5, prememb=2))), 0.0)  # 3, 4 are others' joins
    assert delivered(core) == [2, 5]
    assert core.nacks.mynack is None or core.seen_high <= core.mystable


def test_membership_changes_are_view_events_without_skipping() -> None:
    core = member()
    joined(core)
    core.events()
    core.receive(m.Normals("G", (has_joined(2, B),)), 0.0)
    assert core.events() == [ViewChange(2, "joined", B, "infra")]


def test_beacon_high_reveals_lost_tail() -> None:
    core = member()
    joined(core)
    frames(core)
    core.receive(m.Beacon("G", 3, "up", "H1"), 0.5)
    nacks = [f for f in frames(core) if isinstance(f, m.NackReq)]
    assert nacks and (nacks[0].s1, nacks[0].s2) == (1, 4)


def test_not_member_makes_it_rejoin_and_resend_unsequenced_messages() -> None:
    core = member()
    joined(core)
    frames(core)
    old = core.mid
    core.send(b"x", 0.0)
    ack_last(core)
    core.receive(m.NotMember("G", old), 0.1)  # type: ignore[arg-type]
    ev = core.events()
    assert any(isinstance(e, Left) and e.expelled for e in ev)
    assert core.phase == Phase.JOINING and core.mid != old
    assert core.pending_sends == 1  # kept for the next membership


def test_move_and_silent_host_produce_move_requests() -> None:
    core = member(host_silence=1.0)
    target = m.CellInfo("G2", "cell2", "up2", 0)
    core.receive(m.Beacon("G", 0, "up", "H1", (m.CellInfo("G", "cell", "up", 3), target)), 0.0)
    core.receive(m.Move("G", "A", target), 0.0)
    assert core.events() == [MoveRequest(target)]
    core.on_timer(1.5)
    assert core.events() == [MoveRequest(target)]


def test_a_member_never_moves_back_to_a_host_it_did_not_hear() -> None:
    """seeds/004 4.5: the member's host went silent; it tries the least loaded other
    cell, and when that one is silent too the next, not one it already found silent
    (a partition can hide several hosts), until a beacon is heard again."""
    core = member(host_silence=1.0)
    cells = (m.CellInfo("G", "cell", "up", 3), m.CellInfo("G2", "cell2", "up2", 0),
             m.CellInfo("G3", "cell3", "up3", 1))
    core.receive(m.Beacon("G", 0, "up", "H1", cells), 0.0)
    core.events()
    core.on_timer(1.5)  # G silent: the least loaded other cell
    assert core.events() == [MoveRequest(cells[1])]
    core.on_attach("cell2-as-joined-here", 1.5)  # its URL names our interface
    core.on_timer(3.0)  # G2 silent too: G3, not G2 again nor G
    assert core.events() == [MoveRequest(cells[2])]
    core.on_attach("cell3-as-joined-here", 3.0)
    core.on_timer(4.5)  # all silent: start over with the others than the last one
    assert core.events() == [MoveRequest(cells[1])]
    core.receive(m.Beacon("G", 0, "up", "H1", cells), 4.6)  # G is back (we moved home)
    assert core.gateway == "G" and "G" not in core.moves.unheard


def test_send_limits() -> None:
    core = member(max_pending_sends=1, max_payload=4)
    with pytest.raises(UsageError):
        core.send(b"x", 0.0)  # not a member
    joined(core)
    with pytest.raises(UsageError):
        core.send(b"12345", 0.0)
    core.send(b"1", 0.0)
    with pytest.raises(BufferFullError):
        core.send(b"2", 0.0)


def test_trace_events() -> None:
    sink = ListSink()
    core = MemberCore("A", InfraConfig(), random.Random(1), trace=sink, run_id="r", group="g")
    core.on_attach("cell", 0.0)
    core.receive(m.Beacon("G", 0, "up", "H1"), 0.0)
    mid = core.join(0.0)
    core.receive(m.Normals("G", (has_joined(1, mid, ("g",)), rec(2, group="g"))), 0.1)
    core.receive(m.Normals("G", (rec(2, group="g"),)), 0.2)
    sent = core.send(b"hi", 0.3)
    assert sent == "A:1"
    got = [(e.event, e.mid, e.gseq) for e in sink.events]
    assert got == [("join", None, 1), ("recv", "B:2", 2), ("deliver", "B:2", 2),
                   ("dup", "B:2", 2), ("send", "A:1", None)]
    assert all(e.order == "total" and e.group == "g" and e.node == "A" for e in sink.events)


def test_no_host_heard_and_no_directory_the_configured_cells_are_tried_in_turn() -> None:
    """A member that has heard no beacon (a fresh start in the cell of a host that is
    down, or a power-on in the cell of a host that died while it was off) has no
    directory to choose from: it tries the configuration's cells in turn, each after
    host_silence, round and round, until a host answers."""
    cfg = InfraConfig().check()
    core = MemberCore("A", cfg, random.Random(1))
    core.configured = ("c1", "c2", "c3")
    core.on_attach("c2", 0.0)
    tried = []
    now = 0.0
    for _ in range(4):
        now += cfg.host_silence + 0.01
        core.on_timer(now)
        [move] = [e for e in core.events() if isinstance(e, MoveRequest)]
        tried.append(move.target.cell)
        core.on_attach(move.target.cell, now)
    assert tried == ["c3", "c1", "c2", "c3"]
    # Once a host is heard, its beacon's directory decides again.
    core.receive(m.Beacon("H1", 0, "up", "H1", (m.CellInfo("H1", "c3", "up"),
                                                  m.CellInfo("H2", "c1", "up2", 1))), now)
    assert core.directory and core.gateway == "H1"
