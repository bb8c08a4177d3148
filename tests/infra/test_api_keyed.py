"""A keyed deployment through the application API and ``m2mc host`` (docs/security.md,
"Infrastructure mode"): hosts and members holding the deployment key talk; a member
without it never becomes a member, and the hosts count its frames as refused."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.infra import messages as m
from m2mc.infra.codec import encode
from m2mc.infra.ids import MemberId
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings
from m2mc.security.keys import GroupKey, generate_key

BASE = 9900 + (os.getpid() % 300) * 2
CELLS = [f"udp-multicast://239.255.{60 + i}.{1 + os.getpid() % 200}:{BASE + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(2)]
BACKBONE = [("127.0.0.1", BASE + 10 + i) for i in range(2)]
KEY = generate_key()


@pytest.fixture
async def keyed_hosts() -> AsyncIterator[list[HostDriver]]:
    drivers = [HostDriver(HostSettings(f"H{i}", BACKBONE[i], CELLS[i], ("127.0.0.1", 0),
                                       [b for j, b in enumerate(BACKBONE) if j != i],
                                       key=GroupKey(key=KEY)))
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


async def test_keyed_members_talk_and_an_outsider_cannot_join(
        keyed_hosts: list[HostDriver]) -> None:
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS))
    async with Node(cfg, pid="alice", infra_key=GroupKey(key=KEY)) as alice, \
            Node(cfg, pid="bob", infra_cell=CELLS[1]) as bob, \
            Node(cfg, pid="mallory") as mallory:
        ga = await alice.create_group("chat")
        gb = await bob.join("chat", timeout=10, key=KEY)  # the key at join, as in ad hoc mode
        assert ga.authenticated and gb.authenticated and bob.authenticated
        gm = await mallory.join("chat", timeout=1.5)  # no key: never admitted
        assert not gm.authenticated and mallory.members("chat") == []
        await ga.send("sealed")
        got = await gb.receive(timeout=10)
        assert got.text == "sealed" and got.sender == "alice"
        assert mallory.stats()["delivered"] == 0
        assert mallory.stats()["frames_unkeyed_sealed"] > 0  # it hears sealed beacons only
        # It never learns where to send; an outsider that knows sends plain JOINs:
        h0 = keyed_hosts[0]
        assert h0.core is not None
        host, port = h0.core.ident.uplink.rsplit(":", 1)
        join = encode(m.JoinReq("mallory", "H0", 1, MemberId("mallory", 1)))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for _ in range(5):
                sock.sendto(join, (host, int(port)))
        loop = asyncio.get_running_loop()
        end = loop.time() + 10
        while h0.stats()["auth_unauthenticated"] < 5 and loop.time() < end:
            await asyncio.sleep(0.02)
        assert h0.stats()["auth_unauthenticated"] == 5  # refused and counted
        assert all("mallory" not in d.core.gateway.local for d in keyed_hosts if d.core)
        opened = [d.stats()["auth_opened"] for d in keyed_hosts]
        assert all(n > 0 for n in opened)


def test_host_key_options(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "m2mc.cli", "host", "--listen", f"127.0.0.1:{BASE + 20}",
           "--cell", CELLS[0], "--run-for", "0.3"]
    key_file = tmp_path / "deploy.key"
    key_file.write_text(KEY)
    key_file.chmod(0o644)
    r = subprocess.run([*run, "--key-file", str(key_file)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "chmod 600" in r.stderr and r.stderr.count("\n") == 1
    key_file.chmod(0o600)
    r = subprocess.run([*run, "--key-file", str(key_file)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "authenticated (hmac-sha256)" in r.stderr, r.stderr
    r = subprocess.run([*run, "--suite", "aes-256-gcm"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "--suite needs a key" in r.stderr
    r = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "unauthenticated" in r.stderr
