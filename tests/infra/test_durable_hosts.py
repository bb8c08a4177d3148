"""Durable hosts (docs/infra.md, "Durable hosts"): a host keeps its promise, its log and
its commit point across restarts, so a power cut of every host loses nothing, and a
restarted host never answers with less than it acknowledged.

The cases of issue 34 that broke memory-only hosts: a host restart while the quorum
depends on it (with a partition and the master's crash), and all hosts at once."""

from __future__ import annotations

import random

import pytest
from infra_harness import (
    Net,
    check_complete,
    drain,
    restart_the_quorum_depends_on,
    run_workload,
    traffic,
)

from m2mc.errors import SavedStateError
from m2mc.infra import messages as m
from m2mc.infra.codec import record_size
from m2mc.infra.config import InfraConfig
from m2mc.infra.host_durable import HostSaver
from m2mc.infra.host_persist import MemoryHostStore, StoredHost
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import pack_groups

A = MemberId("A", 1)
E1 = Epoch(1, 0.0, "H1")
E2 = Epoch(2, 0.0, "H2")


def app(lsn: int, gseq: int, nseq: int) -> m.Record:
    return m.Record(lsn, gseq, m.APP, A, nseq, nseq, 0, f"a{nseq}".encode(), "g", nseq)


def joined(lsn: int = 1) -> m.Record:
    return m.Record(lsn, lsn, m.JOINED, A, body=pack_groups(["g"]))


def saved_log(store: MemoryHostStore, saver: HostSaver) -> None:
    s = saver.take()
    if s is not None:
        store.commit(s.record)


def reloaded(store: MemoryHostStore, now: float = 0.0) -> ReplicaLog:
    log = ReplicaLog()
    HostSaver(log).restore(store.load(), now)
    return log


# ------------------------------------------------------------------ the log and its store
def test_a_restarted_log_holds_what_was_saved() -> None:
    store = MemoryHostStore()
    log = ReplicaLog()
    saver = HostSaver(log)
    log.promised = E1
    log.log_epoch = E1
    assert log.append([joined(), app(2, 2, 1), app(3, 3, 2)])
    log.commit_to(2, 0.0)
    saved_log(store, saver)
    back = reloaded(store)
    assert (back.promised, back.log_epoch, back.applied, back.high) == (E1, E1, 2, 3)
    assert back.state.rows[A].recv == 1  # the tables at the commit point
    assert back.get(3) == app(3, 3, 2)  # uncommitted records are kept too
    assert saver.take() is None  # nothing changed since


def test_a_commit_point_alone_costs_no_write_and_rides_along() -> None:
    """Only what an answer depends on makes a save; the commit point waits for the next
    one, and a restart from the older one holds the rest as uncommitted."""
    store = MemoryHostStore()
    log = ReplicaLog()
    saver = HostSaver(log)
    log.promised = log.log_epoch = E1
    log.append([joined(), app(2, 2, 1), app(3, 3, 2)])
    saved_log(store, saver)
    log.commit_to(3, 0.0)
    assert saver.take() is None  # committing needs no write before anything leaves
    back = reloaded(store)
    assert (back.applied, back.high) == (0, 3)  # held, uncommitted: a Sync commits them
    log.append([app(4, 4, 3)])
    saved_log(store, saver)
    assert store.applied == 3 and reloaded(store).state.rows[A].recv == 2


def test_a_replaced_suffix_is_replaced_in_the_store() -> None:
    store = MemoryHostStore()
    log = ReplicaLog()
    saver = HostSaver(log)
    log.promised = log.log_epoch = E1
    log.append([joined(), app(2, 2, 1), app(3, 3, 2)])
    log.commit_to(1, 0.0)
    saved_log(store, saver)
    other = m.Record(2, 2, m.APP, A, 1, 9, 0, b"other", "g", 1)
    log.promised = log.log_epoch = E2
    assert log.replace_after(1, None, (other,), 0.0)  # a new master's log from 2 on
    saved_log(store, saver)
    back = reloaded(store)
    assert back.high == 2 and back.get(2) == other and back.get(3) is None
    assert back.promised == E2


def test_a_snapshot_sync_resets_the_store() -> None:
    store = MemoryHostStore()
    log = ReplicaLog()
    saver = HostSaver(log)
    log.append([joined(), app(2, 2, 1)])
    log.commit_to(2, 0.0)
    saved_log(store, saver)
    source = ReplicaLog()
    source.append([joined(), app(2, 2, 1), app(3, 3, 2), app(4, 4, 3)])
    source.commit_to(4, 0.0)
    assert log.replace_after(0, source.state.snapshot(), (), 0.0)
    saved_log(store, saver)
    assert store.records == {} and store.checkpoint is not None
    back = reloaded(store)
    assert (back.applied, back.high, back.state.rows[A].recv) == (4, 4, 3)


def test_checkpoints_bound_the_live_log_and_retention_the_history() -> None:
    """What a restart loads stays within ``checkpoint_every`` freed records; what lies
    below is history, kept until the retention's bytes bound drops the oldest."""
    store = MemoryHostStore(retention_bytes=40 * 30)
    log = ReplicaLog()
    saver = HostSaver(log, checkpoint_every=10)
    log.append([joined()])
    for i in range(1, 100):
        log.append([app(i + 1, i + 1, i)])
        log.commit_to(i + 1, 0.0)
        log.gc(i + 1)  # every member delivered it: freed in memory
        saved_log(store, saver)
    assert len(store.load().records) <= 10
    assert store.size <= 40 * 30 and store.evicted > 40  # the history, bounded
    kept = sorted(store.records)
    assert kept == list(range(kept[0], 101))  # the newest, contiguous
    back = reloaded(store)
    assert back.applied == 100 and back.state.rows[A].recv == 99


