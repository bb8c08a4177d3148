"""Retention of the group log in both stores (docs/group.md section 8): eviction by
age, by bytes, the ``ids`` mode, what a log answers for what it evicted, and what
survives a reopening."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from m2mc.errors import ConfigError
from m2mc.group.config import GroupConfig
from m2mc.group.manager import GroupNode
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import GroupStore, MemoryStore, RetentionPolicy
from m2mc.store.payload_files import LARGE_PAYLOAD
from m2mc.store.retention import stored_size
from m2mc.store.sqlite import SqliteStore

G = "g"
Opener = Callable[[RetentionPolicy], GroupStore]


def msg(pid: str, seq: int, payload: bytes = b"x" * 100, gseq: int | None = None,
        parent: MessageId = ROOT) -> Message:
    vclock = {pid: seq}
    return Message(MessageId(pid, seq), parent, payload, vclock, gseq)


@pytest.fixture(params=["memory", "sqlite", "sqlite-payload-files"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    opened: list[GroupStore] = []

    def open_store(policy: RetentionPolicy) -> GroupStore:
        store: GroupStore
        if request.param == "memory":
            store = MemoryStore(policy)
        else:  # (with every payload beside the log, in payload files)
            large = 1 if request.param == "sqlite-payload-files" else LARGE_PAYLOAD
            store = SqliteStore(tmp_path / "log.db", large_payload=large)
            store.set_retention(policy)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def seqs(store: GroupStore, pid: str = "a") -> list[int]:
    return [m.mid.seq for m in store.seq_range(G, pid, 1, 10_000, 10_000)]


def test_age_evicts_the_oldest_delivered_messages_first(opener: Opener) -> None:
    store = opener(RetentionPolicy(age=10.0))
    for t in range(30):  # one message a second; a write is dated by the last commit
        store.commit(float(t))
        store.put(G, msg("a", t + 1), True)
    store.commit(30.0)
    # Stored at t = seq - 1: what is more than 10 s old at t = 30 is gone (a pass runs
    # every age / 8 at most, so nothing younger than 10 s went).
    assert seqs(store) == list(range(21, 31))
    assert store.gone(G).ids == {"a": [(1, 20)]}
    assert [s.message.mid.seq for s in store.load_messages(G)] == list(range(21, 31))
    assert store.high_water(G, "a") == 30


def test_bytes_evicts_the_oldest_down_to_seven_eighths_of_the_bound(opener: Opener) -> None:
    size = stored_size(msg("a", 1))
    bound = 40 * size
    store = opener(RetentionPolicy(max_bytes=bound))
    for seq in range(1, 201):
        store.put(G, msg("a", seq), True)
        if seq % 4 == 0:
            store.commit(float(seq))
        assert store.log_bytes(G) <= bound + 4 * size + 512  # a commit's rows at most over
    store.commit(1000.0)
    kept = seqs(store)
    assert kept == list(range(kept[0], 201))  # a suffix: the oldest went first
    assert store.log_bytes(G) <= bound and len(kept) >= 30
    assert store.gone(G).ids == {"a": [(1, kept[0] - 1)]}


def test_a_held_message_stays_past_every_bound_until_delivered(opener: Opener) -> None:
    store = opener(RetentionPolicy(age=5.0, max_bytes=10 * stored_size(msg("a", 1))))
    store.put(G, msg("a", 1), False)  # held: its parent (or its turn) has not come
    for seq in range(2, 60):
        store.put(G, msg("b", seq), True)
        store.commit(float(seq))
    assert store.get(G, MessageId("a", 1)) is not None
    assert "a" not in store.gone(G).ids
    store.mark_delivered(G, MessageId("a", 1))
    for seq in range(60, 80):
        store.put(G, msg("b", seq), True)
        store.commit(float(seq))
    assert store.get(G, MessageId("a", 1)) is None
    assert store.gone(G).ids["a"] == [(1, 1)]


def test_ids_mode_keeps_identities_parents_positions_and_clocks(opener: Opener) -> None:
    store = opener(RetentionPolicy(age=5.0, mode="ids", max_ids=8))
    for seq in range(1, 21):
        parent = ROOT if seq == 1 else MessageId("a", seq - 1)
        store.commit(float(seq))
        store.put(G, msg("a", seq, gseq=seq, parent=parent), True)
    store.commit(40.0)
    assert seqs(store) == []  # no payload is served any more
    stubs = store.load_stubs(G)
    assert [m.mid.seq for m in stubs] == list(range(13, 21))  # max_ids: the newest 8
    assert all(m.payload == b"" for m in stubs)
    assert stubs[0].parent == MessageId("a", 12) and stubs[0].gseq == 13
    assert stubs[0].vclock == {"a": 13}
    gone = store.gone(G)
    assert gone.ids == {"a": [(1, 12)]}  # the stubs past max_ids: dropped whole
    assert gone.gseq_floor == 20
    assert store.high_water(G, "a") == 20
    answer = store.gone_answer(G, {"a": [(10, 15)]}, [], 100)
    assert answer.ids == {"a": [(10, 15)]}
    assert [m.mid.seq for m in answer.stubs] == [13, 14, 15]


def test_gone_answer_names_what_was_evicted_not_what_is_held(opener: Opener) -> None:
    store = opener(RetentionPolicy(age=5.0))
    for seq in range(1, 11):
        store.commit(float(seq))
        store.put(G, msg("a", seq, gseq=2 * seq), True)  # odd positions: other things
    store.commit(11.0)  # evicts those stored before t = 6: seqs 1..5, positions 2..10
    assert seqs(store) == [6, 7, 8, 9, 10]
    answer = store.gone_answer(G, {"a": [(1, 8)], "z": [(1, 3)]}, [(1, 30)], 100)
    assert answer.ids == {"a": [(1, 5)]}  # 6..8 held (repair serves them); z: never had
    # Positions: up to the highest evicted (10), less those held (none below it).
    assert answer.gseqs == [(1, 10)]
    assert not store.gone_answer(G, {"a": [(6, 10)]}, [(12, 20)], 100)


def test_skipped_messages_are_remembered_gone(opener: Opener) -> None:
    store = opener(RetentionPolicy())
    store.note_skipped(G, {"a": [(1, 9)], "b": [(4, 4)]}, 17, [])
    assert store.gone(G).ids == {"a": [(1, 9)], "b": [(4, 4)]}
    assert store.gone(G).gseq_floor == 17
    assert store.high_water(G, "a") == 9  # a restarted "a" would never reuse 1..9


def test_sqlite_keeps_gone_stubs_and_ages_across_reopening(tmp_path: Path) -> None:
    clock = [100.0]
    path = tmp_path / "log.db"
    store = SqliteStore(path, clock=lambda: clock[0])
    store.set_retention(RetentionPolicy(age=10.0, mode="ids"))
    for seq in range(1, 6):
        store.put(G, msg("a", seq), True)
        store.commit()
        clock[0] += 1.0
    store.put(G, msg("b", 1), True)
    store.commit()
    store.close()
    clock[0] = 111.5  # a reboot later: the wall clock, not the process's, dates rows
    store = SqliteStore(path, clock=lambda: clock[0])
    store.set_retention(RetentionPolicy(age=10.0, mode="ids"))
    store.commit()
    assert seqs(store) == [3, 4, 5]  # stored at 100, 101 are older than 10 s
    assert [m.mid for m in store.load_stubs(G)] == [MessageId("a", 1), MessageId("a", 2)]
    store.close()
    store = SqliteStore(path)  # and without any retention, nothing more goes
    assert seqs(store) == [3, 4, 5] and len(store.load_stubs(G)) == 2
    store.close()


def test_sqlite_rows_of_an_earlier_version_count_from_the_opening(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    store = SqliteStore(path)
    store.put(G, msg("a", 1), True)
    store.close()
    db = sqlite3.connect(path)  # as written by a version without row times
    db.execute("UPDATE chunks SET t = NULL")
    db.commit()
    db.close()
    store = SqliteStore(path)
    store.set_retention(RetentionPolicy(age=10.0))
    store.commit(1000.0)  # the first time the store learns: the row counts from here
    assert seqs(store) == [1]
    store.commit(1011.0)
    assert seqs(store) == []
    store.close()


def test_a_node_without_a_data_dir_has_a_bounded_log() -> None:
    import random

    node = GroupNode("a", rng=random.Random(1))
    assert isinstance(node.store, MemoryStore)
    assert node.store.retention.bytes_bound(in_memory=True) == 32 << 20
    small = GroupNode("b", rng=random.Random(1), config=GroupConfig(memory_log_bytes=4096,
                                                                  retention_bytes=1 << 30))
    assert small.store.retention.bytes_bound(in_memory=True) == 4096


def test_bad_retention_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="retention_mode"):
        GroupConfig.from_mapping({"retention_mode": "payloads"})
    with pytest.raises(ConfigError, match="must be a string"):
        GroupConfig.from_mapping({"retention_mode": 1})
    with pytest.raises(ConfigError, match="retention_age"):
        GroupConfig.from_mapping({"retention_age": -1.0})
    with pytest.raises(ConfigError, match="memory_log_bytes"):
        GroupConfig.from_mapping({"memory_log_bytes": 0})
    config = GroupConfig.from_mapping({"retention_age": 3600, "retention_bytes": 1 << 20,
                                       "retention_mode": "ids", "retention_ids": 10})
    assert config.retention() == RetentionPolicy(age=3600.0, max_bytes=1 << 20, mode="ids",
                                                 max_ids=10)


def test_a_log_in_memory_keeps_no_more_stubs_than_fit_its_memory_bound() -> None:
    store = MemoryStore(RetentionPolicy(mode="ids", max_bytes=1, memory_bytes=256 * 10))
    for seq in range(1, 31):
        store.put(G, msg("a", seq), True)  # each evicted at once: a stub
    assert [m.mid.seq for m in store.load_stubs(G)] == list(range(21, 31))
    assert store.gone(G).ids == {"a": [(1, 20)]}


def test_by_default_a_log_keeps_thirty_days_and_256_mib_per_group(opener: Opener) -> None:
    # A chat on a laptop: the default bounds a durable log (docs/decisions.md, "The
    # ad hoc log has a default retention"); a day of it stays, a month later it goes.
    policy = GroupConfig().retention()
    assert (policy.age, policy.max_bytes) == (30 * 86_400.0, 256 << 20)
    store = opener(policy)
    day = 86_400.0
    for i in range(3):  # one message a day for three days
        store.commit(i * day)
        store.put(G, msg("a", i + 1), True)
    store.commit(3 * day)
    assert seqs(store) == [1, 2, 3]
    store.commit(31.5 * day)  # past the next check (every 43 minutes at 30 days)
    store.commit(31.6 * day)
    assert seqs(store) == [3]
