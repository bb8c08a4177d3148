"""The stores of a real host and a real member copy their log into the database on a
thread of their own (m2mc.store.checkpointer; docs/decisions.md, "A host's log is
checkpointed by a thread"): the log stays within 4 MiB however much goes through,
everything committed reads back after a reopen, and the simulator's stores start no
thread."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from m2mc.infra import messages as m
from m2mc.infra.host_persist import HostCommit
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.persist import MemberCommit
from m2mc.infra.state import pack_groups
from m2mc.infra_runtime.host_store import SqliteHostStore
from m2mc.infra_runtime.member_store import SqliteMemberStore
from m2mc.store.checkpointer import THREAD_AUTOCHECKPOINT_BYTES

E1 = Epoch(1, 0.0, "H1")
A = MemberId("A", 1)
BODY = 64_000  # the largest messages infrastructure mode carries, about


def wal_bytes(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def checkpoint_thread_of(path: Path) -> threading.Thread | None:
    """The checkpoint thread of the store in ``path``, if one is running."""
    name = f"m2mc-checkpoint {path.name}"
    return next((t for t in threading.enumerate() if t.name == name), None)


def app(lsn: int, body: bytes) -> m.Record:
    return m.Record(lsn, lsn, m.APP, A, lsn - 1, lsn - 1, 0, body, "g", lsn - 1)


def test_a_host_s_log_stays_within_4_mib_and_every_record_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "host.sqlite3"
    store = SqliteHostStore(path, "H1", checkpoint_thread=True)
    assert checkpoint_thread_of(path) is not None
    bodies = {1: pack_groups(["g"])}
    store.commit(HostCommit(E1, E1, 1, records=(m.Record(1, 1, m.JOINED, A, body=bodies[1]),)))
    most, lsn = 0, 2
    for _ in range(50):  # commits of 8 records of 64,000 B: about 26 MB of log in all
        batch = []
        for _ in range(8):
            bodies[lsn] = os.urandom(BODY)
            batch.append(app(lsn, bodies[lsn]))
            lsn += 1
        store.commit(HostCommit(E1, E1, lsn - 1, records=tuple(batch)))
        most = max(most, wal_bytes(path))
    # The log started over rather than growing with what went through it: past twice
    # the bound the committing connection starts it over itself, so at most one
    # commit's rows (about 8 x 64 KiB here) lie beyond that.
    assert 0 < most <= 2 * THREAD_AUTOCHECKPOINT_BYTES + 9 * (BODY + 4096)
    assert store._checkpointer is not None and store._checkpointer.wait_for(1, timeout=30)
    store.close()
    assert checkpoint_thread_of(path) is None
    reopened = SqliteHostStore(path, "H1")
    saved = reopened.load()
    assert [r.lsn for r in saved.records] == list(range(1, lsn))
    assert all(r.body == bodies[r.lsn] for r in saved.records)
    assert saved.applied == lsn - 1
    reopened.close()


def test_a_member_s_pending_messages_keep_the_log_within_4_mib(tmp_path: Path) -> None:
    """A sender of 64,000-byte messages holds each in ``pending`` until it is ordered:
    put, then dropped a few commits later. Its commits do not wait for the disk
    (``synchronous=NORMAL``), so they outrun the thread's copies, which wait for it:
    then the committing connection copies the log itself past twice the bound."""
    path = tmp_path / "member.sqlite3"
    store = SqliteMemberStore(path, checkpoint_thread=True)
    assert checkpoint_thread_of(path) is not None
    most, bodies = 0, {}
    for seq in range(1, 1001):
        bodies[seq] = os.urandom(BODY)
        drop = (seq - 4,) if seq > 4 else ()
        store.commit(MemberCommit("A", seq, "{}", put=(m.NewItem(seq, seq, bodies[seq], "g"),),
                                  drop=drop))
        most = max(most, wal_bytes(path))
    assert 0 < most <= 2 * THREAD_AUTOCHECKPOINT_BYTES + 2 * (BODY + 4096)
    assert store._checkpointer is not None and store._checkpointer.wait_for(1, timeout=30)
    store.close()
    assert checkpoint_thread_of(path) is None
    reopened = SqliteMemberStore(path)
    saved = reopened.load()
    assert saved is not None and saved.app_seq == 1000
    assert [(row[0], row[2]) for row in saved.pending] == [(s, bodies[s])
                                                            for s in range(997, 1001)]
    reopened.close()


def test_the_simulator_s_stores_start_no_thread(tmp_path: Path) -> None:
    """A simulated run must not depend on a thread's timing: without
    ``checkpoint_thread`` (how the simulator opens them) the stores keep SQLite's own
    checkpoint on the committing connection."""
    host = SqliteHostStore(tmp_path / "h.sqlite3", "H1", sync="off")
    member = SqliteMemberStore(tmp_path / "m.sqlite3")
    assert checkpoint_thread_of(tmp_path / "h.sqlite3") is None
    assert checkpoint_thread_of(tmp_path / "m.sqlite3") is None
    for store in (host, member):
        assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)
    host.close()
    member.close()
