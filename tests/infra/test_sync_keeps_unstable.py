"""A Sync that carries a snapshot carries the committed records the master still keeps
below it too (issue 34's nemesis, infra-nemesis-extensions seed 5).

The master keeps a committed record until it is stable (delivered by every member). A
host that lacks records the master freed gets the master's tables (a snapshot at the
commit point) instead; before, it got nothing below the snapshot, so the records the
master still kept for slow members were not on that host. When that host later won an
election (a 4.1 gateway that had freed its tables, then subscribed again, is a likely
winner: it has no load), its log started at the snapshot: the multicasts below were
not in its norm-buffer, hence stable at once, and freed everywhere, though members
asleep or switched off had not delivered them. They were lost to those members."""

from __future__ import annotations

import tomllib
from pathlib import Path

from trace_check import verify

from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.coordinator import Coordinator
from m2mc.infra.host_durable import HostSaver
from m2mc.infra.host_persist import MemoryHostStore
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState
from m2mc.sim import run_scenario

E = Epoch(1, 0.0, "H1")
A = MemberId("A", 1)  # slow: has delivered up to gseq 4
B = MemberId("B", 2)  # has delivered everything
SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def master(**cfg: object) -> Coordinator:
    """A master holding gseq 1..10 (two joins, eight multicasts of A), all committed."""
    log = ReplicaLog()
    c = Coordinator("H1", E, InfraConfig(**cfg).check(), log, CoordState(), 0.0)  # type: ignore[arg-type]
    c.handle_forward(m.Forward("H2", 1, m.JoinReq("A", "H2", 1, A)), 0.0)
    c.handle_forward(m.Forward("H2", 2, m.JoinReq("B", "H2", 1, B)), 0.0)
    items = tuple(m.NewItem(n, n, f"a{n}".encode()) for n in range(1, 9))
    c.handle_forward(m.Forward("H2", 3, m.NewReq("A", "H2", 1, A, items)), 0.0)
    log.commit_to(log.high, 0.0)
    c.drain()
    return c


def sync_to_empty_host(c: Coordinator) -> m.Sync:
    c.handle_subscribe("H2", 0, 0.0)  # a host with nothing (a 4.1 gateway that freed all)
    c.flush(["H1", "H2"], 2, 1.0)
    syncs = [x for dest, x in c.drain() if dest == "H2" and isinstance(x, m.Sync)]
    assert len(syncs) == 1
    return syncs[0]


def test_a_snapshot_sync_carries_the_records_kept_for_slow_members() -> None:
    c = master()
    c.handle_stabinfo(((A, 4), (B, 10)))
    assert c.stable_watermark() == 4
    c.log.gc(c.stable_watermark())  # what the master's host does: 1..4 are freed
    assert (c.log.low, c.log.applied) == (5, 10)
    sync = sync_to_empty_host(c)
    assert sync.snapshot is not None and sync.snapshot.lsn == 10
    assert [r.lsn for r in sync.records] == [5, 6, 7, 8, 9, 10]
    store = MemoryHostStore()
    host = ReplicaLog()
    saver = HostSaver(host)
    assert host.replace_after(sync.base, sync.snapshot, sync.records, 1.0)
    assert (host.low, host.applied, host.high) == (5, 10, 10)
    assert [host.by_gseq(g) for g in range(5, 11)] == [c.log.by_gseq(g) for g in range(5, 11)]
    save = saver.take()
    assert save is not None
    store.commit(save.record)
    again = ReplicaLog()
    HostSaver(again).restore(store.load(), 2.0)  # ... and keeps them across a restart
    assert (again.low, again.applied, again.high) == (5, 10, 10)
    assert again.state.rows[A].recv == 8


