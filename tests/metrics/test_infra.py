"""Prometheus metrics in infrastructure mode, hosts and a member in this process on
loopback with a deployment key: the election as the hosts report it, a member's
messages, one unauthenticated frame counted once, and every counter of the member's
and the master's stats classes present in a scrape."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator

import pytest
from scrape import Scrape, scrape, unexported

from m2mc.api import Node, NodeConfig
from m2mc.infra import messages as msg
from m2mc.infra.codec import encode
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings
from m2mc.metrics import catalogue as cat
from m2mc.security.keys import GroupKey, generate_key

BASE = 12000 + (os.getpid() % 400) * 4
CELLS = [f"udp-multicast://239.255.{70 + i}.{1 + os.getpid() % 200}:{BASE + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(2)]
BACKBONE = [("127.0.0.1", BASE + 2 + i) for i in range(2)]
KEY = generate_key()


@pytest.fixture
async def hosts() -> AsyncIterator[list[HostDriver]]:
    drivers = [HostDriver(HostSettings(f"H{i}", BACKBONE[i], CELLS[i], ("127.0.0.1", 0),
                                       [b for j, b in enumerate(BACKBONE) if j != i],
                                       key=GroupKey(key=KEY), metrics="127.0.0.1:0"))
               for i in range(2)]
    try:
        for d in drivers:
            await d.start()
        loop = asyncio.get_running_loop()
        end = loop.time() + 20
        while not any(d.core is not None and d.core.coordinator is not None for d in drivers):
            assert loop.time() < end, "no coordinator elected"
            await asyncio.sleep(0.05)
        yield drivers
    finally:
        for d in drivers:
            await d.close()


async def _scrape(driver: HostDriver | Node) -> Scrape:
    address = driver.metrics.address if isinstance(driver, HostDriver) and driver.metrics \
        else getattr(driver, "metrics_address", None)
    assert address is not None
    return await asyncio.to_thread(scrape, address)


async def _agreed_master(hosts: list[HostDriver]) -> tuple[HostDriver, list[Scrape]]:
    """Scrapes of every host, taken once they agree: all name one master, which says it
    is the master, and see each other live. On loaded cores the second host can learn
    of the first election late, or a missed heartbeat can elect again, between the
    election the fixture waited for and the scrapes; what must hold is that they come
    to agree (within 30 s)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + 30
    while True:
        scraped = [await _scrape(d) for d in hosts]
        named = [{lab.get("master") for lab, v in got.series("m2mc_host_master") if v == 1}
                 for got in scraped]
        masters = [d for d, got in zip(hosts, scraped, strict=True)
                   if got.value("m2mc_host_is_master") == 1]
        if (len(masters) == 1 and all(n == {masters[0].s.host_id} for n in named)
                and all(got.value("m2mc_host_has_master") == 1
                        and got.value("m2mc_host_hosts_live") == len(hosts) for got in scraped)):
            return masters[0], scraped
        assert loop.time() < end, f"the hosts do not agree on a master: {named}"
        await asyncio.sleep(0.1)


async def test_hosts_report_the_elected_master_and_the_member_its_messages(
        hosts: list[HostDriver]) -> None:
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS), infra_key=GroupKey(key=KEY),
                     metrics="127.0.0.1:0")
    async with Node(cfg, pid="alice") as alice:
        group = await alice.create_group("chat", order="total")
        for i in range(5):
            await group.send(f"message {i}")
        for _ in range(5):
            await group.receive(timeout=15)
        member = await _scrape(alice)
        assert member.value("m2mc_messages_sent_total", node="alice") == 5
        assert member.value("m2mc_messages_delivered_total", node="alice") == 5
        assert member.value("m2mc_member_phase", phase="member") == 1
        assert member.value("m2mc_member_phase", phase="idle") == 0
        assert member.value("m2mc_auth_opened_total", group="chat") > 0
        assert member.value("m2mc_auth_failures_total") == 0
        assert member.value("m2mc_node_info", mode="member") == 1
        assert unexported(member, "member", (cat.MEMBER, cat.WIRE, cat.AUTH)) == []

        # Every host names the same master; exactly one is it; elections were counted.
        master, scraped = await _agreed_master(hosts)
        for got in scraped:
            assert got.value("m2mc_host_master", master=master.s.host_id) == 1
            assert got.value("m2mc_host_has_master") == 1
            assert got.value("m2mc_host_elections_total") >= 1
            assert got.value("m2mc_host_epoch") >= 1
            assert got.value("m2mc_host_hosts_live") == 2
        assert sum(got.value("m2mc_host_is_master") for got in scraped) == 1
        on_master = scraped[hosts.index(master)]
        assert on_master.value("m2mc_coordinator_sequenced_total") >= 5
        assert unexported(on_master, "host", (cat.HOST, cat.GATEWAY, cat.COORDINATOR,
                                              cat.WIRE, cat.AUTH, cat.RATE_LIMIT)) == []

        # One frame without the deployment key's seal, straight to the master's uplink.
        assert master.core is not None
        host, port = master.core.ident.uplink.rsplit(":", 1)
        before = (await _scrape(master)).value("m2mc_auth_failures_total")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as outsider:
            outsider.sendto(encode(msg.Hello("mallory", master.s.host_id, None, 0)),
                            (host, int(port)))
        loop = asyncio.get_running_loop()
        end = loop.time() + 15
        while (got := await _scrape(master)).value("m2mc_auth_failures_total") == before:
            assert loop.time() < end, "the unauthenticated frame was not counted"
            await asyncio.sleep(0.05)
        assert got.value("m2mc_auth_failures_total") == before + 1
        assert got.value("m2mc_auth_refused_total", group="infra",
                         reason="unauthenticated") == before + 1


