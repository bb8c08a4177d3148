"""``m2mc host --data-dir`` on bad input (docs/infra.md, "Durable hosts"): a flag that
makes no sense, another host's directory, a file that is not a host's saved state:
each is one line on stderr and exit status 2, before the host sends anything, and the
saved state is left as it was."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from m2mc.infra import messages as m
from m2mc.infra.host_persist import HostCommit
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra_runtime.host_store import FILE_NAME, SqliteHostStore

PORT = 17000 + (os.getpid() % 500) * 2
CELL = f"udp-multicast://239.255.97.{1 + os.getpid() % 200}:{PORT + 1}?iface=127.0.0.1&ttl=1"
E1 = Epoch(1, 0.0, "H1")


def host(*extra: str) -> subprocess.CompletedProcess[str]:
    run_for = () if "--run-for" in extra else ("--run-for", "0.2")
    return subprocess.run([sys.executable, "-m", "m2mc.cli", "host", "--id", "H1",
                           "--listen", f"127.0.0.1:{PORT}", "--cell", CELL, *extra, *run_for],
                          capture_output=True, text=True, timeout=60, check=False)


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_sync_without_a_data_dir_is_refused() -> None:
    one_line_error(host("--sync", "normal"), "--sync needs --data-dir")


def test_another_hosts_directory_is_refused_and_left_alone(tmp_path: Path) -> None:
    store = SqliteHostStore(tmp_path / FILE_NAME, "H2")
    store.commit(HostCommit(E1, E1, 1, records=(m.Record(1, 1, m.JOINED, MemberId("A", 1)),)))
    store.close()
    before = (tmp_path / FILE_NAME).read_bytes()
    one_line_error(host("--data-dir", str(tmp_path)), "H2", "H1", "--data-dir")
    assert (tmp_path / FILE_NAME).read_bytes() == before


@pytest.mark.parametrize("damage", ["not sqlite", "bad record", "hole"])
def test_a_damaged_saved_state_is_refused(tmp_path: Path, damage: str) -> None:
    path = tmp_path / FILE_NAME
    if damage == "not sqlite":
        path.write_bytes(b"this is no database" * 100)
    else:
        store = SqliteHostStore(path, "H1")
        recs = (m.Record(1, 1, m.JOINED, MemberId("A", 1)),
                m.Record(2, 2, m.APP, MemberId("A", 1), 1, 1, 0, b"x"),
                m.Record(3, 3, m.APP, MemberId("A", 1), 2, 2, 0, b"y"))
        store.commit(HostCommit(E1, E1, 1, records=recs))
        store.close()
        db = sqlite3.connect(path)
        with db:
            if damage == "bad record":
                db.execute("UPDATE records SET data = ? WHERE lsn = 2", (b"\xc1\xc1",))
            else:
                db.execute("DELETE FROM records WHERE lsn = 2")
        db.close()
    one_line_error(host("--data-dir", str(tmp_path)), "saved")


def test_a_lone_host_on_a_fresh_directory_founds_a_sequence_and_keeps_it(
        tmp_path: Path) -> None:
    done = host("--data-dir", str(tmp_path / "new"), "--run-for", "3")
    assert done.returncode == 0, done.stderr
    assert "a new sequence starts" in done.stderr  # said: nobody held a log
    saved = SqliteHostStore(tmp_path / "new" / FILE_NAME, "H1").load()
    assert saved.promised.starter == "H1" and saved.log_epoch == saved.promised
    genesis = saved.records[0]
    assert genesis.kind == m.GENESIS and genesis.lsn == 1
    again = host("--data-dir", str(tmp_path / "new"), "--run-for", "3")
    assert again.returncode == 0 and "a new sequence starts" not in again.stderr
    back = SqliteHostStore(tmp_path / "new" / FILE_NAME, "H1").load()
    assert back.records[0] == genesis and back.promised > saved.promised  # same sequence
