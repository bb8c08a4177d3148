"""Beyond the seeds: the master host (coordinator) crashes and nothing is lost,
duplicated or reordered; host crash, restart and discovery; load balancing."""

from __future__ import annotations

import random

from infra_harness import Net, bootstrapped, check_complete, check_total_order, run_workload

from m2mc.infra import messages as m
from m2mc.infra.codec import decode, encode
from m2mc.infra.config import InfraConfig
from m2mc.infra.host import HostCore, HostIdentity
from m2mc.infra.ids import Epoch, MemberId


def steady(net: Net, members: int = 3) -> None:
    for i in range(members):
        net.add_member(f"M{i}", net.host_ids[i % len(net.host_ids)])
    net.run_until(net.now + 3.0)
    assert all(m.is_member for m in net.members.values())


def test_hosts_elect_exactly_one_master() -> None:
    net = Net(seed=2)
    net.run_until(3.0)
    masters = [h for h, c in net.hosts.items() if c.coordinator is not None]
    assert len(masters) == 1
    assert {c.master for c in net.hosts.values()} == set(masters)
    assert len({c.epoch for c in net.hosts.values()}) == 1


def test_new_coordinator_continues_the_sequence_after_a_crash() -> None:
    net = Net(seed=3, loss=0.1)
    steady(net, 6)
    for k in range(30):
        for n in net.members:
            net.send(n, f"{n}-a{k}".encode())
        net.run_until(net.now + 0.01)
    old = net.coordinator()
    assert old is not None
    seen = max(c.log.high for h, c in net.hosts.items() if h != old)
    highest_gseq = max(c.log.committed_gseq() for c in net.hosts.values())
    crash_time = net.now
    net.crash(old)
    for k in range(30):
        for n in net.members:
            net.send(n, f"{n}-b{k}".encode())
        net.run_until(net.now + 0.01)
    net.run_until(net.now + 3.0)
    new = net.coordinator()
    assert new is not None and new != old
    core = net.hosts[new]
    assert core.first_sequenced is not None
    t_first, _ = core.first_sequenced
    assert t_first - crash_time < 3.0  # failover, in virtual time
    for n in net.members:  # members of the dead host's cell move on
        if net.where[n] == old:
            net.move(n, new)
    assert net.run_while(lambda: net.pending() > 0, net.now + 30)
    net.run_until(net.now + 2)
    by_gseq = check_total_order(net)
    check_complete(net)
    # nothing any surviving host had seen was renumbered: the sequence went on past it
    assert core.coordinator is not None and core.log.high >= seen
    assert max(by_gseq) > highest_gseq


def test_uncommitted_records_on_a_survivor_are_adopted() -> None:
    """The coordinator replicates records to one host and dies before committing
    them: the new coordinator resumes from the highest record any host holds."""
    net = Net(seed=4, backbone_delay=0.05)
    steady(net, 3)
    old = net.coordinator()
    assert old is not None
    for n in net.members:
        net.send(n, f"{n}-last".encode())
    # let the NEWs reach the coordinator and its Replicates reach the others,
    # but crash before the Accepted come back (backbone delay 50 ms each way)
    net.run_until(net.now + 0.075)
    highs = {h: c.log.high for h, c in net.hosts.items()}
    assert highs[old] > max(c.log.applied for c in net.hosts.values())
    net.crash(old)
    for n in net.members:
        if net.where[n] == old:
            net.move(n, next(h for h in net.host_ids if h != old))
    net.run_until(net.now + 4.0)
    new = net.coordinator()
    assert new is not None
    assert net.run_while(lambda: net.pending() > 0, net.now + 30)
    net.run_until(net.now + 2)
    check_complete(net)
    survivors_high = max(highs[h] for h in highs if h != old)
    assert net.hosts[new].log.high >= survivors_high


def test_a_crashed_host_comes_back_and_catches_up() -> None:
    net = Net(seed=5, loss=0.1)
    steady(net, 3)
    victim = next(h for h in net.host_ids if h != net.coordinator())
    net.crash(victim)
    for k in range(20):
        net.send("M0", f"x{k}".encode())
        net.run_until(net.now + 0.02)
    net.run_until(net.now + 2)
    net.restart(victim)
    net.run_until(net.now + 2)
    back = net.hosts[victim]
    c = net.hosts[net.coordinator()]  # type: ignore[index]
    assert back.log.log_epoch == c.epoch and back.log.applied == c.log.applied
    assert back.log.state.members == c.log.state.members
    for n in net.members:
        net.move(n, victim)  # everybody into the restarted host's cell
    net.send("M1", b"through the restarted host")
    net.run_until(net.now + 3)
    assert net.logs["M2"].delivered[-1].body == b"through the restarted host"
    check_complete(net)