RETIRE_BASE = 19000 + (os.getpid() % 300) * 8
RETIRE_CELLS = [f"udp-multicast://239.255.{95 + i}.{1 + os.getpid() % 200}:{RETIRE_BASE + i}"
                "?iface=127.0.0.1&ttl=1" for i in range(3)]
RETIRE_BACKBONE = [("127.0.0.1", RETIRE_BASE + 4 + i) for i in range(3)]


def _retire_host(i: int) -> HostDriver:
    return HostDriver(HostSettings(f"H{i}", RETIRE_BACKBONE[i], RETIRE_CELLS[i],
                                   ("127.0.0.1", 0),
                                   [b for j, b in enumerate(RETIRE_BACKBONE) if j != i],
                                   metrics="127.0.0.1:0"))


async def _scrape_until(driver: HostDriver, condition: object, what: str) -> Scrape:
    loop = asyncio.get_running_loop()
    end = loop.time() + 30
    while not condition(got := await _scrape(driver)):  # type: ignore[operator]
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)
    return got


async def test_a_retirement_shrinks_the_configuration_and_quorum_every_host_reports() -> None:
    from m2mc.infra_runtime.admin_client import admin_request

    hosts = [_retire_host(i) for i in range(3)]
    back: HostDriver | None = None
    try:
        for d in hosts:
            await d.start()
        for d in hosts:
            got = await _scrape_until(d, lambda g: g.value("m2mc_host_has_master") == 1
                                      and g.value("m2mc_host_hosts_live") == 3, "three hosts")
            assert got.value("m2mc_host_configuration_hosts") == 3
            assert got.value("m2mc_host_quorum") == 2
            assert got.value("m2mc_host_retired_hosts") == 0
            assert got.value("m2mc_queue_limit", queue="admin_requests", group="") == 16
        master = next(d for d in hosts if d.core is not None and d.core.coordinator is not None)
        victim = next(d for d in hosts if d is not master)
        survivors = [d for d in hosts if d is not victim]
        await victim.close()  # the machine is gone for good
        for d in survivors:  # the alarm an operator sees: a host of the configuration is down
            got = await _scrape_until(d, lambda g: g.value("m2mc_host_hosts_live") == 2,
                                      "the dead host")
            assert got.value("m2mc_host_hosts_live") < got.value(
                "m2mc_host_configuration_hosts")

        _, result = await admin_request(survivors[-1].s.listen, msg.OP_RETIRE,
                                        victim.s.host_id)
        assert result.code == "ok", result.text
        for d in survivors:  # retired: the configuration has two hosts, both live
            got = await _scrape_until(d, lambda g: g.value("m2mc_host_retired_hosts") == 1,
                                      "the committed retirement")
            assert got.value("m2mc_host_configuration_hosts") == 2
            assert got.value("m2mc_host_quorum") == 2
            assert got.value("m2mc_host_hosts_live") == got.value(
                "m2mc_host_configuration_hosts")

        # The retired host comes back: its frames are refused, it is told, it stops.
        back = _retire_host(int(victim.s.host_id[1:]))
        await back.start()
        await asyncio.wait_for(back.retired.wait(), 30)
        got = await _scrape(master)
        assert got.value("m2mc_host_retired_refused_total") > 0
        assert got.value("m2mc_host_retired_notices_total") > 0
    finally:
        for d in hosts:
            await d.close()
        if back is not None:
            await back.close()
