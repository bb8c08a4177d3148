"""The gateway of seeds/001 3.2 (figure 5), beaconing (2.4) and A2/A4."""

from __future__ import annotations

from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.gateway import Gateway
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState, pack_groups

E = Epoch(1, 0.0, "H1")
A = MemberId("A", 1)
B = MemberId("B", 2)


def committed_log(plan: list[tuple[int, MemberId]], napp: int = 0) -> ReplicaLog:
    """A log with the given membership records then ``napp`` multicasts from A."""
    log = ReplicaLog()
    work = CoordState()
    recs = []
    for kind, mid in plan:
        r = work.next_record(kind, mid, body=pack_groups(("g",)) if kind == m.JOINED else b"")
        work.apply(r, 0.0)
        recs.append(r)
    for i in range(1, napp + 1):
        r = work.next_record(m.APP, A, i, i, f"x{i}".encode(), "g")
        work.apply(r, 0.0)
        recs.append(r)
    assert log.append(recs)
    return log


def gateway(log: ReplicaLog, **cfg: object) -> Gateway:
    g = Gateway("G", InfraConfig(**cfg).check(), log)  # type: ignore[arg-type]
    g.new_master("H1", E, 0.0)
    return g


def commit_all(g: Gateway) -> None:
    g.on_committed(g.log.commit_to(g.log.high, 0.0))


def transfers(g: Gateway) -> list[int]:
    g.flush(0.0)
    out = [r.gseq for _, x in g.cell_out if isinstance(x, m.Transfer) for r in x.records]
    g.cell_out.clear()
    return out


def test_committed_records_are_broadcast_in_the_cell_in_order() -> None:
    g = gateway(committed_log([(m.JOINED, A)], 3))
    commit_all(g)
    g.flush(0.0)
    (dest, normals), = g.cell_out
    assert dest is None and [r.gseq for r in normals.records] == [1, 2, 3, 4]
    assert g.relay_high == 4


def test_requests_are_acknowledged_and_forwarded_nacks_are_not() -> None:
    g = gateway(committed_log([(m.JOINED, A)]))
    commit_all(g)
    g.on_uplink("addrA", m.NewReq("A", "G", 7, A, (m.NewItem(1, 1, b"x"),)), 0.0)
    assert (("addrA", m.Ack("G", "A", 7)) in g.cell_out)
    assert [type(x) for x in g.to_coord] == [m.Forward]  # A4
    g.to_coord.clear()
    g.on_uplink("addrA", m.NackReq("A", "G", 8, A, 0, 1), 0.0)
    assert ("addrA", m.Ack("G", "A", 8)) in g.cell_out
    assert g.to_coord == []


def test_frames_for_another_gateway_are_ignored() -> None:
    g = gateway(committed_log([]))
    g.on_uplink("addrA", m.Hello("A", "OTHER", A, 0), 0.0)
    assert g.local == {} and g.cell_out == []


def test_nack_starts_a_transfer_from_max_low_plus_one_and_first() -> None:
    g = gateway(committed_log([(m.JOINED, B), (m.JOINED, A)], 6))  # A first = 2
    commit_all(g)
    g.cell_out.clear()
    g.on_uplink("addrA", m.NackReq("A", "G", 1, A, 1, 6), 0.0)
    assert transfers(g) == [2, 3, 4, 5]  # [max(1+1, first=2), 6)
    stab = [x for x in g.to_coord if isinstance(x, m.StabInfo)]
    assert stab == []  # STABINFO goes out with the next tick
    g.tick(1.0)
    assert m.StabInfo("G", ((A, 1),)) in g.to_coord  # line 16


def test_nack_before_has_joined_is_discarded() -> None:
    g = gateway(committed_log([(m.JOINED, B)], 0))
    commit_all(g)
    g.on_uplink("addrA", m.NackReq("A", "G", 1, A, 0, 3), 0.0)
    assert transfers(g) == [] and g.stats.nacks_discarded == 1


def test_identical_nack_restarts_the_transfer_but_an_older_one_is_discarded() -> None:
    """Footnote 3: s1 == trans[mid] must pass line 13; s1 < trans[mid] must not."""
    g = gateway(committed_log([(m.JOINED, A)], 400), transfer_chunk=4)
    commit_all(g)
    g.cell_out.clear()
    g.on_uplink("a", m.NackReq("A", "G", 1, A, 100, 300), 0.0)
    assert transfers(g) == [101, 102, 103, 104]
    g.on_uplink("a", m.NackReq("A", "G", 2, A, 100, 300), 0.0)  # the same NACK again
    assert transfers(g) == [101, 102, 103, 104]
    g.on_uplink("a", m.NackReq("A", "G", 3, A, 50, 300), 0.0)  # older than the transfer
    assert g.stats.nacks_discarded == 1
    assert transfers(g) == [105, 106, 107, 108]


