"""The coordinator of seeds/001 3.1: figure 3, NEW steps (1)-(5), STABINFO, A5, A6."""

from __future__ import annotations

from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.coordinator import Coordinator
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState

E = Epoch(1, 0.0, "H1")
A = MemberId("A", 1)
B = MemberId("B", 2)


def make(**cfg: object) -> Coordinator:
    log = ReplicaLog()
    return Coordinator("H1", E, InfraConfig(**cfg).check(), log, CoordState(), 0.0)  # type: ignore[arg-type]


def fwd(c: Coordinator, req: m.MemberRequest, fseq: int = 1, host: str = "H2") -> m.FwdAck:
    c.handle_forward(m.Forward(host, fseq, req), 0.0)
    acks = [x for _, x in c.drain() if isinstance(x, m.FwdAck)]
    assert acks, "every forward is acknowledged"
    return acks[-1]


def join(c: Coordinator, mid: MemberId, groups: tuple[str, ...] = ("g",)) -> None:
    fwd(c, m.JoinReq(mid.node, "H2", 1, mid, groups))


def new(c: Coordinator, mid: MemberId, *nseqs: int) -> m.FwdAck:
    items = tuple(m.NewItem(n, n, f"{mid.node}{n}".encode(), "g") for n in nseqs)
    return fwd(c, m.NewReq(mid.node, "H2", 1, mid, items))


def records(c: Coordinator) -> list[m.Record]:
    return [r for r in (c.log.get(i) for i in range(c.log.low, c.log.high + 1)) if r]


def test_join_allocates_tables_and_sequences_has_joined() -> None:
    c = make()
    join(c, A)
    join(c, B)
    r = records(c)
    assert [(x.gseq, x.kind, x.mid) for x in r] == [(1, m.JOINED, A), (2, m.JOINED, B)]
    assert c.work.members == {A, B}
    assert (c.work.rows[A].first, c.work.rows[A].last, c.work.rows[A].recv) == (1, 0, 0)
    assert c.stable[B] == 0
    # figure 3 line 12: pending = members after the insert
    assert c.norm_buffer == {1: {A}, 2: {A, B}}


def test_new_in_order_is_sequenced_and_acknowledged_up_to_its_record() -> None:
    c = make()
    join(c, A)
    ack = new(c, A, 1, 2)
    r = records(c)[1:]
    assert [(x.gseq, x.nseq, x.body) for x in r] == [(2, 1, b"A1"), (3, 2, b"A2")]
    assert c.work.rows[A].recv == 2
    assert ack.upto == c.work.lsn == 3


def test_duplicate_new_is_discarded() -> None:
    c = make()
    join(c, A)
    new(c, A, 1)
    new(c, A, 1)
    assert c.work.gseq == 2
    assert c.stats.duplicates == 1


def test_early_new_is_buffered_until_the_missing_ones_arrive() -> None:
    c = make()
    join(c, A)
    new(c, A, 3)
    new(c, A, 2)
    assert c.work.gseq == 1 and c.stats.early_buffered == 2
    new(c, A, 1)
    assert [x.nseq for x in records(c)[1:]] == [1, 2, 3]
    assert A not in c.early


def test_early_new_buffer_is_bounded() -> None:
    c = make(early_new_limit=2)
    join(c, A)
    new(c, A, 5, 6, 7)
    assert c.stats.early_dropped == 1
    new(c, A, 1, 2, 3, 4)
    assert [x.nseq for x in records(c)[1:]] == [1, 2, 3, 4, 5, 6]  # 7 waits for a resend


def test_a5_new_and_leave_from_non_members_are_discarded() -> None:
    c = make()
    new(c, A, 1)
    fwd(c, m.LeaveReq("A", "H2", 1, A))
    assert c.work.gseq == 0 and c.stats.discarded_a5 == 2


def test_leave_sets_last_and_pending_includes_the_leaver() -> None:
    c = make()
    join(c, A)
    join(c, B)
    fwd(c, m.LeaveReq("A", "H2", 2, A))
    assert c.work.members == {B}
    assert c.work.rows[A].last == 3
    assert c.norm_buffer[3] == {A, B}  # figure 3 line 19
    fwd(c, m.LeaveReq("A", "H2", 2, A))  # duplicate LEAVE: A5
    assert c.work.gseq == 3


def test_a6_membership_cache_refuses_a_stale_join() -> None:
    c = make()
    join(c, A)
    join(c, A)  # duplicate while a member
    fwd(c, m.LeaveReq("A", "H2", 2, A))
    fwd(c, m.LeaveOkReq("A", "H2", 3, A))
    join(c, A)  # late copy of the first JOIN: in the membership cache
    assert c.work.gseq == 2
    assert c.stats.discarded_a6 == 2
    c.work.mcache.expire(1e9)  # forgotten after its time
    join(c, A)
    assert c.work.gseq == 3


