"""The SQLite message log behaves exactly like the in-memory one (the model), across
commits and reopenings, and converts files of the earlier row-per-message layout."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import MemoryStore
from m2mc.store import sqlite as sqlite_store
from m2mc.store.sqlite import CHUNK_SPAN, SqliteStore

GIDS = st.sampled_from(["g/1", "g/2"])
PIDS = st.sampled_from(["a", "b", "c"])
SEQS = st.one_of(st.integers(1, 40), st.integers(1, 3 * CHUNK_SPAN))


def message(pid: str, seq: int, payload: bytes, causal: bool) -> Message:
    parent = ROOT if seq == 1 else MessageId(pid, seq - 1)
    return Message(MessageId(pid, seq), parent, payload, {pid: seq} if causal else None, None)


class StoreMatchesModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.db = SqliteStore(self.dir / "log.db")
        self.model = MemoryStore()
        self.known: list[tuple[str, MessageId]] = []
        self.next_gseq: dict[str, int] = {}

    @rule(gid=GIDS, pid=PIDS, seq=SEQS, payload=st.binary(max_size=20), delivered=st.booleans(),
          causal=st.booleans())
    def put(self, gid: str, pid: str, seq: int, payload: bytes, delivered: bool,
            causal: bool) -> None:
        m = message(pid, seq, payload, causal)
        self.db.put(gid, m, delivered)
        self.model.put(gid, m, delivered)
        self.known.append((gid, m.mid))

    @rule(gid=GIDS, senders=st.lists(st.tuples(PIDS, SEQS, st.binary(max_size=20),
                                               st.booleans()), max_size=6))
    def put_delivered(self, gid: str, senders: list[tuple[str, int, bytes, bool]]) -> None:
        """A receiver's batch, stored in one call (one or several senders)."""
        batch = [message(pid, seq, payload, causal) for pid, seq, payload, causal in senders]
        self.db.put_delivered(gid, batch)
        for m in batch:
            self.model.put(gid, m, True)
            self.known.append((gid, m.mid))

    @precondition(lambda self: self.known)
    @rule(i=st.integers(0, 10_000))
    def mark_delivered(self, i: int) -> None:
        gid, mid = self.known[i % len(self.known)]
        self.db.mark_delivered(gid, mid)
        self.model.mark_delivered(gid, mid)

    @precondition(lambda self: self.known)
    @rule(i=st.integers(0, 10_000))
    def stamp(self, i: int) -> None:
        gid, mid = self.known[i % len(self.known)]
        if self.model.get(gid, mid) is None or self.model.get(gid, mid).gseq is not None:
            return  # total order stamps a message once
        gseq = self.next_gseq[gid] = self.next_gseq.get(gid, 0) + 1
        self.db.set_gseq(gid, mid, gseq)
        self.model.set_gseq(gid, mid, gseq)

    @rule()
    def commit(self) -> None:
        self.db.commit()

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = SqliteStore(self.dir / "log.db")

    @rule(gid=GIDS, pid=PIDS, lo=st.integers(1, 3 * CHUNK_SPAN), span=st.integers(0, 600),
          limit=st.integers(1, 50))
    def seq_range(self, gid: str, pid: str, lo: int, span: int, limit: int) -> None:
        assert (self.db.seq_range(gid, pid, lo, lo + span, limit)
                == self.model.seq_range(gid, pid, lo, lo + span, limit))

    @rule(gid=GIDS, lo=st.integers(1, 30), span=st.integers(0, 30), limit=st.integers(1, 10))
    def gseq_range(self, gid: str, lo: int, span: int, limit: int) -> None:
        assert (self.db.gseq_range(gid, lo, lo + span, limit)
                == self.model.gseq_range(gid, lo, lo + span, limit))

    @invariant()
    def same_log(self) -> None:
        for gid in ("g/1", "g/2"):
            assert self.db.load_messages(gid) == self.model.load_messages(gid)
            for pid in ("a", "b", "c"):
                assert self.db.high_water(gid, pid) == self.model.high_water(gid, pid)

    def teardown(self) -> None:
        self.db.close()


TestStoreMatchesModel = StoreMatchesModel.TestCase
TestStoreMatchesModel.settings = settings(max_examples=40, stateful_step_count=40,
                                          deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])


class PayloadFilesMatchModel(StoreMatchesModel):
    """The same with payloads of 10 bytes or more kept in payload files beside the log
    (m2mc.store.payload_files): some of each kind, in the same chunks."""

    def __init__(self) -> None:
        super().__init__()
        self.db.close()
        self.db = SqliteStore(self.dir / "log.db", large_payload=10)

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = SqliteStore(self.dir / "log.db", large_payload=10)


TestPayloadFilesMatchModel = PayloadFilesMatchModel.TestCase
TestPayloadFilesMatchModel.settings = TestStoreMatchesModel.settings


