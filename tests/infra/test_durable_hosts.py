"""Durable hosts (docs/infra.md, "Durable hosts"): a host keeps its promise, its log and
its commit point across restarts, so a power cut of every host loses nothing, and a
restarted host never answers with less than it acknowledged.

The cases of issue 34 that broke memory-only hosts: a host restart while the quorum
depends on it (with a partition and the master's crash), and all hosts at once."""

from __future__ import annotations

import random

import pytest
from infra_harness import Net, check_complete, drain, run_workload

from m2mc.errors import SavedStateError
from m2mc.infra import messages as m
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


def traffic(net: Net, seconds: float, tag: str, rate: float = 10.0) -> None:
    """Each member sends ``rate`` messages a second for ``seconds``."""
    step = 1.0 / rate
    for k in range(int(seconds * rate)):
        for n in net.members:
            if n not in net.off:
                net.send(n, f"{n}-{tag}{k}".encode())
        net.run_until(net.now + step)


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
    traffic(net, 1.0, "a")
    master = net.coordinator()
    assert master is not None
    follower, cut = sorted(h for h in net.host_ids if h != master)
    net.net.partition([cut], domains=["backbone"])
    traffic(net, 2.0, "b")
    net.crash(master)
    net.crash(follower)
    net.run_until(net.now + 0.3)
    net.restart(follower)
    traffic(net, 1.0, "c")
    net.net.heal_partitions()
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