def test_at_most_a_batch_the_newest_below_the_snapshot() -> None:
    c = master(batch_records=1)  # a Sync carries at most 4 records
    c.handle_stabinfo(((A, 2), (B, 10)))
    c.log.gc(c.stable_watermark())  # 1..2 freed, 3..10 kept
    sync = sync_to_empty_host(c)
    assert [r.lsn for r in sync.records] == [7, 8, 9, 10]
    host = ReplicaLog()
    assert host.replace_after(sync.base, sync.snapshot, sync.records, 1.0)
    assert (host.low, host.applied, host.high) == (7, 10, 10)


def test_records_after_the_snapshot_still_follow_it() -> None:
    c = master()
    c.handle_stabinfo(((A, 6), (B, 10)))
    c.log.gc(c.stable_watermark())  # 1..6 freed
    items = tuple(m.NewItem(n, n, f"a{n}".encode()) for n in range(9, 12))
    c.handle_forward(m.Forward("H2", 4, m.NewReq("A", "H2", 1, A, items)), 0.0)  # 11..13
    c.drain()
    sync = sync_to_empty_host(c)
    assert sync.snapshot is not None and sync.snapshot.lsn == 10
    host = ReplicaLog()
    assert host.replace_after(sync.base, sync.snapshot, sync.records, 1.0)
    assert (host.low, host.applied, host.high) == (7, 10, 13)  # uncommitted 11..13 held


def test_the_smallest_timeline_that_lost_them(tmp_path: Path) -> None:
    """bench/nemesis_minimize.py's shrink of seed 5: four faults, no member ever off.
    h2 is down 47.8-50.0 s and, restarted, frees its tables (4.1: not subscribed yet,
    and no replica) and subscribes again (a snapshot Sync); h2 and h3 are cut off the
    backbone 49.65-53.9 s while h3, the master, commits on with h2; h3 dies at 52.7 s;
    h2 wins with h1, whose log ends below h2's snapshot. Before the fix 920 deliveries
    were lost."""
    raw = tomllib.loads((SCENARIOS / "infra-nemesis-extensions.toml").read_text())
    del raw["chaos"]
    raw["faults"] = {
        "crash": [{"node": "h1", "at": 39.706, "restart": 44.348},
                  {"node": "h2", "at": 47.795, "restart": 50.036},
                  {"node": "h3", "at": 52.669, "restart": 54.327}],
        "partition": [{"sides": [["h2", "h3"]], "at": 49.652, "until": 53.875,
                       "domains": ["backbone"]}]}
    run_scenario(raw, 5, tmp_path)
    v = verify(tmp_path / "trace")
    assert v.ok, v.problems[:10]
    assert v.deliveries == v.members * v.sent


def test_infra_nemesis_extensions_seed_5(tmp_path: Path) -> None:
    """The run that found it: subscribe (4.1), a rolling restart, a backbone partition
    and sleeping members; m00, m01, m03, m07 and m08 lost 2,084 deliveries."""
    run_scenario(SCENARIOS / "infra-nemesis-extensions.toml", 5, tmp_path)
    v = verify(tmp_path / "trace")
    assert v.ok, v.problems[:10]
    assert v.deliveries == v.members * v.sent


def synced_from(c: Coordinator, applied: int) -> m.Sync:
    c.handle_subscribe("H2", applied, 0.0)  # (a host whose status said ``applied``)
    c.flush(["H1", "H2"], 2, 1.0)
    syncs = [x for dest, x in c.drain() if dest == "H2" and isinstance(x, m.Sync)]
    assert len(syncs) == 1
    return syncs[0]