@pytest.mark.parametrize("damage", ["hole", "applied", "epochs"])
def test_a_damaged_store_is_refused(damage: str) -> None:
    recs = (joined(), app(2, 2, 1), app(3, 3, 2))
    stored = {"hole": StoredHost(E1, E1, 1, None, (recs[0], recs[2])),
              "applied": StoredHost(E1, E1, 7, None, recs),
              "epochs": StoredHost(E1, E2, 1, None, recs)}[damage]
    with pytest.raises(SavedStateError):
        HostSaver(ReplicaLog()).restore(stored, 0.0)


# ------------------------------------------------------------------ whole deployments
def steady(net: Net, members: int = 4) -> None:
    for i in range(members):
        net.add_member(f"M{i}", net.host_ids[i % len(net.host_ids)])
    net.run_until(net.now + 3.0)
    assert all(c.is_member for c in net.members.values())


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_power_cut_of_every_host_loses_nothing(seed: int) -> None:
    net = Net(seed=seed, loss=0.05)
    steady(net)
    traffic(net, 3.0, "a")
    net.power_cut()
    net.run_until(net.now + 1.0)
    for h in net.host_ids:
        net.restart(h)
    traffic(net, 3.0, "b")
    drain(net)
    check_complete(net)
    assert net.coordinator() is not None


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_restart_while_the_quorum_depends_on_it(seed: int) -> None:
    """A host cut off the backbone, the master dies for good, the other follower
    restarts: the log the master committed with it survives in its store (a
    memory-only follower answered the cut-off host's takeover with an empty log, and
    the stale log won: lost and renumbered multicasts)."""
    net = Net(seed=seed, loss=0.05)
    steady(net)
    restart_the_quorum_depends_on(net)
    drain(net)
    check_complete(net)


def test_random_power_cuts(seed: int = 7) -> None:
    rng = random.Random(seed)
    net = Net(seed=seed, loss=0.1)
    steady(net, 6)
    for round_ in range(4):
        traffic(net, rng.uniform(0.5, 2.0), f"r{round_}-")
        victims = rng.sample(net.host_ids, rng.randint(1, 3))
        net.power_cut(victims)
        net.run_until(net.now + rng.uniform(0.1, 2.0))
        for h in victims:
            net.restart(h)
    drain(net)
    check_complete(net)


def test_the_workload_with_durable_hosts() -> None:
    net = Net(seed=5, loss=0.1)
    run_workload(net, members=6, rounds=60, crash_at=30)
    check_complete(net)


# ------------------------------------------------------------------ bounded hosts
@pytest.mark.parametrize("bound", ["bytes", "age"])
def test_a_paused_member_is_expelled_at_its_backlog_bound(bound: str) -> None:
    """A member whose application stops reading keeps greeting (member_timeout never
    fires); past max_backlog_bytes or max_backlog_age the hosts expel it, free what
    they held for it, count it, and the member sees its own expulsion."""
    cfg = (InfraConfig(max_backlog_bytes=20_000, max_backlog_age=0.0) if bound == "bytes"
           else InfraConfig(max_backlog_bytes=0, max_backlog_age=4.0))
    net = Net(seed=3, cfg=cfg)
    steady(net)
    paused = net.members["M0"]
    paused.make_room(paused.stats.delivered, net.now)  # the application reads no more
    expelled_at = None
    for k in range(120):
        for n in ("M1", "M2", "M3"):
            net.send(n, f"{n}-{k}".ljust(100, ".").encode())
        net.run_until(net.now + 0.1)
        master = net.hosts[net.coordinator() or "H1"].coordinator
        if expelled_at is None and master is not None and master.stats.expelled_backlog:
            expelled_at = k
    assert expelled_at is not None
    if bound == "bytes":  # 3 records a round, each counted as record_size: 20,000 / that
        per_round = 3 * record_size(m.Record(1, 1, m.APP, A, 1, 1, 0, b"x" * 100))
        assert abs(expelled_at - 20_000 / per_round) <= 4, expelled_at
    else:  # 4 s at 10 rounds a second
        assert 38 <= expelled_at <= 50, expelled_at
    assert any(left.expelled for left in net.logs["M0"].left)
    for h, core in net.hosts.items():  # nothing held for it any more
        assert len(core.log) < 200, h
    paused.make_room(10**9, net.now)  # it reads again: it rejoined and goes on
    net.send("M0", b"back")
    drain(net)
    assert any(d.body == b"back" for d in net.logs["M1"].delivered)


def test_without_a_bound_a_paused_member_holds_the_log() -> None:
    net = Net(seed=3, cfg=InfraConfig(max_backlog_bytes=0, max_backlog_age=0.0))
    steady(net)
    paused = net.members["M0"]
    paused.make_room(paused.stats.delivered, net.now)
    for k in range(60):
        net.send("M1", f"M1-{k}".encode())
        net.run_until(net.now + 0.1)
    assert not net.logs["M0"].left
    assert all(len(core.log) >= 60 for core in net.hosts.values())
