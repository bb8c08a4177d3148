"""An infrastructure member keeps the large bodies of its pending messages beside its
log, once, in segment files (m2mc.infra_runtime.member_store; docs/decisions.md, "A
member's own large messages wait beside its log"): they read back after a crash of
the process, a segment goes once no pending message is in it, a body an
operating-system crash took makes the member join afresh with the rest, and a file
of an earlier version keeps working."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from m2mc.infra import messages as m
from m2mc.infra.persist import MemberCommit, decode_saved, encode_membership
from m2mc.infra_runtime import member_store
from m2mc.infra_runtime.member_store import LARGE_BODY, SqliteMemberStore

BIG = 64_000


def segments(path: Path) -> list[str]:
    directory = path.with_name(path.name + "-payloads")
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def put(seq: int, body: bytes, drop: tuple[int, ...] = (),
        membership: str = "{}") -> MemberCommit:
    return MemberCommit("A", seq, membership, put=(m.NewItem(seq, seq, body, "g"),),
                        drop=drop)


def test_large_bodies_are_written_once_beside_the_log_and_survive_a_killed_process(
        tmp_path: Path) -> None:
    path = tmp_path / "member.sqlite3"
    store = SqliteMemberStore(path)
    large, small = os.urandom(BIG), b"x" * (LARGE_BODY - 1)
    store.commit(put(1, large))
    store.commit(put(2, small))
    # The large body is in a segment, its row holds where; the small one is in its row.
    rows = dict(store._db.execute("SELECT app_seq, length(body) FROM pending"))
    assert rows == {1: 0, 2: len(small)}
    assert segments(path) == ["00000001.seg"]
    # The process dies without closing: a second opening sees what the first committed.
    after_crash = SqliteMemberStore(path).load()
    assert after_crash is not None
    assert [(row[0], row[2]) for row in after_crash.pending] == [(1, large), (2, small)]
    store.close()


def test_a_segment_goes_once_no_pending_message_is_in_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(member_store, "SEGMENT_BYTES", 3 * BIG)
    path = tmp_path / "member.sqlite3"
    store = SqliteMemberStore(path)
    most = 0
    for seq in range(1, 101):  # each message ordered (dropped) four commits later
        store.commit(put(seq, os.urandom(BIG), drop=(seq - 4,) if seq > 4 else ()))
        most = max(most, len(segments(path)))
    # 100 messages went through 34 segments; the pending four span at most three.
    assert most <= 3
    assert segments(path)[-1] == "00000034.seg"
    store.commit(MemberCommit("A", 100, "{}", drop=(97, 98, 99, 100)))
    assert segments(path) == ["00000034.seg"]  # (the current one stays, for the next)
    store.close()


def test_with_the_checkpoint_thread_segments_go_after_a_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real member's segments go only once a checkpoint made the commit that stopped
    referring to them durable: at the latest when the store closes."""
    monkeypatch.setattr(member_store, "SEGMENT_BYTES", 2 * BIG)
    path = tmp_path / "member.sqlite3"
    store = SqliteMemberStore(path, checkpoint_thread=True)
    bodies = {}
    for seq in range(1, 41):
        bodies[seq] = os.urandom(BIG)
        store.commit(put(seq, bodies[seq], drop=(seq - 2,) if seq > 2 else ()))
    store.close()
    assert len(segments(path)) <= 2
    saved = SqliteMemberStore(path).load()
    assert saved is not None
    assert [(row[0], row[2]) for row in saved.pending] == [(39, bodies[39]), (40, bodies[40])]


def test_a_body_lost_with_the_operating_system_means_a_fresh_join_with_the_rest(
        tmp_path: Path) -> None:
    """An operating-system crash may keep a row whose body, beside the log, never
    reached the disk. The member cannot send that NEW again, and the coordinator
    numbers a member's NEWs without gaps, so it joins afresh with the other messages
    renumbered, and says why."""
    path = tmp_path / "member.sqlite3"
    store = SqliteMemberStore(path)
    membership = encode_membership(group="g", phase="member", join_id=5, mystable=0,
                                   mynew=3, confirmed=0, leave_requested=False)
    first, third = os.urandom(BIG), os.urandom(BIG)
    store.commit(put(1, first, membership=membership))
    store.commit(MemberCommit("A", 3, membership, put=(
        m.NewItem(2, 2, os.urandom(BIG), "g"), m.NewItem(3, 3, third, "g"))))
    store.close()
    # The crash: the second body's bytes were not on the disk (the segment cut short).
    segment = path.with_name(path.name + "-payloads") / "00000001.seg"
    data = segment.read_bytes()
    segment.write_bytes(data[:BIG + 100] + bytes(BIG - 100) + data[2 * BIG:])
    stored = SqliteMemberStore(path).load()
    assert stored is not None
    assert [row[2] for row in stored.pending] == [first, None, third]
    saved = decode_saved(stored)
    assert saved.problem == "the bytes of 1 pending message(s) were lost"
    assert saved.phase == "idle"
    assert [(i.nseq, i.app_seq, i.body) for i in saved.pending] == [(1, 1, first),
                                                                    (2, 3, third)]
    assert saved.app_seq == 3  # never below an id that was used


def test_a_file_of_an_earlier_version_keeps_its_bodies_and_takes_new_ones_beside(
        tmp_path: Path) -> None:
    path = tmp_path / "member.sqlite3"
    old_body = os.urandom(BIG)
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value);
        CREATE TABLE pending (app_seq INTEGER PRIMARY KEY, nseq INTEGER NOT NULL,
            body BLOB NOT NULL, grp TEXT NOT NULL DEFAULT '',
            kind INTEGER NOT NULL DEFAULT 0);""")
    db.execute("INSERT INTO meta VALUES ('pid', 'A'), ('app_seq', 1)")
    db.execute("INSERT INTO pending VALUES (1, 1, ?, 'g', 0)", (old_body,))
    db.commit()
    db.close()
    store = SqliteMemberStore(path)
    new_body = os.urandom(BIG)
    store.commit(put(2, new_body))
    store.close()
    saved = SqliteMemberStore(path).load()
    assert saved is not None
    assert [(row[0], row[2]) for row in saved.pending] == [(1, old_body), (2, new_body)]
    assert segments(path) == ["00000001.seg"]