def test_transfer_to_a_leaving_member_runs_to_last() -> None:
    g = gateway(committed_log([(m.JOINED, A), (m.JOINED, B), (m.LEFT, A)], 0))
    commit_all(g)
    g.on_uplink("a", m.NackReq("A", "G", 1, A, 0, 2), 0.0)
    assert transfers(g) == [1, 2, 3]  # high := last[A] + 1


def test_leaving_local_m_aborts_the_transfer() -> None:
    g = gateway(committed_log([(m.JOINED, A)], 50), transfer_chunk=2)
    commit_all(g)
    g.on_uplink("a", m.Hello("A", "G", A, 0, True), 0.0)
    g.on_uplink("a", m.NackReq("A", "G", 1, A, 1, 40), 0.0)
    assert A in g.trans
    g.tick(10.0)  # B2: silent for longer than local_timeout
    assert "A" not in g.local and A not in g.local_m and A not in g.trans
    assert g.stats.aborted == 1


def test_cleanup_frees_the_member_at_the_gateway() -> None:
    log = committed_log([(m.JOINED, A), (m.LEFT, A)])
    work = CoordState()
    for i in range(1, 3):
        work.apply(log.get(i), 0.0)  # type: ignore[arg-type]
    g = gateway(log)
    g.on_uplink("a", m.Hello("A", "G", A, 0, True), 0.0)
    commit_all(g)
    log.append([work.next_record(m.CLEANUP, A)])
    commit_all(g)
    assert A not in g.local_m and A not in log.state.rows
    g.on_uplink("a", m.Hello("A", "G", A, 0, True), 0.1)  # a late greeting
    assert A not in g.local_m
    assert ("a", m.NotMember("G", A)) in g.cell_out


def test_skip_membership_relays_only_local_membership_changes() -> None:
    g = gateway(committed_log([(m.JOINED, A), (m.JOINED, B)], 1), skip_membership=True)
    g.on_uplink("a", m.Hello("A", "G", A, 0), 0.0)
    commit_all(g)
    g.flush(0.0)
    relayed = [r.gseq for _, x in g.cell_out if isinstance(x, m.Normals) for r in x.records]
    assert relayed == [1, 3]  # B's "has joined" (2) is not relayed here


def test_beacon_reports_the_highest_relayed_multicast() -> None:
    g = gateway(committed_log([(m.JOINED, A)], 2))
    commit_all(g)
    g.tick(0.0)
    beacons = [x for _, x in g.cell_out if isinstance(x, m.Beacon)]
    assert beacons and beacons[0].high == 3 and beacons[0].master == "H1"


def test_forwards_are_kept_until_committed_and_resent_to_a_new_master() -> None:
    g = gateway(committed_log([(m.JOINED, A)]))
    g.on_uplink("a", m.NewReq("A", "G", 1, A, (m.NewItem(1, 1, b"x"),)), 0.0)
    (fwd,) = g.to_coord
    assert isinstance(fwd, m.Forward)
    g.to_coord.clear()
    g.on_fwd_ack(m.FwdAck(E, fwd.fseq, 5))
    g.on_commit_point(4)
    assert len(g.outbox) == 1  # its record (lsn 5) is not committed yet
    e2 = Epoch(2, 1.0, "H2")
    g.new_master("H2", e2, 1.0)
    assert [x.fseq for x in g.to_coord if isinstance(x, m.Forward)] == [fwd.fseq]
    g.on_fwd_ack(m.FwdAck(E, fwd.fseq, 1))  # from the old master: ignored
    g.on_commit_point(9)
    assert len(g.outbox) == 1
    g.on_fwd_ack(m.FwdAck(e2, fwd.fseq, 7))
    assert len(g.outbox) == 0


def test_full_outbox_refuses_without_acknowledging() -> None:
    g = gateway(committed_log([(m.JOINED, A)]), max_forward_queue=1)
    g.on_uplink("a", m.NewReq("A", "G", 1, A, (m.NewItem(1, 1, b"x"),)), 0.0)
    g.cell_out.clear()
    g.on_uplink("a", m.NewReq("A", "G", 2, A, (m.NewItem(2, 2, b"y"),)), 0.0)
    assert g.cell_out == [] and g.stats.refused_full == 1


def test_reroute_orders_members_to_move() -> None:
    g = gateway(committed_log([(m.JOINED, A), (m.JOINED, B)]))
    g.on_uplink("a", m.Hello("A", "G", A, 0), 0.0)
    g.on_uplink("b", m.Hello("B", "G", B, 0), 0.0)
    target = m.CellInfo("H9", "cell9", "up9", 0)
    g.on_reroute(1, target)
    assert g.cell_out == [("b", m.Move("G", "B", target))]
