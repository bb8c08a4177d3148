"""seeds/004: the voting algorithm (5.1), host discovery and crash detection (4.2, 4.5,
5.2), and the toReroute rule (4.4, 5.5)."""

from __future__ import annotations

import random

from m2mc.infra import messages as m
from m2mc.infra.balance import RerouteOrder, plan, to_reroute
from m2mc.infra.directory import Directory
from m2mc.infra.election import Election, ElectionState
from m2mc.infra.ids import NO_EPOCH, Epoch


def election(me: str) -> Election:
    return Election(me, collect=0.1, vote_window=0.1, announce=0.3, rng=random.Random(1))


def status(host: str, load: int, port: int, eid: Epoch | None, address: str = "127.0.0.1"
           ) -> m.Status:
    return m.Status(host, 0, address, port, "c", "u", load, (), "", NO_EPOCH, NO_EPOCH, 0, 0, eid)


def run_vote(e: Election, statuses: list[m.Status], votes: list[m.Vote], quorum: int):  # type: ignore[no-untyped-def]
    for s in statuses:
        e.on_status(s, e.started_at + 0.05)
    out = e.tick(e.started_at + 0.1, quorum)
    for v in votes:
        e.on_vote(v)
    return out, e.tick(e.started_at + 0.2, quorum)


def test_single_host_elects_itself() -> None:
    e = election("H1")
    start = e.begin(0.0)
    e.on_status(status("H1", 3, 7001, start.eid), 0.0)
    vote = e.tick(0.1, quorum=1).vote
    assert vote == m.Vote(start.eid, "H1", "H1")
    assert e.tick(0.2, quorum=1).won == start.eid
    assert e.state == ElectionState.NORMAL


def test_everybody_votes_for_the_least_loaded_then_port_then_address() -> None:
    e = election("H1")
    eid = e.begin(0.0).eid
    sts = [status("H1", 2, 7001, eid), status("H2", 1, 7003, eid), status("H3", 1, 7002, eid)]
    out, _ = run_vote(e, sts, [], 2)
    assert out.vote is not None and out.vote.candidate == "H3"  # load 1, lower port
    e2 = election("H1")
    eid2 = e2.begin(0.0).eid
    same = [status("H1", 0, 7000, eid2, "127.0.0.3"), status("H2", 0, 7000, eid2, "127.0.0.2")]
    out2, _ = run_vote(e2, same, [], 2)
    assert out2.vote is not None and out2.vote.candidate == "H2"  # lowest address


def test_majority_of_participants_wins() -> None:
    e = election("H3")
    eid = e.begin(0.0).eid
    sts = [status(h, load, 7000 + i, eid) for i, (h, load) in
           enumerate([("H1", 5), ("H2", 5), ("H3", 0)])]
    _, out = run_vote(e, sts, [m.Vote(eid, "H1", "H3"), m.Vote(eid, "H2", "H3")], 2)
    assert out.won == eid


def test_no_majority_restarts_with_a_newer_round() -> None:
    e = election("H1")
    eid = e.begin(0.0).eid
    sts = [status(h, 0, 7000 + i, eid) for i, h in enumerate(["H1", "H2", "H3", "H4"])]
    votes = [m.Vote(eid, "H2", "H2"), m.Vote(eid, "H3", "H3"), m.Vote(eid, "H4", "H4")]
    _, out = run_vote(e, sts, votes, 3)
    assert out.lost and out.won is None
    restart = e.tick(1.0, 3).start
    assert restart is not None and restart.eid > eid and restart.eid.round == eid.round + 1


def test_too_few_participants_for_a_quorum_elects_nobody() -> None:
    e = election("H1")
    eid = e.begin(0.0).eid
    _, out = run_vote(e, [status("H1", 0, 7000, eid)], [], quorum=2)
    assert out.won is None and out.lost


def test_late_statuses_do_not_take_part() -> None:
    e = election("H1")
    eid = e.begin(0.0).eid
    e.on_status(status("H1", 5, 7001, eid), 0.01)
    e.on_status(status("H2", 0, 7002, eid), 0.5)  # after the collect window
    out = e.tick(0.11, 1)
    assert out.vote is not None and out.vote.candidate == "H1"


def test_a_newer_start_interrupts_and_old_messages_are_ignored() -> None:
    e = election("H2")
    old = e.begin(1.0).eid
    newer = Epoch(old.round, 1.5, "H3")
    assert e.on_start(newer, 1.2)
    assert e.eid == newer and e.state == ElectionState.VOTING
    assert not e.on_start(old, 1.3)  # an older start is ignored
    e.on_status(status("H2", 0, 7002, old), 1.25)
    assert e.participants == {}  # a status of the interrupted election does not count
    e.on_vote(m.Vote(old, "H1", "H2"))
    assert e.votes == {}


def test_winner_that_does_not_announce_itself_leads_to_a_new_election() -> None:
    e = election("H1")
    eid = e.begin(0.0).eid
    sts = [status("H1", 1, 7001, eid), status("H2", 0, 7002, eid), status("H3", 1, 7003, eid)]
    _, out = run_vote(e, sts, [m.Vote(eid, "H2", "H2"), m.Vote(eid, "H3", "H2")], 2)
    assert out.won is None and not out.lost  # H2 won: wait for its announcement
    assert e.tick(0.6, 2).lost  # none came
    assert e.tick(1.0, 2).start is not None


def test_directory_discovers_expires_and_sees_restarts() -> None:
    d = Directory("H1", host_timeout=0.5, expected_hosts=3)
    assert d.quorum() == 2 and d.live() == ["H1"]
    st = status("H2", 0, 7002, None)
    assert d.on_status(st, 0.0) == (True, False)
    assert d.on_status(st, 0.2) == (False, False)
    assert d.live() == ["H1", "H2"]
    assert d.expire(0.6) == [] and d.expire(0.71) == ["H2"]
    assert d.live() == ["H1"] and not d.is_live("H2")
    back = m.Status("H2", 1, "127.0.0.1", 7002, "c", "u", 0, (), "", NO_EPOCH, NO_EPOCH, 0, 0)
    assert d.on_status(back, 1.0) == (True, True)  # back to life, new incarnation
    for h in ("H3", "H4", "H5"):
        d.on_status(status(h, 0, 7000, None), 1.0)
    assert d.universe() == 5 and d.quorum() == 3  # a discovered host enlarges the quorum


def test_to_reroute_formula_and_plan() -> None:
    assert to_reroute({"A": 2, "B": 0}) == 1.0  # the seeds/004 figure 3 example
    assert plan({"A": 2, "B": 0}) == RerouteOrder("A", "B", 1)
    assert plan({"A": 2, "B": 2, "C": 1}) is None  # 2 - 5/3 < 1: balanced enough
    assert plan({"A": 3, "B": 0, "C": 0}) == RerouteOrder("A", "B", 1)  # no overshoot
    assert plan({"A": 6, "B": 0, "C": 0}) == RerouteOrder("A", "B", 2)
    assert plan({"A": 1}) is None and plan({}) is None