def test_two_crashes_in_a_row() -> None:
    net = Net(seed=6, hosts=("H1", "H2", "H3", "H4", "H5"), loss=0.1)
    run_workload(net, members=6, rounds=40, crash_at=10, gaps=False, leave_all=False)
    first = net.coordinator()
    assert first is not None
    net.crash(first)
    for n in net.members:
        if not net.alive[net.where[n] or "H1"]:
            net.move(n, next(h for h in net.host_ids if net.alive[h]))
    for k in range(20):
        net.send("M0", f"after{k}".encode())
        net.run_until(net.now + 0.05)
    assert net.run_while(lambda: net.pending() > 0, net.now + 30)
    net.run_until(net.now + 2)
    check_complete(net)


def test_old_master_records_are_refused_after_a_takeover() -> None:
    cfg = InfraConfig()
    host = HostCore(HostIdentity("H2"), cfg, random.Random(1), expected_hosts=3)
    host.start(0.0)
    bootstrapped(host, ("H1", "H3"))
    e1, e2 = Epoch(1, 0.0, "H1"), Epoch(2, 1.0, "H3")
    host.receive_backbone("H3", encode(m.Takeover(e2, "H3", 0)), 1.0)
    out = [decode(s.data) for s in host.drain(1.0) if s.link == "backbone"]
    assert any(isinstance(x, m.StateReply) and x.epoch == e2 for x in out)
    rec = m.Record(1, 1, m.JOINED, MemberId("A", 1))
    host.receive_backbone("H1", encode(m.Replicate(e1, 1, (rec,))), 1.1)
    assert host.log.high == 0  # refused: promised to a newer master
    host.receive_backbone("H1", encode(m.Takeover(e1, "H1", 0)), 1.2)
    out = [decode(s.data) for s in host.drain(1.2) if s.link == "backbone"]
    assert any(isinstance(x, m.TakeoverReject) and x.promised == e2 for x in out)


def test_a_host_not_in_the_configuration_is_discovered() -> None:
    net = Net(seed=7, hosts=("H1", "H2", "H3", "H4"))
    # H4 is listed nowhere else: the others learn it from its status updates
    net.run_until(3.0)
    for h in ("H1", "H2", "H3"):
        assert "H4" in net.hosts[h].directory.live()


def test_load_balancing_moves_members_without_losing_anything() -> None:
    net = Net(seed=8, obey_moves=True)
    for i in range(6):
        net.add_member(f"M{i}", "H1")  # everybody in one cell
    net.run_until(3.0)
    for k in range(100):
        net.send(f"M{k % 6}", f"m{k}".encode())
        net.run_until(net.now + 0.03)
    net.run_until(net.now + 3)
    loads = {h: sum(1 for n in net.members if net.where[n] == h) for h in net.host_ids}
    assert max(loads.values()) - min(loads.values()) <= 1, loads
    assert sum(len(log.moves) for log in net.logs.values()) >= 4
    check_complete(net)  # the users noticed nothing: same order, nothing lost


def test_member_of_a_crashed_host_asks_to_move() -> None:
    net = Net(seed=9, obey_moves=True)
    steady(net, 3)
    victim = next(h for h in net.host_ids if h != net.coordinator())
    stranded = [n for n in net.members if net.where[n] == victim]
    net.crash(victim)
    net.run_until(net.now + 3)
    assert all(net.where[n] != victim for n in stranded)
    net.send(stranded[0], b"still here")
    net.run_until(net.now + 2)
    check_complete(net)


def test_a_winner_that_freed_its_log_takes_back_copies_members_still_need() -> None:
    """seeds/001 4.1: a gateway with no members frees its tables; if it then wins the
    election, the committed but not yet stable multicasts it lacks come back from the
    hosts that kept them, so a slow member can still be sent them."""
    from m2mc.infra.replog import ReplicaLog
    from m2mc.infra.state import pack_groups
    from m2mc.infra.takeover import TakeoverRound, state_reply

    kept = ReplicaLog()
    a = MemberId("A", 1)
    recs = (m.Record(1, 1, m.JOINED, a, body=pack_groups(["g"])),
            *(m.Record(i, i, m.APP, a, i - 1, i - 1, 0, b"", "g", i - 1) for i in range(2, 11)))
    kept.append(recs)
    kept.commit_to(10, 0.0)
    kept.gc(3)  # multicasts 1-3 are stable: freed everywhere; 4-10 are not
    assert kept.low == 4
    e2 = Epoch(2, 1.0, "H3")
    winner = ReplicaLog()  # freed everything (4.1)
    round_ = TakeoverRound("H3", e2, winner, 2, 1.0, 1.0)
    ask = round_.request()
    round_.add(state_reply("H2", e2, kept, ask.commit, ask.low))
    assert round_.ready
    round_.adopt(1.0)
    assert (winner.low, winner.high, winner.applied) == (4, 10, 10)
    assert [winner.by_gseq(g) for g in range(4, 11)] == list(recs[3:])
    assert winner.by_gseq(3) is None
