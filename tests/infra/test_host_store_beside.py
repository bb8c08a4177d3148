"""A host writes each large record once, to a segment beside its log
(m2mc.infra_runtime.host_store; docs/decisions.md, "A host's large records are written
once, beside its log"): with ``sync="full"`` the segment is on the disk before the row
that refers to it is committed, a record that cannot be read back is refused at the
next start as a damaged log, a log that is replaced frees its segments, and a log of
an earlier version keeps its records in their rows."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from m2mc.errors import SavedStateError
from m2mc.infra import messages as m
from m2mc.infra.codec import pack_record
from m2mc.infra.host_persist import HostCommit
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.state import pack_groups
from m2mc.infra_runtime.host_store import SqliteHostStore
from m2mc.store import payload_files
from m2mc.store.payload_files import PayloadFiles

E1 = Epoch(1, 0.0, "H1")
A = MemberId("A", 1)
BIG = 64_000


def app(lsn: int, body: bytes) -> m.Record:
    return m.Record(lsn, lsn, m.APP, A, lsn - 1, lsn - 1, 0, body, "g", lsn - 1)


def joined() -> m.Record:
    return m.Record(1, 1, m.JOINED, A, body=pack_groups(["g"]))


def segments(path: Path) -> list[int]:
    return sorted(int(p.stem) for p in path.parent.glob(f"{path.name}-payloads/*.seg"))


def test_a_large_record_is_on_the_disk_before_its_row_is_committed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "host.sqlite3"
    store = SqliteHostStore(path, "H1")  # sync="full"
    events: list[str] = []
    real_sync = PayloadFiles.sync

    def sync(files: PayloadFiles) -> None:
        events.append("segment synced")
        real_sync(files)

    monkeypatch.setattr(PayloadFiles, "sync", sync)
    store._db.set_trace_callback(lambda sql: events.append(sql) if sql == "COMMIT" else None)
    body = os.urandom(BIG)
    store.commit(HostCommit(E1, E1, 1, records=(joined(),)))  # small: in its row
    assert events == ["COMMIT"]
    store.commit(HostCommit(E1, E1, 2, records=(app(2, body),)))
    assert events == ["COMMIT", "segment synced", "COMMIT"]
    (data, ref), = store._db.execute("SELECT data, ref FROM records WHERE lsn = 2")
    assert data == b"" and ref is not None
    store._db.set_trace_callback(None)
    # A second opening (the process killed: nothing closed) reads it back.
    again = SqliteHostStore(path, "H1").load()
    assert [r.body for r in again.records] == [joined().body, body]
    store.close()


def test_a_record_that_cannot_be_read_back_is_refused_at_the_next_start(
        tmp_path: Path) -> None:
    path = tmp_path / "host.sqlite3"
    store = SqliteHostStore(path, "H1")
    store.commit(HostCommit(E1, E1, 2, records=(joined(), app(2, os.urandom(BIG)))))
    store.close()
    segment = path.parent / f"{path.name}-payloads" / "00000001.seg"
    segment.write_bytes(segment.read_bytes()[:BIG // 2])  # the disk lost its end
    reopened = SqliteHostStore(path, "H1")
    with pytest.raises(SavedStateError, match="cannot be read back"):
        reopened.load()
    reopened.close()


def test_a_reset_or_a_replaced_suffix_frees_the_segments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(payload_files, "SEGMENT_BYTES", 2 * BIG)
    path = tmp_path / "host.sqlite3"
    store = SqliteHostStore(path, "H1", sync="off")
    store.commit(HostCommit(E1, E1, 1, records=(joined(),)))
    for lsn in range(2, 12):  # ten records, two to a segment
        store.commit(HostCommit(E1, E1, lsn, records=(app(lsn, os.urandom(BIG)),)))
    assert segments(path) == [1, 2, 3, 4, 5]
    store.commit(HostCommit(E1, E1, 3, truncate_after=1, records=(app(2, os.urandom(BIG)),)))
    assert segments(path) == [6]  # record 2 again, in a new one: the rest went
    store.commit(HostCommit(E1, E1, 3, truncate_after=2, records=(app(3, os.urandom(BIG)),)))
    store.commit(HostCommit(E1, E1, 4, records=(app(4, os.urandom(BIG)),)))
    assert segments(path) == [6, 7]
    store.commit(HostCommit(E1, E1, 0, reset=True, records=()))
    assert segments(path) == [7]  # the one being written stays
    store.close()
    assert SqliteHostStore(path, "H1").load().records == ()


def test_a_log_of_an_earlier_version_keeps_its_records_in_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "host.sqlite3"
    old_body, new_body = os.urandom(BIG), os.urandom(BIG)
    store = SqliteHostStore(path, "H1")
    store.commit(HostCommit(E1, E1, 2, records=(joined(), app(2, old_body))))
    store.close()
    # What an earlier version wrote: no ref column, every record in its row.
    db = sqlite3.connect(path)
    data = pack_record(app(2, old_body))
    db.execute("UPDATE records SET data = ?, ref = NULL WHERE lsn = 2", (data,))
    db.execute("ALTER TABLE records DROP COLUMN ref")
    db.commit()
    db.close()
    store = SqliteHostStore(path, "H1")
    store.commit(HostCommit(E1, E1, 3, records=(app(3, new_body),)))
    store.close()
    assert [r.body for r in SqliteHostStore(path, "H1").load().records] == [
        joined().body, old_body, new_body]


def test_the_simulator_s_store_syncs_nothing_and_keeps_no_closed_segment_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sync="off"`` (the simulator's hosts, whose crashes keep the files): no record
    is ever synced, and a segment is closed as the next one begins, so a long run
    holds one open."""
    monkeypatch.setattr(payload_files, "SEGMENT_BYTES", BIG)
    synced: list[int] = []
    monkeypatch.setattr(os, "fdatasync", synced.append)
    path = tmp_path / "host.sqlite3"
    store = SqliteHostStore(path, "H1", sync="off")
    store.commit(HostCommit(E1, E1, 1, records=(joined(),)))
    for lsn in range(2, 42):
        store.commit(HostCommit(E1, E1, lsn, records=(app(lsn, os.urandom(BIG)),)))
    open_segments = [fd for fd in os.listdir("/proc/self/fd")
                     if os.path.realpath(f"/proc/self/fd/{fd}").startswith(f"{path}-payloads")]
    assert len(segments(path)) == 40 and len(open_segments) == 1
    store.close()
    assert synced == []
