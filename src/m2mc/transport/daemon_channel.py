"""``daemon://127.0.0.1:PORT`` channel: through the local M2MP daemon (seeds/002 section 1, 3).

One TCP connection to the daemon carries length-prefixed datagrams both ways.
The daemon sends every datagram we send back to us as well (our loopback), so
the M2MP flow control works over this channel exactly as over multicast.
"""

from __future__ import annotations

import asyncio
import contextlib

from m2mc.errors import ConfigError
from m2mc.transport.channel import DEFAULT_MAX_INBOUND, Channel, ChannelClosedError
from m2mc.transport.frames import FrameDecoder, encode_frame
from m2mc.transport.url_syntax import DaemonSpec

_CLOSE_TIMEOUT = 2.0  # seconds to let buffered frames reach the daemon on close


class _ClientProtocol(asyncio.Protocol):
    def __init__(self, channel: DaemonChannel) -> None:
        self.channel = channel
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self._resumed: asyncio.Future[None] | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        deliver = self.channel._deliver
        for datagram in self.decoder.feed(data):
            deliver(datagram)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._release()
        if not self.lost.done():
            self.lost.set_result(None)
        self.channel._lost()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._release()

    async def wait_writable(self) -> None:
        if self.paused and self.transport is not None:
            future = self._resumed = asyncio.get_running_loop().create_future()
            await future

    def _release(self) -> None:
        future, self._resumed = self._resumed, None
        if future is not None and not future.done():
            future.set_result(None)


class DaemonChannel(Channel):
    def __init__(self, spec: DaemonSpec, url: str, *,
                 max_inbound: int = DEFAULT_MAX_INBOUND) -> None:
        super().__init__(url, max_inbound=max_inbound)
        self.spec = spec
        self._protocol: _ClientProtocol | None = None
        self._closing: _ClientProtocol | None = None

    @property
    def loops_back(self) -> bool:
        return True

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        protocol = _ClientProtocol(self)
        try:
            await loop.create_connection(lambda: protocol, self.spec.host, self.spec.port)
        except OSError as exc:
            raise ConfigError(
                f"no M2MP daemon at {self.spec.host}:{self.spec.port} "
                f"({exc.strerror or exc}); start one with: m2mc daemon --port {self.spec.port}"
            ) from None
        self._protocol = protocol

    def _shutdown(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()  # flushes what is buffered, then disconnects
        self._closing = protocol

    async def _after_shutdown(self) -> None:
        protocol, self._closing = self._closing, None
        if protocol is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(protocol.lost), _CLOSE_TIMEOUT)

    def send_nowait(self, datagram: bytes) -> bool:
        protocol = self._protocol
        if protocol is None or protocol.transport is None:
            raise ChannelClosedError(f"channel {self.url} is closed")
        if protocol.paused:
            return False
        protocol.transport.write(encode_frame(datagram))
        self.stats.datagrams_out += 1
        return True

    async def send(self, datagram: bytes) -> None:
        while not self.send_nowait(datagram):
            protocol = self._protocol
            assert protocol is not None
            await protocol.wait_writable()
