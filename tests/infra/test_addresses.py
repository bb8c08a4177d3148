"""Infrastructure mode takes any address its operator names, and trusts an address
from the network for who gave it, not for its class (docs/security.md,
"Infrastructure mode"): a forged beacon or status naming a third party's address
never makes a member or a host send there. Everything here stays on loopback; the
"third party" is another loopback address with nothing of ours on it."""

from __future__ import annotations

import asyncio
import os
import random

import pytest

from m2mc.cli import main
from m2mc.infra import messages as m
from m2mc.infra.codec import encode
from m2mc.infra.config import InfraConfig
from m2mc.infra.ids import NO_EPOCH
from m2mc.infra.member import MemberCore
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings, settings_from_strings

BASE = 15000 + (os.getpid() % 400) * 4
CELL = f"udp-multicast://239.255.61.{1 + os.getpid() % 200}:{BASE}?iface=127.0.0.1&ttl=1"


def beacon(uplink: str) -> bytes:
    return encode(m.Beacon("G1", 0, uplink, "G1"))


def test_a_member_follows_a_beacon_only_from_the_uplink_it_names() -> None:
    core = MemberCore("A", InfraConfig(), random.Random(1))
    core.on_attach("cell", 0.0)
    core.join(0.0)
    assert not core.receive_frame(beacon("198.51.100.9:53"), 0.0, origin="10.77.0.1:7301")
    assert core.stats.uplink_mismatch == 1 and core.gateway is None
    assert not any(u.addr == "198.51.100.9:53" for u in core.drain())  # nothing sent there
    assert core.receive_frame(beacon("10.77.0.1:7301"), 0.1, origin="10.77.0.1:7301")
    assert core.gateway == "G1" and core.gateway_addr == "10.77.0.1:7301"
    assert {u.addr for u in core.drain()} == {"10.77.0.1:7301"}
    # without an origin (the simulator) the beacon is taken as it is
    other = MemberCore("B", InfraConfig(), random.Random(2))
    other.on_attach("cell", 0.0)
    assert other.receive_frame(beacon("anything"), 0.0) and other.gateway == "G1"


def test_the_uplink_defaults_to_the_cells_interface_and_ipv6_is_for_the_backbone() -> None:
    cell = "udp-multicast://239.255.20.1:7711?iface=10.77.0.1&ttl=1"
    s = settings_from_strings("H1", "10.77.0.1:7101", cell, None, ["10.77.0.2:7101"],
                              InfraConfig(), None, "")
    assert s.listen == ("10.77.0.1", 7101) and s.uplink == ("10.77.0.1", 0)
    assert s.peers == [("10.77.0.2", 7101)]
    s6 = settings_from_strings("H1", "[::1]:7101", cell, None, ["[::1]:7102"], InfraConfig(),
                               None, "")
    assert s6.listen == ("::1", 7101) and s6.uplink == ("10.77.0.1", 0)


def test_m2mc_host_refuses_what_is_no_host_address_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    cell = "udp-multicast://239.255.20.1:7711?iface=127.0.0.1&ttl=1"
    for flags, text in ((["--listen", "0.0.0.0:7101"], "--listen: 0.0.0.0 is the unspecified"),
                        (["--listen", "127.0.0.1:7101", "--uplink", "[::1]:7201"],
                         "--uplink: IPv6 is not supported"),
                        (["--listen", "127.0.0.1:7101", "--peer", "h2.example:7101"],
                         "--peer: 'h2.example' is not an IP address")):
        assert main(["host", *flags, "--cell", cell]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and text in err, err
        assert "only loopback" not in err


async def _listener(host: str) -> tuple[asyncio.Server, list[str]]:
    seen: list[str] = []

    def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(str(writer.get_extra_info("peername")[0]))
        writer.close()

    return await asyncio.start_server(accept, host, 0), seen


async def _say_status(port: int, name: str, address: str, adv_port: int,
                      local: str = "127.0.0.1") -> asyncio.StreamWriter:
    """Connect to a host's backbone from ``local``, announce ``name``, send its status."""
    _, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(local, 0))
    st = m.Status(name, 1, address, adv_port, "cell", "up", 0, (), "", NO_EPOCH, NO_EPOCH, 0, 0)
    for frame in (name.encode(), encode(st)):
        writer.write(len(frame).to_bytes(4, "big") + frame)
    await writer.drain()
    return writer


async def test_a_forged_status_cannot_point_a_host_at_a_third_party() -> None:
    """Unkeyed: a discovered host's backbone address is used only if that host really
    reached us from that IP (a live TCP connection announcing its id)."""
    third, third_seen = await _listener("127.0.0.2")  # a bystander: nothing of ours
    honest, honest_seen = await _listener("127.0.0.1")
    third_port = third.sockets[0].getsockname()[1]
    honest_port = honest.sockets[0].getsockname()[1]
    driver = HostDriver(HostSettings("H1", ("127.0.0.1", BASE + 1), CELL, ("127.0.0.1", 0)))
    await driver.start()
    writers = []
    try:
        assert driver.core is not None
        writers.append(await _say_status(BASE + 1, "H9", "127.0.0.2", third_port))
        writers.append(await _say_status(BASE + 1, "H8", "127.0.0.1", honest_port))
        loop = asyncio.get_running_loop()
        end = loop.time() + 5
        while {"H8", "H9"} - driver.core.directory.known:
            assert loop.time() < end
            await asyncio.sleep(0.01)
        assert driver._address("H9") is None  # named by a status from 127.0.0.1 only
        assert driver.untrusted_addresses == 1
        assert driver._address("H8") == ("127.0.0.1", honest_port)  # it came from there
        while not honest_seen:
            assert loop.time() < end
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # time enough for a connection attempt we must not make
        assert third_seen == [] and driver.stats()["untrusted_addresses"] == 1
    finally:
        for w in writers:
            w.close()
        await driver.close()
        third.close()
        honest.close()


async def test_a_keyed_host_connects_where_an_authenticated_status_says() -> None:
    """Keyed: the status is sealed by a key holder, so its address is used even if its
    host never connected to us (a multi-homed host may connect from another IP)."""
    from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
    from m2mc.security.auth import GroupAuth

    key = bytes(range(32))
    honest, honest_seen = await _listener("127.0.0.3")
    port = honest.sockets[0].getsockname()[1]
    driver = HostDriver(HostSettings("H1", ("127.0.0.1", BASE + 2), CELL, ("127.0.0.1", 0),
                                     key=key))
    await driver.start()
    try:
        assert driver.core is not None
        wire = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, key, "H7"))
        st = m.Status("H7", 1, "127.0.0.3", port, "cell", "up", 0, (), "", NO_EPOCH,
                      NO_EPOCH, 0, 0)
        driver.core.receive_backbone("H7", wire.encode(st), driver.now())
        assert driver._address("H7") == ("127.0.0.3", port)
        loop = asyncio.get_running_loop()
        end = loop.time() + 5
        while not honest_seen:
            assert loop.time() < end
            await asyncio.sleep(0.01)
    finally:
        await driver.close()
        honest.close()
