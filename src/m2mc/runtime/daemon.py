"""The M2MP daemon server (seeds/002 section 1 Figure 1, section 3): the sans-IO
:class:`~m2mc.transport.router.DaemonRouter` run by the one asyncio driver
(runtime/driver.py), with the local processes and the external channel as its links.

Local processes connect over TCP on 127.0.0.1 and exchange length-prefixed
datagrams (:mod:`m2mc.transport.frames`); the external channel is any channel
URL, read and written by a :class:`~m2mc.runtime.channel_link.ChannelLink`. What
arrives from either side goes into the router; the driver's output step then hands
the routes to :meth:`M2MPDaemon.transmit`, which writes each datagram to its
clients and the external channel. Bounds: ``max_clients`` connections (more are
closed at once, counted); ``max_client_buffer`` bytes unsent to one slow client
(beyond it datagrams for that client are dropped and counted: the medium is lossy,
the daemon must not grow without bound); ``max_external_backlog`` datagrams waiting
for the external channel (beyond it, dropped and counted).

It lived in ``m2mc.transport`` before; the driver is a layer above the channels.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from m2mc.errors import ConfigError
from m2mc.log import node_logger
from m2mc.runtime.channel_link import ChannelLink
from m2mc.runtime.driver import Driver
from m2mc.transport.channel import Channel, ChannelClosedError
from m2mc.transport.frames import FrameDecoder, encode_frame
from m2mc.transport.router import DaemonRouter, Route
from m2mc.transport.url import DaemonSpec, open_channel, parse_channel_url

_NONE: list[Route] = []  # (never appended to)


@dataclass(slots=True)
class DaemonStats:
    clients_connected: int = 0
    client_overflow: int = 0
    external_overflow: int = 0


class _ClientProtocol(asyncio.Protocol):
    def __init__(self, daemon: M2MPDaemon) -> None:
        self.daemon = daemon
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.client: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.client = self.daemon.connected(self)
        if self.client is None:
            transport.close()

    def data_received(self, data: bytes) -> None:
        client = self.client
        if client is None:
            return
        self.daemon.from_client(client, self.decoder.feed(data))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client is not None:
            self.daemon.disconnected(self.client)
        self.transport = None


class M2MPDaemon:
    """``async with M2MPDaemon("udp-multicast://...", port=5678) as daemon: ...``

    The router's adapter for :class:`~m2mc.runtime.driver.Driver`: ``open_links``,
    ``take_output``, ``transmit`` and ``close_links`` are the driver's to call."""

    def __init__(self, external: str | Channel, *, host: str = "127.0.0.1", port: int = 5678,
                 max_clients: int = 64, max_client_buffer: int = 1 << 20,
                 max_external_backlog: int = 4096, node: str = "-") -> None:
        if isinstance(external, str):
            spec = parse_channel_url(external)
            if isinstance(spec, DaemonSpec) and spec.port == port:
                raise ConfigError(f"the daemon's external channel {external} is the daemon itself")
            external = open_channel(spec)
        self.external = external
        self.host = host
        self._requested_port = port
        self.max_client_buffer = max_client_buffer
        self.max_external_backlog = max_external_backlog
        self.router = DaemonRouter(external_loops_back=external.loops_back,
                                   max_clients=max_clients)
        self.stats = DaemonStats()
        self._log = node_logger("m2mc.runtime.daemon", node)
        self._clients: dict[int, _ClientProtocol] = {}
        self._server: asyncio.Server | None = None
        self._routes: list[Route] = []  # the router's output since the last output step
        self._link = ChannelLink(external, self._from_network, on_lost=self._on_lost)
        self._driver = Driver(self.router, self)
        self._stopped: asyncio.Event | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            return self._requested_port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._stopped = asyncio.Event()
        await self._driver.start()
        self._log.info("listening on %s:%d, external channel %s",
                       self.host, self.port, self.external.url)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for protocol in list(self._clients.values()):
            if protocol.transport is not None:
                protocol.transport.close()
        if self._driver.started:
            await self._driver.close()
        else:
            await self.external.close()
        if self._stopped is not None:
            self._stopped.set()

    async def serve_forever(self) -> None:
        assert self._stopped is not None
        await self._stopped.wait()

    async def __aenter__(self) -> M2MPDaemon:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def external_backlog(self) -> int:
        """Datagrams waiting for the external channel (at most ``max_external_backlog``)."""
        return self._link.backlog

    def stats_dict(self) -> dict[str, object]:
        stats: dict[str, object] = dict(self.router.stats.as_dict())
        stats.update(clients=len(self._clients), client_overflow=self.stats.client_overflow,
                     external_overflow=self.stats.external_overflow)
        stats.update({f"external_{k}": v for k, v in self.external.stats.as_dict().items()})
        return stats

    # ------------------------------------------------------------ the clients
    def connected(self, protocol: _ClientProtocol) -> int | None:
        """A local process connected: its client id, or None if it is refused."""
        client = self.router.connect()
        if client is None:
            self._log.warning("refused a client: %d connected", len(self._clients))
            return None
        self._clients[client] = protocol
        self.stats.clients_connected += 1
        return client

    def disconnected(self, client: int) -> None:
        self.router.disconnect(client)
        self._clients.pop(client, None)

    def from_client(self, client: int, datagrams: Sequence[bytes]) -> None:
        """Datagrams from one read of a local process: routed, then sent on at once."""
        if not datagrams:
            return
        driver = self._driver
        now = driver.now()
        router, routes = self.router, self._routes
        for datagram in datagrams:
            route = router.from_client(client, datagram, now)
            if route is not None:
                routes.append(route)
        driver.poke()

    def _from_network(self, batch: Sequence[bytes], now: float) -> None:
        """A batch from the external channel (the link then runs the output step)."""
        router, routes = self.router, self._routes
        for datagram in batch:
            route = router.from_network(datagram, now)
            if route is not None:
                routes.append(route)

    def _on_lost(self, exc: ChannelClosedError) -> None:
        if self._stopped is not None and not self._stopped.is_set():
            self._log.warning("external channel %s closed", self.external.url)
            self._stopped.set()

    # ------------------------------------------------------ adapter (driver.py)
    async def open_links(self, driver: Driver) -> None:
        await self._link.open(driver)
        try:
            self._server = await driver.loop.create_server(
                lambda: _ClientProtocol(self), self.host, self._requested_port,
                reuse_address=True)
        except OSError as exc:
            await self._link.close()
            raise ConfigError(f"cannot listen on {self.host}:{self._requested_port}: "
                              f"{exc.strerror or exc}") from None

    def take_output(self, now: float) -> list[Route]:
        routes = self._routes
        if not routes:
            return _NONE
        self._routes = []
        return routes

    def transmit(self, routes: list[Route], now: float) -> int:
        """Each route's datagram to its clients, then the network's share to the
        external channel; returns how many of those went at once."""
        network: list[bytes] = []
        limit = self.max_client_buffer
        clients = self._clients
        for route in routes:
            frame = encode_frame(route.datagram)
            for client in route.clients:
                protocol = clients.get(client)
                transport = protocol.transport if protocol is not None else None
                if transport is None:
                    continue
                if transport.get_write_buffer_size() > limit:
                    self.stats.client_overflow += 1
                    continue
                transport.write(frame)
            if route.network:
                network.append(route.datagram)
        return self._to_network(network, now) if network else 0

    def _to_network(self, datagrams: list[bytes], now: float) -> int:
        """Hand ``datagrams`` to the link, dropping (and counting) those that would
        take the external backlog past ``max_external_backlog``."""
        link, bound = self._link, self.max_external_backlog
        if link.backlog + len(datagrams) <= bound:
            return link.send(datagrams, now)
        sent = 0
        for datagram in datagrams:
            if link.backlog >= bound:
                self.stats.external_overflow += 1
                continue
            sent += link.send([datagram], now)
        return sent

    async def close_links(self) -> None:
        await self._link.close()