def test_a_restarted_host_gets_the_freed_records_from_the_history_not_a_snapshot() -> None:
    """infra-nemesis-sleepers seeds 8 and 11: a snapshot cut the restarted host's history
    short, and as the master it then told returning members that records the others
    kept were dropped. A durable master's store keeps every record by position: the
    host gets the ones it lacks from there, in an ordinary Sync, and its history stays
    whole."""
    c = master()
    store = MemoryHostStore()
    store.records = {r.lsn: r for r in c.log.range(1, 10)}  # what the master's store wrote
    c.log.history = store
    c.handle_stabinfo(((A, 10), (B, 10)))
    c.log.gc(c.stable_watermark())  # 1..10 stable and freed from the live log
    assert (c.log.low, c.log.high) == (11, 10)
    sync = synced_from(c, 4)  # a host that went down at 4
    assert sync.snapshot is None and sync.base == 4
    assert [r.lsn for r in sync.records] == [5, 6, 7, 8, 9, 10]
    host = ReplicaLog()
    assert host.append(c.log.range_with_history(1, 4) or ())
    host.commit_to(4, 0.0)
    assert host.replace_after(sync.base, sync.snapshot, sync.records, 1.0)
    assert [r.lsn for r in host.commit_to(c.log.applied, 1.0)] == [5, 6, 7, 8, 9, 10]
    assert host.state.rows[A].recv == 8


def test_a_snapshot_still_when_the_history_does_not_hold_them() -> None:
    c = master()
    store = MemoryHostStore()
    store.records = {r.lsn: r for r in c.log.range(1, 10) if r.lsn != 6}  # 6 dropped
    c.log.history = store
    c.handle_stabinfo(((A, 10), (B, 10)))
    c.log.gc(c.stable_watermark())
    assert synced_from(c, 4).snapshot is not None
    c.log.history = store = MemoryHostStore()
    store.records = {r.lsn: r for r in c.log.range_with_history(1, 5) or ()}
    assert synced_from(c, 0).snapshot is not None  # an empty host: the tables, as before


def test_a_host_without_a_store_still_gets_a_snapshot() -> None:
    c = master()  # its history is in memory (multicasts by gseq only, no positions)
    c.handle_stabinfo(((A, 10), (B, 10)))
    c.log.gc(c.stable_watermark())
    assert c.log.range_with_history(5, 10) is None
    assert synced_from(c, 4).snapshot is not None


def test_a_takeover_answer_takes_the_freed_records_from_the_history_too() -> None:
    """infra-nemesis-sleepers seed 113: after a power cut h2 came back at applied 320,
    won with h3, whose log had freed 321-369; h3's answer carried a snapshot, h2's
    history started over at gseq 363 and, as the master, it told m04 (expelled while
    off) that 167 messages were dropped, two of them its own, which it sent again."""
    from m2mc.infra.takeover import state_reply

    c = master()
    store = MemoryHostStore()
    store.records = {r.lsn: r for r in c.log.range(1, 10)}
    c.log.history = store
    c.handle_stabinfo(((A, 10), (B, 10)))
    c.log.gc(c.stable_watermark())
    reply = state_reply("H3", E, c.log, 4)  # a winner whose log ends at 4
    assert reply.snapshot is None and [r.lsn for r in reply.records] == [5, 6, 7, 8, 9, 10]
    assert state_reply("H3", E, c.log, 0).snapshot is not None  # a winner with nothing
    del store.records[7]
    assert state_reply("H3", E, c.log, 4).snapshot is not None  # the history lacks one


def test_no_snapshot_for_a_host_before_its_applied_point_is_known() -> None:
    """infra-nemesis-sleepers seed 158: h2, master, crashed for 0.8 s; the new master
    heard of it alive again before any status, took its applied point for 0 and sent it
    a snapshot, and h2's history started over (floor gseq 541): as the master from 44 s
    it told m04 that records the others kept were dropped. Now the Sync waits for the
    host's status (unless the log still holds everything, from lsn 1)."""
    c = master()
    c.handle_stabinfo(((A, 4), (B, 10)))
    c.log.gc(c.stable_watermark())
    c.flush(["H1", "H2"], 2, 1.0)
    assert not [x for _, x in c.drain() if isinstance(x, m.Sync)]  # H2 unknown: wait
    c.note_status(m.Status("H2", 1, "127.0.0.1", 7101, "H2", "H2", 0, (), "H1", E, E, 0, 0),
                  1.0)
    c.flush(["H1", "H2"], 2, 2.0)
    assert [x.snapshot is not None for _, x in c.drain() if isinstance(x, m.Sync)] == [True]