def test_stabinfo_frees_stable_copies() -> None:
    c = make()
    join(c, A)
    join(c, B)
    new(c, A, 1, 2)  # gseq 3, 4
    c.handle_stabinfo(((A, 4),))
    assert c.norm_buffer == {2: {B}, 3: {B}, 4: {B}}
    assert c.stable_watermark() == 1
    c.handle_stabinfo(((B, 3),))
    assert c.norm_buffer == {4: {B}}
    assert c.stable_watermark() == 3
    c.handle_stabinfo(((B, 2),))  # step (1): older information is skipped
    assert c.stable[B] == 3


def test_leaveok_frees_everything_and_cleans_up() -> None:
    c = make()
    join(c, A)
    join(c, B)
    new(c, B, 1)
    fwd(c, m.LeaveReq("A", "H2", 2, A))
    fwd(c, m.LeaveOkReq("A", "H2", 3, A))
    assert A not in c.work.rows and A not in c.stable
    assert all(A not in p for p in c.norm_buffer.values())
    assert records(c)[-1].kind == m.CLEANUP and records(c)[-1].gseq == 0
    fwd(c, m.LeaveOkReq("A", "H2", 3, A))  # duplicate: "if present"
    assert [r.kind for r in records(c)].count(m.CLEANUP) == 1


def test_prememb_counts_preceding_membership_changes() -> None:
    c = make()
    join(c, A)
    new(c, A, 1)
    join(c, B)
    fwd(c, m.LeaveReq("B", "H2", 1, B))
    new(c, A, 2)
    assert [(r.gseq, r.prememb) for r in records(c)] == [(1, 0), (2, 1), (3, 0), (4, 1), (5, 2)]


def test_expelling_a_silent_member() -> None:
    c = make(member_timeout=5.0)
    join(c, A)
    join(c, B)
    c.saw_members((B,), 4.0)
    c.check_members(6.0)
    kinds = [(r.kind, r.mid) for r in records(c)[2:]]
    assert kinds == [(m.EXPELLED, A), (m.CLEANUP, A)]
    assert c.work.members == {B} and A not in c.work.rows


def test_replication_commits_on_a_quorum_and_resends_after_a_gap() -> None:
    c = make()
    join(c, A)
    live = ["H1", "H2", "H3"]
    c.flush(live, 2, 0.0)
    out = c.drain()
    assert {d for d, x in out if isinstance(x, m.Sync)} == {"H2", "H3"}  # not synced yet
    c.handle_accepted(m.Accepted(E, "H2", 1), 0.0)
    assert c.update_commit(2, set(live)) and c.commit == 1
    new(c, A, 1)
    c.flush(live, 2, 0.0)
    reps = [(d, x) for d, x in c.drain() if isinstance(x, m.Replicate)]
    # Replicates follow the Sync on the same FIFO link
    assert [d for d, _ in reps] == ["H2", "H3"] and reps[0][1].records[0].lsn == 2
    c.handle_accepted(m.Accepted(E, "H2", 1, gap=True), 0.0)
    c.flush(live, 2, 10.0)
    assert any(isinstance(x, m.Sync) and d == "H2" and x.base == 1 for d, x in c.drain())


def test_subscribe_extension_restricts_replication_targets() -> None:
    c = make(subscribe=True)
    live = ["H1", "H2", "H3", "H4", "H5"]
    # A new epoch: every host keeps the log until the wanted replicas hold a quorum's copy.
    assert c.targets(live) == ["H2", "H3", "H4", "H5"]
    for h in ("H2", "H3"):
        c.handle_accepted(m.Accepted(E, h, c.log.high), 0.0)
    c.flush(live, 3, 0.0)
    assert c.targets(live) == ["H2", "H3"]
    c.handle_subscribe("H5", 0, 0.0)
    assert c.targets(live) == ["H2", "H3", "H5"]
    c.handle_unsubscribe("H5")
    assert "H5" not in c.targets(live)


def test_fetch_answers_only_committed_copies() -> None:
    c = make()
    join(c, A)
    new(c, A, 1, 2)
    c.handle_fetch(m.Fetch("H2", 1, 3))
    assert c.drain() == []  # nothing committed yet
    c.log.commit_to(3, 0.0)
    c.handle_fetch(m.Fetch("H2", 2, 3))
    (dest, f), = c.drain()
    assert dest == "H2" and isinstance(f, m.Fetched) and [r.gseq for r in f.records] == [2, 3]
