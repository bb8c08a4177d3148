"""Large payloads of the SQLite log are kept once in payload files beside it
(m2mc.store.payload_files): read back whole, never half, across reopenings; space
given back as retention evicts; older files upgraded."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import msgpack
import pytest

from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import RetentionPolicy
from m2mc.store import payload_files as payload_files_module
from m2mc.store.payload_files import LARGE_PAYLOAD, PayloadFiles
from m2mc.store.sqlite import SqliteStore

G = "g"
BIG = 64 * 1024


def msg(pid: str, seq: int, size: int = BIG, parent: MessageId = ROOT) -> Message:
    payload = bytes([seq % 251]) * size
    return Message(MessageId(pid, seq), parent, payload, None, None)


def directory(path: Path) -> Path:
    return path.with_name(path.name + "-payloads")


def segment_files(path: Path) -> list[str]:
    return sorted(p.name for p in directory(path).iterdir())


def test_a_large_payload_is_written_once_beside_the_log(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = SqliteStore(path)
    store.put_delivered(G, [msg("a", 1), msg("a", 2, size=100), msg("a", 3)])
    store.commit()
    # The rows hold the small payload and two references, not 128 KiB.
    (size,) = store._db.execute("SELECT SUM(LENGTH(data)) FROM chunks").fetchone()
    assert size < 400
    assert store._db.execute("SELECT ext, seg FROM chunks").fetchall() == [(2 * BIG, 1)]
    assert segment_files(path) == ["00000001.seg"]
    assert (directory(path) / "00000001.seg").stat().st_size == 2 * BIG
    assert store.get(G, MessageId("a", 3)) == msg("a", 3)
    assert store.log_bytes(G) == size + 2 * BIG  # the retention bound counts them
    store.close()
    again = SqliteStore(path)
    assert [s.message for s in again.load_messages(G)] == [
        msg("a", 1), msg("a", 2, size=100), msg("a", 3)]
    assert again.seq_range(G, "a", 1, 3, 10) == [msg("a", 1), msg("a", 2, size=100), msg("a", 3)]
    again.close()


def test_a_log_of_small_messages_makes_no_payload_directory(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "log.db")
    store.put_delivered(G, [msg("a", s, size=LARGE_PAYLOAD - 1) for s in range(1, 4)])
    store.commit()
    store.close()
    assert not directory(tmp_path / "log.db").exists()


@pytest.mark.parametrize("damage", ["truncated", "flipped", "deleted"])
def test_a_payload_that_cannot_be_read_back_is_a_message_not_stored(
        tmp_path: Path, damage: str) -> None:
    """As after an operating-system crash that kept a row but not its payload: the
    message is one the log does not have (never wrong bytes), and its seqno is still
    known used."""
    path = tmp_path / "log.db"
    store = SqliteStore(path)
    store.put_delivered(G, [msg("a", 1), msg("a", 2, size=100)])
    store.close()
    segment = directory(path) / "00000001.seg"
    if damage == "truncated":
        segment.write_bytes(segment.read_bytes()[:BIG - 1])
    elif damage == "flipped":
        data = bytearray(segment.read_bytes())
        data[1000] ^= 1
        segment.write_bytes(bytes(data))
    else:
        segment.unlink()
    store = SqliteStore(path)
    assert store.get(G, MessageId("a", 1)) is None
    assert [s.message for s in store.load_messages(G)] == [msg("a", 2, size=100)]
    assert store.high_water(G, "a") == 2
    assert store._payloads is not None and store._payloads.unreadable == 2
    store.close()


def test_a_reference_that_is_not_one_is_refused(tmp_path: Path) -> None:
    files = PayloadFiles(tmp_path / "p")
    ref = files.write(b"x" * 10)
    assert files.read(ref) == b"x" * 10
    for bad in ([1, 2], "abc", None, [1, 0, 10, "crc"], [1, -5, 10, ref[3]],
                [1, 0, 1 << 62, ref[3]], [7, 0, 10, ref[3]]):
        assert files.read(bad) is None
    assert files.unreadable == 7
    files.close()


def test_segments_roll_over_and_go_when_nothing_refers_to_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(payload_files_module, "SEGMENT_BYTES", 3 * BIG)
    path = tmp_path / "log.db"
    store = SqliteStore(path)
    store.set_retention(RetentionPolicy(max_bytes=8 * BIG))
    for seq in range(1, 31):
        store.put(G, msg("a", seq), True)
        store.commit(float(seq))
    kept = [m.mid.seq for m in store.seq_range(G, "a", 1, 100, 100)]
    assert kept and kept[-1] == 30 and len(kept) <= 8
    assert store.seq_range(G, "a", 1, 100, 100) == [msg("a", s) for s in kept]
    # 30 payloads in segments of 3: those of the evicted ones are gone, every kept
    # one's is there, and nothing else but the current segment.
    wanted = {(s - 1) // 3 + 1 for s in kept}
    present = {int(name[:8]) for name in segment_files(path)}
    assert wanted <= present <= wanted | {store._payloads.current if store._payloads else 0}
    assert store._payloads is not None and store._payloads.removed == 10 - len(present)
    store.close()


def test_a_held_message_s_payload_moves_with_it_and_its_old_segment_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(payload_files_module, "SEGMENT_BYTES", 2 * BIG)
    path = tmp_path / "log.db"
    store = SqliteStore(path)
    store.set_retention(RetentionPolicy(age=10.0))
    store.put(G, msg("b", 1), False)  # held: not delivered, never evicted
    store.commit(0.0)
    for seq in range(1, 9):
        store.put(G, msg("a", seq), True)
        store.commit(float(seq))
    for t in (20.0, 40.0):  # two passes: everything delivered goes, "b" 1 is rewritten
        store.commit(t)
    assert store.get(G, MessageId("b", 1)) == msg("b", 1)
    assert store.seq_range(G, "a", 1, 100, 100) == []
    assert "00000001.seg" not in segment_files(path)  # where "b" 1 was first written
    assert store.log_bytes(G) > BIG  # (its payload counted where it is now)
    store.mark_delivered(G, MessageId("b", 1))
    store.commit(60.0)
    store.commit(80.0)
    assert store.get(G, MessageId("b", 1)) is None and store.log_bytes(G) == 0
    store.close()


def test_with_the_checkpoint_thread_a_segment_goes_after_the_next_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment is deleted only once the commit that stopped referring to it is
    durable, which a checkpoint makes it; the checkpoint syncs the segments first."""
    monkeypatch.setattr(payload_files_module, "SEGMENT_BYTES", BIG)
    path = tmp_path / "log.db"
    store = SqliteStore(path, checkpoint_thread=True)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    store.set_retention(RetentionPolicy(age=10.0))
    for seq in range(1, 4):
        store.put(G, msg("a", seq), True)
        store.commit(float(seq))
    done = checkpointer.checkpoints
    checkpointer.request()
    assert checkpointer.wait_for(done + 1, timeout=60)
    files = store._payloads
    assert files is not None and not files._dirty and not files._unsynced
    store.commit(30.0)  # all three evicted
    assert store.seq_range(G, "a", 1, 10, 10) == []
    assert len(segment_files(path)) == 3  # not yet
    done = checkpointer.checkpoints
    checkpointer.request()
    assert checkpointer.wait_for(done + 1, timeout=60)
    assert segment_files(path) == [f"{files.current:08d}.seg"]
    store.close()


