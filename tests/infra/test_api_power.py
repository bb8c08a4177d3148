"""``Node(NodeConfig(mode="infra", data_dir=...))``: a member switched off (``close``)
and on again (a new ``Node`` on the same ``data_dir``) resumes its membership,
delivers what was sequenced while it was off, and numbers its messages on; without
``data_dir`` nothing changes. Hosts are asyncio drivers in this process."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from trace_check import verify

from m2mc.api import Group, Node, NodeConfig
from m2mc.errors import ConfigError, SavedStateError, UsageError
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings
from m2mc.infra_runtime.member_store import FILE_NAME, SqliteMemberStore

BASE = 12000 + (os.getpid() % 400) * 2
CELLS = [f"udp-multicast://239.255.{70 + i}.{1 + os.getpid() % 200}:{BASE + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(2)]
BACKBONE = [("127.0.0.1", BASE + 10 + i) for i in range(2)]


@pytest.fixture
async def hosts() -> AsyncIterator[list[HostDriver]]:
    drivers = [HostDriver(HostSettings(f"H{i}", BACKBONE[i], CELLS[i], ("127.0.0.1", 0),
                                       [b for j, b in enumerate(BACKBONE) if j != i]))
               for i in range(2)]
    for d in drivers:
        await d.start()
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while not any(d.core is not None and d.core.coordinator is not None for d in drivers):
        assert loop.time() < end, "no coordinator elected"
        await asyncio.sleep(0.05)
    yield drivers
    for d in drivers:
        await d.close()


async def test_switched_off_and_on_it_resumes_and_misses_nothing(
        hosts: list[HostDriver], tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS), trace_dir=trace, trace_flush_every=1)
    data = tmp_path / "bob"
    async with Node(cfg, pid="alice") as alice:
        ga, bob, gb = await _alice_group_and_bob(alice, cfg, data)
        assert str(await gb.send("bob before")) == "bob:1"
        assert [m.text for m in await _take(gb, 1)] == ["bob before"]
        await bob.close()  # switch-off: no leave
        for i in range(10):
            await ga.send(f"while off {i}")
        await _take(ga, 11)  # sequenced while bob was off
        bob = Node(cfg, data_dir=data)  # the pid comes from data_dir
        await bob.start()
        assert bob.pid == "bob" and bob.stats()["resumed"] == 1
        gb = await bob.join("chat", timeout=10)  # already a member: returns at once
        got = await _take(gb, 10)
        assert [m.text for m in got] == [f"while off {i}" for i in range(10)]
        assert str(await gb.send("bob after")) == "bob:2"  # numbering goes on
        assert (await _take(ga, 1))[0].text == "bob after"
        assert (await _take(gb, 1))[0].text == "bob after"
        await gb.leave()
        await bob.close()
    v = verify(trace)
    assert v.ok, v.problems[:5]
    events = [line for f in sorted(trace.glob("bob*.jsonl")) for line in f.read_text().split("\n")
              if '"event":"join"' in line or '"event":"restart"' in line
              or '"event":"crash"' in line]
    assert sum('"join"' in e for e in events) == 1  # one membership throughout
    assert sum('"restart"' in e for e in events) == 1
    assert not any('"crash"' in e for e in events)  # a clean switch-off


async def _alice_group_and_bob(alice: Node, cfg: NodeConfig, data: Path
                               ) -> tuple[Group, Node, Group]:
    """Alice's total-order group "chat", and bob (with ``data``) in it from cell 1."""
    ga = await alice.create_group("chat", order="total")
    bob = Node(cfg, pid="bob", data_dir=data, infra_cell=CELLS[1])
    await bob.start()
    return ga, bob, await bob.join("chat", timeout=10)


async def _take(group: object, n: int) -> list[object]:
    out = []
    for _ in range(n):
        out.append(await group.receive(timeout=10))  # type: ignore[attr-defined]
    return out  # type: ignore[return-value]


async def test_data_dir_of_another_process_or_unreadable_is_refused(tmp_path: Path) -> None:
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS))
    store = SqliteMemberStore(tmp_path / "a" / FILE_NAME)
    store.set_meta("pid", "alice")
    store.close()
    with pytest.raises(UsageError, match="belongs to process 'alice'"):
        await Node(cfg, pid="bob", data_dir=tmp_path / "a").start()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / FILE_NAME).write_bytes(b"this is not a database" * 100)
    with pytest.raises(SavedStateError, match="saved member state"):
        await Node(cfg, pid="bob", data_dir=tmp_path / "b").start()
    assert issubclass(SavedStateError, ConfigError)  # the CLI's one-line error, status 2
    store = SqliteMemberStore(tmp_path / "c" / FILE_NAME)
    store.set_meta("app_seq", "twelve")
    store.set_meta("pid", "bob")
    store.close()
    with pytest.raises(SavedStateError, match="message numbering"):
        await Node(cfg, pid="bob", data_dir=tmp_path / "c").start()


async def test_a_corrupt_membership_is_logged_and_left_behind(
        hosts: list[HostDriver], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = SqliteMemberStore(tmp_path / FILE_NAME)
    store.set_meta("pid", "bob")
    store.set_meta("app_seq", 41)
    store.set_meta("membership", "{garbage")
    store.close()
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS), data_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="m2mc.infra.member"):
        async with Node(cfg) as bob:
            assert bob.stats()["restore_discarded"] == 1 and bob.stats()["resumed"] == 0
            g = await bob.join("chat", timeout=10)
            assert str(await g.send("fresh")) == "bob:42"  # never below a used number
    assert "left behind (the saved membership is not JSON)" in caplog.text


async def test_without_data_dir_nothing_is_saved(hosts: list[HostDriver],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS), pid="carol")
    with caplog.at_level(logging.WARNING, logger="m2mc.infra.member"):
        async with Node(cfg) as carol:
            g = await carol.join("chat", timeout=10)
            assert str(await g.send("one")) == "carol:1"
            first = carol.driver.core.mid  # type: ignore[attr-defined]
    assert "fixed pid without data_dir" in caplog.text
    async with Node(cfg) as carol:
        g = await carol.join("chat", timeout=10)
        assert carol.driver.core.mid != first  # type: ignore[attr-defined]
        assert carol.stats()["resumed"] == 0 and carol.driver.core.durable is None  # type: ignore[attr-defined]


async def test_what_sync_saw_survives_a_kill(hosts: list[HostDriver], tmp_path: Path) -> None:
    """``await node.sync()`` (docs/api.md): the member's state is saved once it
    returns, so a member killed right after it numbers on from its last message and
    the group gets each of those once. Without it the kill would keep them out of the
    saved state, and their numbers would be given again."""
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS))
    data = tmp_path / "bob"
    async with Node(cfg, pid="alice") as alice:
        ga, bob, gb = await _alice_group_and_bob(alice, cfg, data)
        sent = [str(await gb.send(f"b{i}")) for i in range(3)]
        await bob.sync()
        await bob.driver.driver.close()  # type: ignore[attr-defined]  # killed
        bob = Node(cfg, data_dir=data, infra_cell=CELLS[1])
        await bob.start()
        assert [str(m.mid) for m in await _take(ga, 3)] == sent  # type: ignore[attr-defined]
        gb = await bob.join("chat", timeout=10)
        assert str(await gb.send("after")) == "bob:4"
        assert (await _take(ga, 1))[0].text == "after"  # type: ignore[attr-defined]
        await bob.close()
