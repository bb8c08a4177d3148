"""Retiring a host for good (docs/infra.md, "Retiring a host"): a reconfiguration
agreed through the coordinator's log, so the quorum of elections and commits shrinks
without a restart, it survives a failover, a retired host is ignored and stops when
it comes back, and bad requests get typed answers."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from infra_harness import (
    Net,
    bootstrapped,
    check_complete,
    check_garbage_collected,
    check_total_order,
    drain,
    run_workload,
)

from m2mc.infra import messages as m
from m2mc.infra import reconfig
from m2mc.infra.codec import decode, encode
from m2mc.infra.config import InfraConfig
from m2mc.infra.directory import Directory
from m2mc.infra.host import HostCore, HostIdentity
from m2mc.infra.ids import NO_EPOCH, Epoch, MemberId
from m2mc.infra.reconfig import ReconfigError, check_change, retired_after
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState, StateError
from m2mc.infra.takeover import TakeoverRound


def steady(net: Net, members: int = 3) -> None:
    for i in range(members):
        net.add_member(f"M{i}", net.host_ids[i % len(net.host_ids)])
    net.run_until(net.now + 3.0)
    assert all(x.is_member for x in net.members.values())


def traffic(net: Net, tag: str, rounds: int = 10) -> None:
    for k in range(rounds):
        for n in net.members:
            if net.where[n] is not None and net.alive.get(net.where[n] or "", False):
                net.send(n, f"{n}-{tag}{k}".encode())
        net.run_until(net.now + 0.02)


def settle(net: Net) -> None:
    drain(net, 30)
    check_total_order(net)
    check_complete(net)


def retire(net: Net, via: str, target: str) -> m.AdminResult:
    return net.answer(net.admin(via, m.OP_RETIRE, target))


# ------------------------------------------------------------------ the change itself
def test_retire_then_elect_with_the_smaller_quorum() -> None:
    """Five hosts, two die for good: 3 of 5 are still a quorum. Retire both (one at a
    time); the configuration is 3 hosts, quorum 2. Then the master dies: without the
    retirements 2 of 5 could never elect; with them the two survivors do, and the
    members keep one total order with nothing lost."""
    net = Net(seed=21, hosts=("H1", "H2", "H3", "H4", "H5"), loss=0.1)
    steady(net, 5)
    traffic(net, "a")
    master = net.coordinator()
    assert master is not None
    followers = [h for h in net.host_ids if h != master]
    dead = followers[-2:]
    for h in dead:
        net.crash(h)
    traffic(net, "b")
    survivor = followers[0]
    first = retire(net, survivor, dead[0])
    assert first.code == "ok" and first.lsn > 0, first
    assert "quorum 3 of 4" in first.text
    second = retire(net, survivor, dead[1])
    assert second.code == "ok" and second.lsn > first.lsn, second
    assert "quorum 2 of 3" in second.text
    net.run_until(net.now + 0.5)
    for h in net.host_ids:
        if net.alive[h]:
            core = net.hosts[h]
            assert core.retired == frozenset(dead) and core.directory.quorum() == 2, h
            assert core.directory.universe() == 3
    traffic(net, "c")
    net.crash(master)
    traffic(net, "d")
    net.run_until(net.now + 3)
    new = net.coordinator()
    assert new is not None and new != master and net.alive[new]
    assert net.hosts[new].retired == frozenset(dead)
    settle(net)


def test_the_retirement_survives_a_master_failover() -> None:
    """It is in the log: the next master knows it, counts the smaller quorum, and a
    second retirement of the same host is refused as already done."""
    net = Net(seed=22, hosts=("H1", "H2", "H3", "H4"))
    steady(net, 4)
    master = net.coordinator()
    assert master is not None
    gone = next(h for h in net.host_ids if h != master)
    net.crash(gone)
    result = retire(net, master, gone)
    assert result.code == "ok", result
    net.run_until(net.now + 0.5)
    net.crash(master)  # 2 of the 4 hosts remain: a quorum of the 3 left configured
    traffic(net, "x")
    net.run_until(net.now + 3)
    new = net.coordinator()
    assert new is not None and new not in (master, gone)
    assert net.hosts[new].retired == {gone} and net.hosts[new].directory.quorum() == 2
    assert any(r.kind == m.RETIRED for r in _records(net.hosts[new])) \
        or net.hosts[new].config_lsn > 0
    again = retire(net, new, gone)
    assert again.code == reconfig.ALREADY and "already retired" in again.text
    settle(net)


def _records(core: HostCore) -> list[m.Record]:
    log = core.log
    return [r for i in range(log.low, log.high + 1) if (r := log.get(i)) is not None]


def test_a_retired_host_that_comes_back_is_refused_and_stops() -> None:
    net = Net(seed=23, trace=True)
    steady(net, 3)
    master = net.coordinator()
    assert master is not None
    gone = next(h for h in net.host_ids if h != master)
    net.crash(gone)
    assert retire(net, master, gone).code == "ok"
    traffic(net, "a")
    net.restart(gone)  # a fresh incarnation, its log empty, its --peer list unchanged
    net.run_until(net.now + 2)
    back = net.hosts[gone]
    assert back.retired_self and "retired at log position" in back.retired_self
    assert back.coordinator is None and back.next_deadline() is None
    assert net.hosts[master].stats.retired_refused > 0
    assert net.hosts[master].ops.notices > 0
    assert net.coordinator() == master  # nobody was disturbed
    net.crash(gone)  # its process exits (m2mc host: exit status 2)
    traffic(net, "b")
    settle(net)


def test_readmitting_a_retired_host_makes_it_count_again() -> None:
    net = Net(seed=24)
    steady(net, 3)
    master = net.coordinator()
    assert master is not None
    gone = next(h for h in net.host_ids if h != master)
    net.crash(gone)
    assert retire(net, master, gone).code == "ok"
    assert net.hosts[master].directory.quorum() == 2 and net.hosts[master].directory.universe() == 2
    back = net.answer(net.admin(master, m.OP_READMIT, gone))
    assert back.code == "ok" and "quorum 2 of 3" in back.text, back
    net.restart(gone)
    net.run_until(net.now + 2)
    assert not net.hosts[gone].retired_self
    assert gone in net.hosts[master].directory.live()
    traffic(net, "r")
    settle(net)


def test_the_master_can_retire_itself_and_the_others_carry_on() -> None:
    net = Net(seed=25)
    steady(net, 3)
    master = net.coordinator()
    assert master is not None
    result = retire(net, master, master)
    assert result.code == "ok", result
    net.run_until(net.now + 3)
    assert net.hosts[master].retired_self
    new = next(h for h in net.host_ids if net.hosts[h].coordinator is not None)
    assert new != master and net.hosts[new].retired == {master}
    net.crash(master)  # its process exits
    traffic(net, "s")
    settle(net)


# ------------------------------------------------------------------ refusing retired hosts
def _host(hosts: int = 3) -> HostCore:
    core = HostCore(HostIdentity("H1"), InfraConfig(), random.Random(1), expected_hosts=hosts)
    core.start(0.0)
    return bootstrapped(core, [f"H{i}" for i in range(2, hosts + 1)])


def _status(h: str, eid: Epoch | None = None, master: str = "") -> bytes:
    return encode(m.Status(h, 1, "127.0.0.1", 7000, "cell", h, 0, (), master, NO_EPOCH,
                           NO_EPOCH, 0, 0, eid))


def _retired_core() -> HostCore:
    core = _host()
    for h in ("H2", "H3"):
        core.receive_backbone(h, _status(h), 0.01)
    state = CoordState()
    state.apply(m.Record(1, 0, m.RETIRED, MemberId("H3", 0)), 0.0)
    core.log.replace_after(0, state.snapshot(), (), 0.02)
    core.ops.check_configuration(0.02)
    return core


def test_a_retired_hosts_status_votes_and_log_answers_are_ignored() -> None:
    core = _retired_core()
    assert core.retired == {"H3"} and core.directory.quorum() == 2
    assert core.directory.live() == ["H1", "H2"]
    eid = Epoch(7, 1.0, "H2")
    core.receive_backbone("H2", encode(m.ElectStart(eid)), 0.1)
    core.receive_backbone("H3", _status("H3", eid), 0.11)
    core.receive_backbone("H3", encode(m.Vote(eid, "H3", "H3")), 0.12)
    assert "H3" not in core.election.participants and "H3" not in core.election.votes
    round_ = TakeoverRound("H1", Epoch(8, 2.0, "H1"), core.log, 2, 2.0, 1.0,
                           quorum_of=core.directory.quorum, retired=core.retired)
    core.takeover = round_
    core.receive_backbone("H3", encode(m.StateReply(round_.epoch, "H3", NO_EPOCH, 0, 0, None,
                                                    ())), 2.1)
    assert set(round_.replies) == {"H1"} and not round_.ready
    core.receive_backbone("H3", encode(m.Accepted(round_.epoch, "H3", 5)), 2.2)
    assert core.stats.retired_refused == 4  # status, vote, answer, acceptance
    assert core.security_stats()["retired_refused"] == 4


def test_only_the_master_can_tell_a_host_it_is_retired() -> None:
    core = _host()
    core.receive_backbone("H2", _status("H2"), 0.01)
    core.receive_backbone("H2", _status("H3", master="H3"), 0.01)
    core.receive_backbone("H2", encode(m.RetiredNotice("H2", "H1", 4)), 0.1)
    assert not core.retired_self  # H2 is no master
    core.receive_backbone("H3", encode(m.RetiredNotice("H3", "H2", 4)), 0.1)
    assert not core.retired_self  # about somebody else
    core.receive_backbone("H3", encode(m.RetiredNotice("H3", "H1", 4)), 0.1)
    assert core.retired_self == "retired at log position 4 (told by H3)"
    core.on_timer(1.0)
    assert core.drain(1.0) == [] and core.next_deadline() is None


# ------------------------------------------------------------------ takeover across a change
def test_a_takeover_waits_for_a_majority_of_the_adopted_logs_configuration() -> None:
    """The scenario that breaks naive counting: a stale winner of 5 configured hosts
    hears itself and two hosts that were retired without knowing it; one holds the
    log that retired them. 3 of 5 is not enough: the adopted configuration has 3
    hosts, of which only the winner answered."""
    directory = Directory("H1", 0.5, expected_hosts=5)
    directory.known.update({"H2", "H3", "H4", "H5"})
    log = ReplicaLog()
    epoch = Epoch(9, 0.0, "H1")
    t = TakeoverRound("H1", epoch, log, directory.quorum(), 0.0, 1.0,
                      quorum_of=directory.quorum, retired=frozenset())
    both = (m.Record(1, 0, m.RETIRED, MemberId("H4", 0)),
            m.Record(2, 0, m.RETIRED, MemberId("H5", 0)))
    e_old = Epoch(3, 0.0, "H2")
    t.add(m.StateReply(epoch, "H4", e_old, 0, 2, None, both))
    t.add(m.StateReply(epoch, "H5", e_old, 0, 1, None, both[:1]))
    assert len(t.replies) == 3 >= directory.quorum()  # what the old rule would accept
    assert t.configuration() == {"H4", "H5"} and not t.ready
    t.add(m.StateReply(epoch, "H2", e_old, 2, 2, None, ()))
    assert t.ready  # H1 and H2: a majority of {H1, H2, H3}
    work, _ = t.adopt(0.0)
    assert work.retired == {"H4", "H5"}


def test_retired_after_follows_snapshot_and_records() -> None:
    snap = m.Snapshot(3, 0, 0, (), (), ("H9",), 3)
    records = (m.Record(4, 0, m.ADMITTED, MemberId("H9", 0)),
               m.Record(5, 0, m.RETIRED, MemberId("H2", 0)))
    assert retired_after(frozenset({"H7"}), snap, records) == {"H2"}
    assert retired_after(frozenset({"H7"}), None, records[1:]) == {"H7", "H2"}
    assert decode(encode(m.Sync(Epoch(1, 0, "H1"), 0, 0, snap, records))).snapshot == snap


# ------------------------------------------------------------------ bad requests
def test_bad_requests_get_typed_errors() -> None:
    known = {"H1", "H2", "H3"}
    none: frozenset[str] = frozenset()
    with pytest.raises(ReconfigError, match="'H9' is not a host") as unknown:
        check_change(m.OP_RETIRE, "H9", known=known, committed=none, working=none, universe=3)
    assert unknown.value.code == reconfig.UNKNOWN
    with pytest.raises(ReconfigError, match="already retired") as twice:
        check_change(m.OP_RETIRE, "H3", known=known, committed=frozenset({"H3"}),
                     working=frozenset({"H3"}), universe=2)
    assert twice.value.code == reconfig.ALREADY
    with pytest.raises(ReconfigError, match="last host") as last:
        check_change(m.OP_RETIRE, "H1", known={"H1"}, committed=none, working=none, universe=1)
    assert last.value.code == reconfig.LAST
    with pytest.raises(ReconfigError, match="one change at a time") as busy:
        check_change(m.OP_RETIRE, "H2", known=known, committed=none,
                     working=frozenset({"H3"}), universe=3)
    assert busy.value.code == reconfig.BUSY
    with pytest.raises(ReconfigError, match="not retired") as readmit:
        check_change(m.OP_READMIT, "H2", known=known, committed=none, working=none, universe=3)
    assert readmit.value.code == reconfig.NOT_RETIRED
    assert check_change(m.OP_READMIT, "H3", known=known, committed=frozenset({"H3"}),
                        working=frozenset({"H3"}), universe=2) == m.ADMITTED
    assert {reconfig.UNKNOWN, reconfig.ALREADY, reconfig.LAST} <= reconfig.BAD_INPUT
    state = CoordState()
    state.apply(m.Record(1, 0, m.RETIRED, MemberId("H3", 0)), 0.0)
    with pytest.raises(StateError):  # a forged log retiring twice does not apply
        state.apply(m.Record(2, 0, m.RETIRED, MemberId("H3", 0)), 0.0)


def test_bad_requests_through_the_hosts() -> None:
    net = Net(seed=26)
    steady(net, 2)
    master = net.coordinator()
    assert master is not None
    other = next(h for h in net.host_ids if h != master)
    assert net.answer(net.admin(other, m.OP_RETIRE, "H9")).code == reconfig.UNKNOWN
    assert net.answer(net.admin(other, m.OP_READMIT, "H2")).code == reconfig.NOT_RETIRED
    assert net.answer(net.admin(other, 7, "H2")).code == reconfig.BAD_OP
    third = next(h for h in net.host_ids if h not in (master, other))
    first = net.admin(other, m.OP_RETIRE, third)
    second = net.admin(other, m.OP_RETIRE, other)  # while the first is not committed
    assert net.answer(first).code == "ok"
    assert net.answer(second).code == reconfig.BUSY
    assert net.answer(net.admin(master, m.OP_RETIRE, third)).code == reconfig.ALREADY
    shown = net.answer(net.admin(other, m.OP_SHOW))
    assert f'"retired": ["{third}"]' in shown.text and f'"master": "{master}"' in shown.text
    single = Net(seed=27, hosts=("H1",))
    single.run_until(2.0)
    assert single.answer(single.admin("H1", m.OP_RETIRE, "H1")).code == reconfig.LAST


def test_operators_requests_are_bounded() -> None:
    core = _host()
    for i in range(core.cfg.max_admin_requests + 3):
        core.admin("op", i, m.OP_RETIRE, "H2", 0.1)  # no master yet: answered at once
    assert core.ops.desk.clients == {}
    desk = reconfig.AdminDesk(limit=2, timeout=1.0)
    assert desk.take("a", 1, m.OP_RETIRE, "H2", 0.0) and desk.take("a", 2, m.OP_RETIRE, "H2", 0.0)
    assert not desk.take("a", 3, m.OP_RETIRE, "H2", 0.0) and desk.refused == 1
    assert desk.take("a", 4, m.OP_RETIRE, "H2", 1.5)  # the others timed out
    assert list(desk.clients) == [("a", 4)]


# ------------------------------------------------------------------ P1-P7 with a retirement
@pytest.mark.parametrize("ext", [{}, {"subscribe": True}])
def test_p1_to_p7_when_the_crashed_master_is_retired(ext: dict[str, bool]) -> None:
    net = Net(seed=31, loss=0.2, hosts=("H1", "H2", "H3", "H4"),
              cfg=InfraConfig(**ext))  # type: ignore[arg-type]
    run_workload(net, members=8, rounds=120, crash_at=40, retire_at=60)
    _check_all(net)


def _check_all(net: Net) -> None:
    check_total_order(net)
    for node, log in net.logs.items():
        assert log.joined and log.left and not log.left[-1].expelled, node
    check_complete(net)
    check_garbage_collected(net)
    gone = {h for h in net.host_ids if not net.alive[h]}
    for h in net.host_ids:
        if net.alive[h]:
            assert net.hosts[h].retired == gone, h


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), loss=st.sampled_from([0.0, 0.2]),
       hosts=st.sampled_from([3, 4, 5]), retire_at=st.integers(41, 100))
def test_properties_hold_with_a_retirement_for_random_runs(seed: int, loss: float, hosts: int,
                                                           retire_at: int) -> None:
    net = Net(seed=seed, loss=loss, hosts=[f"H{i + 1}" for i in range(hosts)])
    run_workload(net, members=6, rounds=110, crash_at=40, retire_at=retire_at)
    _check_all(net)
