"""The daemon in-process: local endpoints through daemon://, the network on mem://."""

from __future__ import annotations

import asyncio

import pytest

from m2mc.errors import ConfigError
from m2mc.runtime.daemon import M2MPDaemon
from m2mc.runtime.endpoint import M2MPEndpoint
from m2mc.transport.channel import ChannelClosedError

DEADLINE = 5.0


async def test_local_processes_and_the_network_each_get_everything_but_their_own() -> None:
    async with M2MPDaemon("mem://net1", port=0) as daemon:
        url = f"daemon://127.0.0.1:{daemon.port}"
        locals_ = [M2MPEndpoint(url, filters=[b""]) for _ in range(3)]
        device = M2MPEndpoint("mem://net1", filters=[b""])  # another device on the network
        everyone = [*locals_, device]
        for endpoint in everyone:
            await endpoint.start()
        try:
            for index, endpoint in enumerate(everyone):
                await endpoint.send(f"from {index}".encode() + bytes(index * 600))
            for index, endpoint in enumerate(everyone):
                got = sorted([(await asyncio.wait_for(endpoint.receive(), DEADLINE)).payload
                              for _ in range(3)])
                want = sorted(f"from {i}".encode() + bytes(i * 600) for i in range(4)
                              if i != index)
                assert got == want
            for endpoint in locals_:
                assert endpoint.config.flow_control  # the daemon's echo is the loopback
                assert endpoint.stats["flow_timeouts"] == 0
            stats = daemon.stats_dict()
            assert stats["clients"] == 3
            assert stats["own_loopback"] == stats["external_datagrams_out"]
        finally:
            for endpoint in everyone:
                await endpoint.close()


async def test_endpoint_sees_the_daemon_go_away() -> None:
    daemon = M2MPDaemon("null://", port=0)
    await daemon.start()
    endpoint = M2MPEndpoint(f"daemon://127.0.0.1:{daemon.port}", filters=[b""])
    await endpoint.start()
    try:
        await daemon.close()
        with pytest.raises(ChannelClosedError):
            await asyncio.wait_for(endpoint.receive(), DEADLINE)
    finally:
        await endpoint.close()


async def test_clients_beyond_the_bound_are_refused() -> None:
    async with M2MPDaemon("null://", port=0, max_clients=1) as daemon:
        url = f"daemon://127.0.0.1:{daemon.port}"
        async with M2MPEndpoint(url):
            second = M2MPEndpoint(url, filters=[b""])
            await second.start()
            with pytest.raises(ChannelClosedError):
                await asyncio.wait_for(second.receive(), DEADLINE)
            await second.close()
        assert daemon.router.stats.clients_refused == 1


async def test_no_daemon_is_a_config_error_naming_the_port() -> None:
    async with M2MPDaemon("null://", port=0) as daemon:
        port = daemon.port
    with pytest.raises(ConfigError, match=f"no M2MP daemon at 127.0.0.1:{port}"):
        await M2MPEndpoint(f"daemon://127.0.0.1:{port}").start()


def test_daemon_cannot_use_itself_as_external_channel() -> None:
    with pytest.raises(ConfigError, match="daemon itself"):
        M2MPDaemon("daemon://127.0.0.1:5999", port=5999)
