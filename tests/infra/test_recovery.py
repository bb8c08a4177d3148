"""Hosts without a data directory (docs/infra.md, "Hosts without a data directory"): a
host that starts with no state recovers the log from the others before it votes,
accepts or answers a takeover (Viewstamped Replication Revisited §4.3), and when no
host holds a log the deployment starts a new sequence whose id tells the members of
the old one that their membership is gone."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from infra_harness import (
    Net,
    check_complete,
    check_total_order,
    drain,
    restart_the_quorum_depends_on,
    traffic,
)

from m2mc.infra import messages as m
from m2mc.infra.ids import NO_EPOCH, Epoch
from m2mc.infra.recovery import BOOTSTRAP, SYNC, Recovery

E1, E2, E3 = Epoch(1, 0.0, "H1"), Epoch(2, 0.0, "H2"), Epoch(3, 0.0, "H3")


# ------------------------------------------------------------------ the rule
def recovery(nonce_from: int = 1) -> Recovery:
    return Recovery("H3", random.Random(nonce_from), 0.1)


def quorums(n: int):  # type: ignore[no-untyped-def]
    return lambda retired: (n - len(retired), (n - len(retired)) // 2 + 1)


def reply(r: Recovery, host: str, epoch: Epoch = NO_EPOCH, pristine: bool = False,
          retired: tuple[str, ...] = (), config_lsn: int = 0) -> m.RecoverReply:
    return m.RecoverReply(host, r.nonce, epoch, pristine, retired, config_lsn)


def test_the_floor_needs_enough_hosts_with_state() -> None:
    r = recovery()
    known = {"H1", "H2", "H3", "H4", "H5"}
    r.on_reply(reply(r, "H1", E1), known)
    r.on_reply(reply(r, "H2", E2), known)
    assert r.decide(quorums(5)) == ""  # 2 of the 3 a quorum of 3 in 5 could hide behind
    r.on_reply(reply(r, "H4", E1), known)
    assert r.decide(quorums(5)) == SYNC and r.floor == E2
    assert r.allows(E2) and r.allows(E3) and not r.allows(E1)


def test_answers_to_another_question_or_from_strangers_do_not_count() -> None:
    r = recovery()
    known = {"H1", "H2", "H3"}
    r.on_reply(m.RecoverReply("H1", r.nonce + 1, E1, False), known)  # an older question's
    r.on_reply(reply(r, "X", E1), known)  # a host nobody admitted
    r.on_reply(reply(r, "H3", E1), known)  # ourselves
    assert r.replies == {} and r.decide(quorums(3)) == ""


def test_a_lone_pristine_host_waits_for_the_ones_that_may_hold_the_log() -> None:
    r = recovery()
    known = {"H1", "H2", "H3"}
    r.on_reply(reply(r, "H1", pristine=True), known)
    assert r.decide(quorums(3)) == ""  # H2 may hold it: never guess
    r.on_reply(reply(r, "H2", pristine=True), known)
    assert r.decide(quorums(3)) == BOOTSTRAP  # nobody holds a log
    assert recovery().decide(quorums(1)) == BOOTSTRAP  # a single host needs no answer


def test_one_holder_among_pristine_hosts_is_not_enough_and_stops_a_bootstrap() -> None:
    r = recovery()
    known = {"H1", "H2", "H3"}
    r.on_reply(reply(r, "H1", E1), known)
    r.on_reply(reply(r, "H2", pristine=True), known)
    assert r.decide(quorums(3)) == ""  # the log may be only partly on H1: wait


def test_retired_hosts_are_not_waited_for() -> None:
    r = recovery()
    known = {"H1", "H2", "H3", "H4"}
    r.on_reply(reply(r, "H1", E2, retired=("H4",), config_lsn=9), known)
    assert r.decide(quorums(4)) == ""
    r.on_reply(reply(r, "H2", E1), known)
    assert r.decide(quorums(4)) == SYNC and r.floor == E2  # 2 of 3 once H4 is gone


# ------------------------------------------------------------------ deployments
def memory_net(seed: int, loss: float = 0.05) -> Net:
    net = Net(seed=seed, loss=loss, durable_hosts=False)
    for i in range(4):
        net.add_member(f"M{i}", net.host_ids[i % 3])
    net.run_until(net.now + 3.0)
    assert all(c.is_member for c in net.members.values())
    return net


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_restarted_memory_host_recovers_then_serves(seed: int) -> None:
    net = memory_net(seed)
    traffic(net, 1.0, "a")
    follower = next(h for h in net.host_ids if h != net.coordinator())
    net.crash(follower)
    traffic(net, 1.0, "b")
    net.restart(follower)
    core = net.hosts[follower]
    assert core.succession.recovering
    traffic(net, 2.0, "c")
    assert not core.succession.recovering  # the master's Sync brought the log
    assert core.log.applied > 0 and core.log.state.sequence != 0
    drain(net)
    check_complete(net)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_memory_host_restarted_while_the_quorum_depends_on_it_waits(seed: int) -> None:
    """The case of issue 34 with memory-only hosts: one host cut off the backbone, the
    master dies, the other follower restarts empty. Before, its empty answer let the
    stale log win (718-792 lost, 31-40 renumbered). Now it recovers first, which needs
    a second host that holds the log: there is none, so the deployment waits, says
    so, and never delivers anything out of order."""
    net = Net(seed=seed, loss=0.05, durable_hosts=False, trace=True)
    for i in range(4):
        net.add_member(f"M{i}", net.host_ids[i % 3])
    net.run_until(net.now + 3.0)
    follower = restart_the_quorum_depends_on(net)
    net.run_until(net.now + 30.0)
    check_total_order(net)  # one message per gseq, whatever was delivered
    assert net.hosts[follower].succession.recovering
    assert net.coordinator() is None  # nobody may lead on a log that may lack records
    assert any("recovering the log" in text for text in net.hosts[follower].notices)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_power_cut_of_memory_hosts_starts_a_new_sequence_and_members_are_told(
        seed: int) -> None:
    net = memory_net(seed)
    traffic(net, 1.0, "a")
    old = net.hosts[net.host_ids[0]].log.state.sequence
    assert old
    net.power_cut()
    net.run_until(net.now + 0.5)
    for h in net.host_ids:
        net.restart(h)
    net.run_until(net.now + 3.0)
    new = {net.hosts[h].log.state.sequence for h in net.host_ids}
    assert len(new) == 1 and old not in new and 0 not in new
    for n, core in net.members.items():  # told: their membership ended, then a new one
        assert core.stats.sequence_lost == 1, n
        assert net.logs[n].left and net.logs[n].left[-1].expelled
        assert core.is_member and core.sequence in new
    traffic(net, 1.0, "b")
    drain(net)
    assert net.pending() == 0  # nobody resends into the void
    after = {n: [d.mid for d in log.delivered if b"-b" in d.body]
             for n, log in net.logs.items()}
    first = next(iter(after.values()))
    assert len(first) == 40 and all(v == first for v in after.values())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(1, 10_000), loss=st.sampled_from([0.0, 0.1, 0.2]),
       restarts=st.lists(st.tuples(st.sampled_from(["H1", "H2", "H3"]),
                                   st.floats(0.05, 1.5)), min_size=1, max_size=4))
def test_memory_hosts_restarted_one_at_a_time_lose_nothing(
        seed: int, loss: float, restarts: list[tuple[str, float]]) -> None:
    """One memory-only host down at a time (any of them, the master too), each back
    before the next goes: P1-P7 hold, and every restarted host recovers."""
    net = memory_net(seed, loss)
    for k, (h, down) in enumerate(restarts):
        traffic(net, 0.5, f"r{k}-")
        net.crash(h)
        traffic(net, down, f"d{k}-")
        net.restart(h)
        assert net.run_while(lambda h=h: net.hosts[h].succession.recovering  # type: ignore[misc]
                             or net.coordinator() is None, net.now + 20)
    drain(net)
    check_complete(net)
