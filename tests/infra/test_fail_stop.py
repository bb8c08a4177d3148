"""A node whose durable log cannot be written stops there (fail-stop, runtime/driver.py):
the turn's output is dropped, nothing leaves after it, and its owner is told. Going on
would send output built on state that is not on disk (a host acknowledging past a save
that never reached its log). Hosts: ``m2mc host`` exits 1 with one line; ad hoc nodes:
``await node.sync()`` raises LogWriteError."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.cli.host import _serve
from m2mc.core import Save
from m2mc.errors import LogWriteError
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings
from m2mc.infra_runtime.host_store import SqliteHostStore
from m2mc.runtime.driver import Driver
from m2mc.store.sqlite import SqliteStore

BASE = 13000 + (os.getpid() % 400) * 2
CELL = f"udp-multicast://239.255.77.{1 + os.getpid() % 200}:{BASE}?iface=127.0.0.1&ttl=1"


class _Core:
    """A core with a save and an output at every turn."""

    def __init__(self) -> None:
        self.turns = 0

    def on_timer(self, now: float) -> None:
        pass

    def next_deadline(self) -> float | None:
        return None

    def take_save(self, now: float) -> Save[int]:
        return Save(record=self.turns)


class _Adapter:
    def __init__(self, core: _Core) -> None:
        self.core = core
        self.sent: list[int] = []

    async def open_links(self, driver: Driver) -> None:
        pass

    def take_output(self, now: float) -> int:
        self.core.turns += 1
        return self.core.turns

    def transmit(self, output: int, now: float) -> int:
        self.sent.append(output)
        return 1

    async def close_links(self) -> None:
        pass


async def test_a_failed_commit_drops_its_output_and_stops_the_driver() -> None:
    core = _Core()
    adapter = _Adapter(core)
    committed: list[int] = []
    failures: list[BaseException] = []

    def commit(record: int) -> None:
        if record >= 2:
            raise sqlite3.OperationalError("disk I/O error")
        committed.append(record)

    driver = Driver(core, adapter, commit=commit, on_failure=failures.append)
    await driver.start()
    driver.poke()  # turn 1: saved, sent
    driver.poke()  # turn 2: its commit fails (the owner is told, not the caller)
    driver.poke()  # no turn 3
    assert committed == [1] and adapter.sent == [1]
    assert driver.closed and isinstance(driver.failure, sqlite3.OperationalError)
    assert failures == [driver.failure]
    await driver.close()


async def test_a_host_whose_log_cannot_be_written_stops_with_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commits = {"n": 0}

    def failing(self: SqliteHostStore, c: Any) -> None:
        # The lone host's first save (its new sequence, about a second after it
        # starts, from a timer) finds the disk full.
        commits["n"] += 1
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(SqliteHostStore, "commit", failing)
    host = HostDriver(HostSettings("H1", ("127.0.0.1", BASE + 10), CELL, ("127.0.0.1", 0),
                                   data_dir=tmp_path / "h1"))
    code = await asyncio.wait_for(_serve(host, 20.0), 30)
    err = capsys.readouterr().err
    assert code == 1
    assert commits["n"] == 1
    # (stderr may hold other lines too: under xdist a handler another test left can
    # report a logging error of its own)
    assert ("m2mc host: error: H1 stopped: its log could not be written (database or "
            "disk is full); nothing it had not saved left it") in err.splitlines()
    assert host.driver is not None and host.driver.closed


async def test_an_ad_hoc_node_whose_log_cannot_be_written_raises_at_sync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Node(NodeConfig(channel="mem://fail-stop", data_dir=tmp_path / "a"),
                    pid="a") as node:
        group = await node.create_group("chat")
        await group.send("saved")
        await node.sync()

        def full(self: SqliteStore) -> None:  # (the commit's writes of its rows)
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(SqliteStore, "_flush", full)
        await group.send("not saved")
        with pytest.raises(LogWriteError, match="database or disk is full"):
            await node.sync()
        with pytest.raises(LogWriteError):
            await node.sync()  # and from then on
