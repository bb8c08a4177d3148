"""``m2mc host show|retire|readmit`` against live hosts (asyncio drivers in this
process, on loopback), in a keyed deployment: the command line's answers and exit
statuses, and a retired host that comes back stops with a one-line error."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from m2mc.infra_runtime.host_driver import HostDriver, HostSettings
from m2mc.security import generate_key

BASE = 16000 + (os.getpid() % 300) * 8
CELLS = [f"udp-multicast://239.255.{70 + i}.{1 + os.getpid() % 200}:{BASE + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(3)]
BACKBONE = [("127.0.0.1", BASE + 4 + i) for i in range(3)]
KEY = generate_key()


def driver(i: int) -> HostDriver:
    return HostDriver(HostSettings(f"H{i}", BACKBONE[i], CELLS[i], ("127.0.0.1", 0),
                                   [b for j, b in enumerate(BACKBONE) if j != i], key=KEY))


async def until(cond: object, what: str, limit: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not cond():  # type: ignore[operator]
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
async def hosts() -> AsyncIterator[list[HostDriver]]:
    drivers = [driver(i) for i in range(3)]
    for d in drivers:
        await d.start()
    await until(lambda: any(d.core is not None and d.core.coordinator is not None
                            for d in drivers), "a master")
    yield drivers
    for d in drivers:
        await d.close()


async def m2mc(*args: str, key: Path | None) -> tuple[int, str, str]:
    argv = [sys.executable, "-m", "m2mc.cli", "host", *args]
    if key is not None:
        argv += ["--key-file", str(key)]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_retire_show_and_readmit_from_the_command_line(
        hosts: list[HostDriver], tmp_path: Path) -> None:
    key = tmp_path / "deploy.key"
    key.write_text(KEY)
    key.chmod(0o600)
    master = next(d for d in hosts if d.core is not None and d.core.coordinator is not None)
    victim = next(d for d in hosts if d is not master)
    via = next(d for d in hosts if d not in (master, victim))
    via_addr = f"127.0.0.1:{via.s.listen[1]}"
    gone = victim.s.host_id
    await victim.close()  # the machine is gone for good

    rc, out, err = await m2mc("retire", "--id", gone, "--via", via_addr, key=key)
    assert rc == 0 and err == "", err
    assert out.startswith(f"m2mc host retire: {gone} retired: committed at log position")
    assert "(quorum 2 of 2)" in out and out.count("\n") == 1
    for d in (master, via):
        assert d.core is not None and d.core.retired == {gone}
        assert d.core.directory.quorum() == 2

    rc, out, err = await m2mc("show", "--via", via_addr, key=key)
    view = json.loads(out)
    assert rc == 0 and view["retired"] == [gone] and view["master"] == master.s.host_id
    assert view["hosts"] == sorted([master.s.host_id, via.s.host_id])

    for args, text in ((["retire", "--id", gone], f"{gone} is already retired"),
                       (["retire", "--id", "H9"], "'H9' is not a host of this deployment"),
                       (["readmit", "--id", via.s.host_id], f"{via.s.host_id} is not retired")):
        rc, out, err = await m2mc(*args, "--via", via_addr, key=key)
        assert rc == 2 and out == "" and err.count("\n") == 1 and text in err, (args, err)

    # Without the deployment key the host opens nothing: no answer, exit status 1.
    rc, out, err = await m2mc("retire", "--id", via.s.host_id, "--via", via_addr,
                              "--timeout", "2", key=None)
    assert rc == 1 and "no answer" in err and err.count("\n") == 1
    assert via.core is not None and via.core.retired == {gone}

    # The retired host comes back: refused, told, it stops.
    back = driver(int(gone[1:]))
    await back.start()
    try:
        await until(back.retired.is_set, "the retired host to learn it")
        assert back.core is not None and "retired at log position" in back.core.retired_self
    finally:
        await back.close()
    assert master.core is not None and master.core.stats.retired_refused > 0

    rc, out, err = await m2mc("readmit", "--id", gone, "--via", via_addr, key=key)
    assert rc == 0 and f"{gone} readmitted" in out and "(quorum 2 of 3)" in out, err
    again = driver(int(gone[1:]))
    await again.start()
    try:
        await until(lambda: master.core is not None
                    and gone in master.core.directory.live(), "the readmitted host")
        assert not again.retired.is_set()
    finally:
        await again.close()