def test_a_file_of_a_version_without_payload_files_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE chunks (gid TEXT NOT NULL, pid TEXT NOT NULL, lo INTEGER NOT NULL,
                             hi INTEGER NOT NULL, data BLOB NOT NULL, t REAL);
        CREATE INDEX chunks_by_seq ON chunks (gid, pid, lo);""")
    old = [[1, 1, "", 0, b"y" * BIG, None, None, True]]  # a large payload, inline
    db.execute("INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?)",
               (G, "a", 1, 1, msgpack.packb(old, use_bin_type=True), None))
    db.commit()
    db.close()
    store = SqliteStore(path)
    columns = {row[1] for row in store._db.execute("PRAGMA table_info(chunks)")}
    assert {"ext", "seg"} <= columns
    store.put(G, msg("a", 2, parent=MessageId("a", 1)), True)
    store.close()
    store = SqliteStore(path)
    assert [s.message.payload for s in store.load_messages(G)] == [
        b"y" * BIG, msg("a", 2).payload]
    store.close()


def test_closed_segments_are_synced_and_closed_by_the_next_sync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``defer_sync`` (the checkpoint thread syncs) a writer that starts a new
    segment never waits for the disk: the closed ones wait for the next sync."""
    monkeypatch.setattr(payload_files_module, "SEGMENT_BYTES", 100)
    files = PayloadFiles(tmp_path / "p", defer_sync=True)
    refs = [files.write(bytes([i]) * 150) for i in range(3)]
    assert [r[0] for r in refs] == [1, 2, 3] and files.current == 3
    pending = list(files._unsynced)
    assert len(pending) == 2 and files._dirty
    files.sync()
    assert files._unsynced == [] and not files._dirty
    for fd in pending:
        with pytest.raises(OSError):
            os.fstat(fd)  # closed once synced
    assert [files.read(r) for r in refs] == [bytes([i]) * 150 for i in range(3)]
    files.close()