def test_a_file_of_the_row_per_message_layout_is_converted(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE messages (
            gid TEXT NOT NULL, pid TEXT NOT NULL, seq INTEGER NOT NULL,
            ppid TEXT NOT NULL, pseq INTEGER NOT NULL, payload BLOB NOT NULL,
            gseq INTEGER, vclock BLOB, delivered INTEGER NOT NULL,
            PRIMARY KEY (gid, pid, seq));""")
    db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        ("g/1", "b", 1, "", 0, b"first", None, None, 1),
        ("g/1", "a", 1, "b", 1, b"reply", 7, msgpack.packb({"a": 1, "b": 1}), 0),
    ])
    db.commit()
    db.close()
    store = SqliteStore(path)
    assert [(s.message.mid, s.message.parent, s.message.payload, s.message.gseq,
             s.message.vclock, s.delivered) for s in store.load_messages("g/1")] == [
        (MessageId("b", 1), ROOT, b"first", None, None, True),
        (MessageId("a", 1), MessageId("b", 1), b"reply", 7, {"a": 1, "b": 1}, False)]
    assert [m.mid for m in store.gseq_range("g/1", 1, 10, 10)] == [MessageId("a", 1)]
    store.put("g/1", message("b", 2, b"new", False), True)
    store.close()
    again = SqliteStore(path)
    assert [s.message.payload for s in again.load_messages("g/1")] == [b"first", b"reply", b"new"]
    again.close()


def test_a_file_of_the_row_per_message_layout_without_positions_is_converted(
        tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE messages (
            gid TEXT NOT NULL, pid TEXT NOT NULL, seq INTEGER NOT NULL,
            ppid TEXT NOT NULL, pseq INTEGER NOT NULL, payload BLOB NOT NULL,
            gseq INTEGER, vclock BLOB, delivered INTEGER NOT NULL,
            PRIMARY KEY (gid, pid, seq));""")
    db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        ("g/1", "b", 1, "", 0, b"first", None, None, 1),
        ("g/1", "b", 2, "b", 1, b"second", None, None, 0)])
    db.commit()
    db.close()
    store = SqliteStore(path)
    assert [(s.message.payload, s.delivered) for s in store.load_messages("g/1")] == [
        (b"first", True), (b"second", False)]
    assert store.gseq_range("g/1", 1, 10, 10) == []
    store.close()


def test_a_long_history_is_read_back_in_ranges(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "log.db")
    for seq in range(1, 10_001):
        store.put("g", message("a", seq, b"x", False), True)
        if seq % 64 == 0:
            store.commit()
    store.close()
    store = SqliteStore(tmp_path / "log.db")
    assert [m.mid.seq for m in store.seq_range("g", "a", 4990, 10_000, 20)] == list(
        range(4990, 5010))
    assert len(store.seq_range("g", "a", 1, 10_000, 100_000)) == 10_000
    assert store.high_water("g", "a") == 10_000
    assert store.get("g", MessageId("a", 7777)) == message("a", 7777, b"x", False)
    store.close()


def test_write_numbers_go_on_rising_across_reopenings_and_kills(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The meta mark is moved only a block at a time: with blocks of two writes, a log
    written over many incarnations (some killed: never closed) still loads in the
    order it was written, and the mark stays at or above every write number."""
    monkeypatch.setattr(sqlite_store, "WRITE_NUMBER_BLOCK", 2)
    path = tmp_path / "log.db"
    order: list[MessageId] = []
    for life in range(6):
        store = SqliteStore(path)
        for i in range(1, 8):
            pid = "abc"[(life + i) % 3]
            m = message(pid, life * 10 + i, b"%d" % i, False)
            store.put("g", m, True)
            order.append(m.mid)
            if i % 3 == 0:
                store.commit()
        store.commit()
        if life % 2:
            store.close()
        # else: killed after its last commit (the connection is simply dropped)
    store = SqliteStore(path)
    assert [s.message.mid for s in store.load_messages("g")] == order
    numbers = [r[0] for (data,) in store._db.execute("SELECT data FROM chunks")
               for r in msgpack.unpackb(data)]
    assert int(store.get_meta("store/write_number") or 0) >= max(numbers)
    assert len(numbers) == len(set(numbers))
    store.close()


def test_a_message_written_again_in_a_chunk_of_lower_seqnos_reads_as_written_last(
        tmp_path: Path) -> None:
    """Found by the state machine: the second write of c:2 went into a chunk that
    begins at c:1, which a range read takes before the first write's chunk (that
    begins at c:2); the later write must still be the one read, as load_messages
    reads it."""
    store = SqliteStore(tmp_path / "log.db")
    store.put_delivered("g", [message("c", 2, b"first", False)])
    store.commit(1.0)
    store.put_delivered("g", [message("c", 1, b"", False), message("c", 2, b"second", False)])
    store.commit(2.0)
    assert [m.payload for m in store.seq_range("g", "c", 1, 2, 10)] == [b"", b"second"]
    assert store.get("g", MessageId("c", 2)) == message("c", 2, b"second", False)
    assert [s.message.payload for s in store.load_messages("g")] == [b"second", b""]
    store.close()
