"""The hosts' log as history (docs/infra.md, "History"): what a host keeps after
stability, for how long, and how it answers a member's reads."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from infra_harness import Net, drain

from m2mc.errors import SavedStateError
from m2mc.infra import history
from m2mc.infra import messages as m
from m2mc.infra.codec import record_size
from m2mc.infra.config import InfraConfig
from m2mc.infra.host_persist import HostCommit, MemoryHostStore
from m2mc.infra.ids import NO_EPOCH, MemberId
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState, pack_groups
from m2mc.infra_runtime import host_store
from m2mc.infra_runtime.host_store import LARGE_RECORD, SqliteHostStore
from m2mc.store import payload_files

GROUPS = ("r", "g", "b")


def members_log(n: int, seed: int) -> tuple[ReplicaLog, list[m.Record]]:
    """A committed log: three members (one per group), then ``n`` items of theirs."""
    rng = random.Random(seed)
    work = CoordState()
    mids = [MemberId(f"M{i}", i) for i in range(3)]
    recs: list[m.Record] = []
    for mid, g in zip(mids, GROUPS, strict=True):
        recs.append(work.next_record(m.JOINED, mid, body=pack_groups([g])))
        work.apply(recs[-1], 0.0)
    for i in range(n):
        k = rng.randrange(3)
        mid = mids[k]
        row = work.rows[mid]
        body = bytes(rng.randrange(40))
        r = work.next_record(m.APP, mid, row.recv + 1, i + 1, body, GROUPS[k])
        work.apply(r, 0.0)
        recs.append(r)
    log = ReplicaLog()
    assert log.append(recs)
    log.commit_to(log.high, 0.0)
    return log, recs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 120), seed=st.integers(0, 1000), freed=st.integers(0, 130),
       kept_bytes=st.integers(0, 4000), lo=st.integers(0, 140), span=st.integers(0, 140),
       groups=st.sets(st.sampled_from(GROUPS), min_size=1), newest=st.booleans(),
       limit=st.integers(1, 30), max_bytes=st.integers(1, 600))
def test_an_answer_holds_every_wanted_record_of_the_part_it_covers(
        n: int, seed: int, freed: int, kept_bytes: int, lo: int, span: int,
        groups: set[str], newest: bool, limit: int, max_bytes: int) -> None:
    """Records freed from the log go into its memory history (the oldest dropped past
    its bytes); an answer covers a part of the range asked for that starts at its low
    end (or, newest first, ends at its high end), holds every wanted record held there
    and nothing else, in order, within its bounds, and says the floor."""
    log, recs = members_log(n, seed)
    log.history = history.MemoryHistory(kept_bytes)
    log.gc(freed)
    held = {r.gseq: r for r in recs if r.gseq >= (log.history.history_floor() or log.low)}
    held = {g: r for g, r in held.items() if g >= _floor(log)}
    q = history.Query(lo, lo + span, frozenset(groups), newest, limit)
    a = history.read(log, q, max_bytes)
    assert a.floor == min(held, default=log.committed_gseq() + 1)
    top = min(q.hi, log.committed_gseq())
    if q.lo > top:
        assert a.hi < a.lo and a.records == ()
        return
    assert (a.lo == q.lo) if not newest else (a.hi == top)
    assert q.lo <= a.lo <= a.hi + 1 and a.hi <= top
    want = [r for g, r in sorted(held.items()) if a.lo <= g <= a.hi and q.wants(r)]
    assert list(a.records) == want
    assert len(a.records) <= limit
    assert len(a.records) <= 1 or sum(record_size(r) for r in a.records) <= max_bytes
    if a.records or a.lo > a.hi:
        return
    assert a.lo <= a.hi  # progress: an answer always covers something when it can


def _floor(log: ReplicaLog) -> int:
    f = log.history.history_floor()
    live = next((log.get(i).gseq for i in range(log.low, log.applied + 1)  # type: ignore[union-attr]
                 if log.get(i) is not None and log.get(i).gseq), log.committed_gseq() + 1)  # type: ignore[union-attr]
    return min(f, live) if f is not None else live


def test_memory_history_keeps_bytes_and_age_bounds() -> None:
    _, recs = members_log(50, 1)
    mem = history.MemoryHistory(max_bytes=400, max_age=10.0)
    mem.history_add(recs[:20], 0.0)
    assert mem.size <= 400 and mem.dropped > 0
    assert mem.history_floor() == recs[mem.dropped].gseq  # the oldest went first
    mem.history_add(recs[20:22], 5.0)
    mem.history_add(recs[22:23], 11.0)  # what came at 0.0 is older than 10 s now
    assert mem.history_floor() == recs[20].gseq
    mem.history_clear()
    assert mem.history_floor() is None and mem.size == 0


# ------------------------------------------------------------------ the store on disk
def _commit(store: SqliteHostStore | MemoryHostStore, recs: list[m.Record], *, live_low: int,
            now: float) -> None:
    store.commit(HostCommit(NO_EPOCH, NO_EPOCH, recs[-1].lsn, records=tuple(recs),
                            drop_below=live_low, now=now))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 80), seed=st.integers(0, 1000), lo=st.integers(0, 90),
       span=st.integers(0, 90), groups=st.sets(st.sampled_from(GROUPS), min_size=1),
       newest=st.booleans(), limit=st.integers(1, 40), beside=st.booleans())
def test_the_sqlite_store_reads_history_as_the_memory_store_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, seed: int, lo: int,
        span: int, groups: set[str], newest: bool, limit: int, beside: bool) -> None:
    """``beside``: every record in a segment beside the log, as a large one is."""
    monkeypatch.setattr(host_store, "LARGE_RECORD", 1 if beside else LARGE_RECORD)
    _, recs = members_log(n, seed)
    path = tmp_path / f"h{seed}-{n}-{lo}-{beside}.sqlite3"
    disk = SqliteHostStore(path, "H1", sync="off")
    mem = MemoryHostStore()
    for store in (disk, mem):
        _commit(store, recs, live_low=len(recs) // 2, now=0.0)
    q = history.Query(lo, lo + span, frozenset(groups), newest, limit)
    assert disk.history_read(q) == mem.history_read(q)
    assert disk.history_floor() == mem.history_floor() == 1
    first, last = lo + 1, lo + 1 + span  # by position too (a Sync from the history)
    assert disk.history_records(first, last) == mem.history_records(first, last) == [
        r for r in recs if first <= r.lsn <= last]
    back = disk.load()  # only the live part comes back at a restart
    assert [r.lsn for r in back.records] == list(range(len(recs) // 2, len(recs) + 1))
    disk.close()


@pytest.mark.parametrize("beside", [False, True])
def test_the_store_drops_history_by_age_and_bytes_never_the_live_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, beside: bool) -> None:
    """``beside``: every record in a segment beside the log (1 KiB segments), and a
    segment goes with the last row that refers to it."""
    if beside:
        monkeypatch.setattr(host_store, "LARGE_RECORD", 1)
        monkeypatch.setattr(payload_files, "SEGMENT_BYTES", 1024)
    _, recs = members_log(60, 3)
    clock = [0.0]
    store = SqliteHostStore(tmp_path / "h.sqlite3", "H1", sync="off", retention_age=100.0,
                            retention_bytes=2000, clock=lambda: clock[0])
    for i in range(0, 60, 10):
        clock[0] = float(i)
        _commit(store, recs[i:i + 10], live_low=max(1, i - 5), now=0.0)
    lsns = sorted(r.lsn for r in _all(store))
    assert lsns == list(range(lsns[0], recs[59].lsn + 1))  # contiguous, the newest kept
    assert sum(len(r.body) + 30 for r in _all(store)) < 3000 and store.evicted > 0
    clock[0] = 500.0  # everything older than 100 s, but the live part stays
    _commit(store, recs[60:], live_low=recs[59].lsn - 2, now=0.0)
    assert min(r.lsn for r in _all(store)) == recs[59].lsn - 2
    if beside:  # every segment left holds a record still kept, but the one being written
        kept = {json.loads(ref)[0] for (ref,) in store._db.execute("SELECT ref FROM records")}
        on_disk = {int(p.stem) for p in tmp_path.glob("h.sqlite3-payloads/*.seg")}
        assert on_disk - kept <= {max(on_disk)} and len(on_disk) < 10
    store.close()
    again = SqliteHostStore(tmp_path / "h.sqlite3", "H1")  # ages and counts survive
    assert again.history_floor() == recs[59].lsn - 2  # (gseq = lsn here)
    again.close()


def _all(store: SqliteHostStore) -> list[m.Record]:
    return store.history_read(history.Query(1, 10**9, frozenset(GROUPS), False, 10**6))


def test_a_store_of_an_older_format_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value);"
                     "CREATE TABLE records (lsn INTEGER PRIMARY KEY, data BLOB NOT NULL);")
    db.close()
    with pytest.raises(SavedStateError, match="earlier format"):
        SqliteHostStore(path, "H1")


# ------------------------------------------------------------------ members read it
def test_a_member_reads_its_groups_history_newest_first_within_its_bound() -> None:
    cfg = InfraConfig(history_bytes=600, fetch_limit=8, max_datagram=300)
    net = Net(seed=41, loss=0.2, cfg=cfg)
    net.add_member("A", "H1", groups=("r", "g"))
    net.add_member("B", "H2", groups=("g",))
    net.run_until(2.0)
    for i in range(60):
        net.send("A", f"r{i}".encode().ljust(40, b"."), "r")
        net.send("B", f"g{i}".encode().ljust(40, b"."), "g")
        net.run_until(net.now + 0.02)
    drain(net)
    net.add_member("C", "H3", groups=("r",))
    assert net.run_while(lambda: not net.members["C"].groups, net.now + 5)
    (joined,) = net.logs["C"].groups
    net.request_history("C", "r", joined.gseq)
    assert net.run_while(lambda: not net.logs["C"].histories, net.now + 5)
    (h,) = net.logs["C"].histories
    bodies = [d.body for d in h.messages]
    assert bodies == [f"r{i}".encode().ljust(40, b".") for i in range(60 - len(bodies), 60)]
    assert 600 <= sum(record_size_of(d) for d in h.messages) < 600 + 80  # the bound
    assert h.gone == 0 and h.members == ("A", "C")
    assert net.members["C"].stats.history_requests > 1  # several answers, some lost


def record_size_of(d: object) -> int:
    return 28 + len(d.sender) + len(d.body) + len(d.group)


def test_what_retention_dropped_is_told_and_the_master_serves_what_a_gateway_lacks() -> None:
    """Memory-only hosts keep 2 KB of history each; the new member's gateway restarted
    (its history is gone), so it asks the master, whose log reaches back to its floor;
    the group's messages before that floor are counted as gone."""
    cfg = InfraConfig(memory_history_bytes=2000)
    net = Net(seed=42, cfg=cfg, durable_hosts=False)
    net.add_member("A", "H1", groups=("r",))
    net.run_until(2.0)
    for i in range(80):
        net.send("A", f"r{i}".encode().ljust(30, b"."), "r")
        net.run_until(net.now + 0.02)
    drain(net)
    master = net.coordinator()
    other = next(h for h in net.host_ids if h != master)
    net.crash(other)
    net.restart(other)
    net.run_until(net.now + 3.0)
    net.add_member("C", other, groups=("r",))
    assert net.run_while(lambda: not net.members["C"].groups, net.now + 5)
    (joined,) = net.logs["C"].groups
    net.request_history("C", "r", joined.gseq)
    assert net.run_while(lambda: not net.logs["C"].histories, net.now + 5)
    (h,) = net.logs["C"].histories
    assert net.hosts[other].gateway.stats.history_asked >= 1
    assert 20 < len(h.messages) < 80 and h.gone == 80 - len(h.messages)
    assert h.messages[0].gpos == h.gone + 1 and h.messages[-1].body.startswith(b"r79")
