"""The M2MP daemon server (seeds/002 section 1 Figure 1, section 3): asyncio glue
around :class:`~m2mc.transport.router.DaemonRouter`.

Local processes connect over TCP on 127.0.0.1 and exchange length-prefixed
datagrams (:mod:`m2mc.transport.frames`); the external channel is any channel
URL. Bounds: ``max_clients`` connections (more are closed at once, counted);
``max_client_buffer`` bytes unsent to one slow client (beyond it datagrams for
that client are dropped and counted: the medium is lossy, the daemon must not
grow without bound); ``max_external_backlog`` datagrams waiting for the
external channel (beyond it, dropped and counted).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from m2mc.errors import ConfigError
from m2mc.log import node_logger
from m2mc.transport.channel import Channel, ChannelClosedError
from m2mc.transport.frames import FrameDecoder, encode_frame
from m2mc.transport.router import DaemonRouter, Route
from m2mc.transport.url import DaemonSpec, open_channel, parse_channel_url


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
        self.client = self.daemon._connected(self)
        if self.client is None:
            transport.close()

    def data_received(self, data: bytes) -> None:
        client = self.client
        if client is None:
            return
        daemon = self.daemon
        for datagram in self.decoder.feed(data):
            daemon._from_client(client, datagram)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client is not None:
            self.daemon._disconnected(self.client)
        self.transport = None


class M2MPDaemon:
    """``async with M2MPDaemon("udp-multicast://...", port=5678) as daemon: ...``"""

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
        self._log = node_logger("m2mc.transport.daemon", node)
        self._clients: dict[int, _ClientProtocol] = {}
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._backlog: deque[bytes] = deque()
        self._stopped: asyncio.Event | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            return self._requested_port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        await self.external.start()
        try:
            self._server = await self._loop.create_server(
                lambda: _ClientProtocol(self), self.host, self._requested_port,
                reuse_address=True)
        except OSError as exc:
            await self.external.close()
            raise ConfigError(f"cannot listen on {self.host}:{self._requested_port}: "
                              f"{exc.strerror or exc}") from None
        self._reader = self._loop.create_task(self._read_external())
        self._log.info("listening on %s:%d, external channel %s",
                       self.host, self.port, self.external.url)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for protocol in list(self._clients.values()):
            if protocol.transport is not None:
                protocol.transport.close()
        for task in (self._reader, self._writer):
            if task is not None and not task.done():
                task.cancel()
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
        return len(self._backlog)

    def stats_dict(self) -> dict[str, object]:
        stats: dict[str, object] = dict(self.router.stats.as_dict())
        stats.update(clients=len(self._clients), client_overflow=self.stats.client_overflow,
                     external_overflow=self.stats.external_overflow)
        stats.update({f"external_{k}": v for k, v in self.external.stats.as_dict().items()})
        return stats

    # ---------------------------------------------------------------- routing
    def _connected(self, protocol: _ClientProtocol) -> int | None:
        client = self.router.connect()
        if client is None:
            self._log.warning("refused a client: %d connected", len(self._clients))
            return None
        self._clients[client] = protocol
        self.stats.clients_connected += 1
        return client

    def _disconnected(self, client: int) -> None:
        self.router.disconnect(client)
        self._clients.pop(client, None)

    def _now(self) -> float:
        assert self._loop is not None
        return self._loop.time()

    def _from_client(self, client: int, datagram: bytes) -> None:
        route = self.router.from_client(client, datagram, self._now())
        if route is not None:
            self._dispatch(route)

    def _dispatch(self, route: Route) -> None:
        frame = encode_frame(route.datagram)
        limit = self.max_client_buffer
        clients = self._clients
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
            self._to_network(route.datagram)

    def _to_network(self, datagram: bytes) -> None:
        backlog = self._backlog
        if not backlog:
            try:
                if self.external.send_nowait(datagram):
                    return
            except ChannelClosedError:
                return
        if len(backlog) >= self.max_external_backlog:
            self.stats.external_overflow += 1
            return
        backlog.append(datagram)
        if self._writer is None or self._writer.done():
            assert self._loop is not None
            self._writer = self._loop.create_task(self._write_external())

    async def _write_external(self) -> None:
        backlog = self._backlog
        try:
            while backlog:
                await self.external.send(backlog[0])
                backlog.popleft()
        except ChannelClosedError:
            backlog.clear()

    async def _read_external(self) -> None:
        router, external = self.router, self.external
        try:
            while True:
                batch = await external.recv_many()
                now = self._now()
                for datagram in batch:
                    route = router.from_network(datagram, now)
                    if route is not None:
                        self._dispatch(route)
        except ChannelClosedError:
            self._log.warning("external channel %s closed", external.url)
            if self._stopped is not None:
                self._stopped.set()
