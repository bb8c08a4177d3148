"""The durable log's notes (m2mc.store.notes): what total order learns about a message
after its record was written (its position, its delivery) is written in rows of many,
read back on top of the records, and a file of the earlier layout (a ``late`` row per
message) loads with what it noted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store.sqlite import SqliteStore

_LATE = """
CREATE TABLE late (
    gid TEXT NOT NULL, pid TEXT NOT NULL, seq INTEGER NOT NULL,
    delivered INTEGER, gseq INTEGER, PRIMARY KEY (gid, pid, seq)) WITHOUT ROWID;
CREATE INDEX late_by_gseq ON late (gid, gseq) WHERE gseq IS NOT NULL;
"""


def received(store: SqliteStore, pid: str, count: int) -> None:
    """``count`` messages of ``pid`` written as total order writes them on arrival."""
    for seq in range(1, count + 1):
        store.put("g", Message(MessageId(pid, seq), ROOT, b"m%d" % seq), False)
    store.commit()


def test_a_flush_of_stamps_and_deliveries_is_one_row_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteStore(path)
    received(store, "a", 300)
    for seq in range(1, 301):
        store.set_gseq("g", MessageId("a", seq), 1000 + seq)
        store.mark_delivered("g", MessageId("a", seq))
    store.commit()
    db = sqlite3.connect(path)
    rows = db.execute("SELECT lo, hi FROM notes").fetchall()
    db.close()
    assert rows == [(1, 256), (257, 300)]  # (a row covers 256 seqnos at most)
    store.close()
    store = SqliteStore(path)
    loaded = store.load_messages("g")
    assert [(s.message.mid.seq, s.message.gseq, s.delivered) for s in loaded] == [
        (seq, 1000 + seq, True) for seq in range(1, 301)]
    assert [m.mid.seq for m in store.gseq_range("g", 1100, 1299, 5)] == [100, 101, 102, 103, 104]
    store.close()


def test_a_message_written_again_drops_what_was_noted_of_the_one_before(
        tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    received(store, "a", 3)
    store.set_gseq("g", MessageId("a", 2), 7)
    store.mark_delivered("g", MessageId("a", 2))
    store.commit()
    store.put("g", Message(MessageId("a", 2), ROOT, b"again"), False)
    store.commit()
    again = store.get("g", MessageId("a", 2))
    assert again is not None and again.payload == b"again" and again.gseq is None
    assert store.gseq_range("g", 1, 10, 10) == []
    assert [s.delivered for s in store.load_messages("g")] == [False, False, False]
    store.close()


def test_a_file_of_the_late_row_layout_loads_with_its_notes(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteStore(path)
    received(store, "a", 4)
    store.close()
    db = sqlite3.connect(path)  # what an earlier version wrote: a late row per message
    db.executescript("DROP TABLE notes;" + _LATE)
    db.executemany("INSERT INTO late VALUES ('g', 'a', ?, ?, ?)",
                   [(1, 1, 11), (2, None, 12), (3, 1, None)])
    db.commit()
    db.close()
    store = SqliteStore(path)
    loaded = store.load_messages("g")
    assert [(s.message.gseq, s.delivered) for s in loaded] == [
        (11, True), (12, False), (None, True), (None, False)]
    assert [m.mid.seq for m in store.gseq_range("g", 1, 20, 10)] == [1, 2]
    store.set_gseq("g", MessageId("a", 4), 14)  # and takes new notes
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 'late'").fetchall() == []
    db.close()
    store = SqliteStore(path)
    assert [m.mid.seq for m in store.gseq_range("g", 1, 20, 10)] == [1, 2, 4]
    store.close()


def test_a_position_the_message_left_is_passed_over(tmp_path: Path) -> None:
    """Hypothesis' model of the store found this (CI): a message written, numbered 1,
    written again (its first note no longer applies) and numbered 2. The note naming
    position 1 must not take the place of the message at 2, nor make 1 look held."""
    store = SqliteStore(tmp_path / "s.sqlite3")
    m = Message(MessageId("a", 1), ROOT, b"")
    store.put("g", m, False)
    store.set_gseq("g", m.mid, 1)
    store.put("g", m, False)
    store.set_gseq("g", m.mid, 2)
    store.commit()
    assert [(x.mid, x.gseq) for x in store.gseq_range("g", 1, 2, 1)] == [(m.mid, 2)]
    assert store.gseq_range("g", 1, 1, 5) == []
    assert [g for g, _ in store.held_positions("g", 1, 2, 10)] == [2]
    store.close()
