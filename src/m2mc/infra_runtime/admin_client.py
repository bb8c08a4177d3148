"""The operator's side of ``m2mc host show|retire|readmit``: one request to a live
host over its backbone (docs/infra.md, "Retiring a host").

The command line connects to the host's backbone address, announces a fresh name
(``operator-<random>``), and sends :class:`~m2mc.infra.messages.AdminRequest`
frames; the host answers on the same connection. In a keyed deployment every frame
is sealed with the deployment key (the operator holds it; a host refuses a request
it cannot open), and the change itself is sealed for the host that answered the
first request, so a recorded copy is refused by every other host.
"""

from __future__ import annotations

import asyncio
import secrets
import struct
from typing import Any

from m2mc.errors import DecodeError
from m2mc.infra import messages as msg
from m2mc.infra.wire import InfraWire
from m2mc.infra_runtime.keying import deployment_wire
from m2mc.infra_runtime.net import MAX_FRAME, FrameReader

_LEN = struct.Struct(">I")


class AdminUnreachable(Exception):
    """The host could not be reached, or did not answer in time (exit status 1)."""


class AdminClient:
    def __init__(self, via: tuple[str, int], key: Any = None, timeout: float = 15.0) -> None:
        self.via = via
        self.timeout = timeout
        self.name = f"operator-{secrets.token_hex(6)}"
        self.wire: InfraWire = deployment_wire(key, self.name)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._frames = FrameReader(MAX_FRAME, peer="host")
        self._got: list[bytes] = []
        self._request = 0

    async def __aenter__(self) -> AdminClient:
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(*self.via), self.timeout)
        except (OSError, TimeoutError) as exc:
            where = f"{self.via[0]}:{self.via[1]}"
            raise AdminUnreachable(f"cannot reach a host at {where}: "
                                   f"{getattr(exc, 'strerror', None) or exc or 'timed out'}"
                                   ) from None
        self._send(self.name.encode())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()

    def _send(self, frame: bytes) -> None:
        assert self._writer is not None
        self._writer.write(_LEN.pack(len(frame)) + frame)

    async def call(self, op: int, target: str = "", to: str = "") -> msg.AdminResult:
        """One request (sealed for host ``to`` when known); its answer."""
        self._request += 1
        request = self._request
        self._send(self.wire.encode(msg.AdminRequest(self.name, request, op, target), to))
        loop = asyncio.get_running_loop()
        end = loop.time() + self.timeout
        assert self._reader is not None
        while True:
            while self._got:
                try:
                    m, _ = self.wire.decode(self._got.pop(0))
                except DecodeError:
                    continue  # not for us, or not genuine
                if isinstance(m, msg.AdminResult) and m.request == request:
                    return m
            left = end - loop.time()
            if left <= 0:
                raise AdminUnreachable(f"no answer from {self.via[0]}:{self.via[1]} within "
                                       f"{self.timeout:g} s (wrong deployment key? no master?)")
            try:
                data = await asyncio.wait_for(self._reader.read(65536), left)
            except TimeoutError:
                continue
            if not data:
                raise AdminUnreachable(f"{self.via[0]}:{self.via[1]} closed the connection "
                                       "(not an m2mc host, or it refused us)")
            self._got += self._frames.feed(data)
            if self._frames.closed:
                raise AdminUnreachable(f"bad answer from {self.via[0]}:{self.via[1]}: "
                                       f"{self._frames.reason}")


async def admin_request(via: tuple[str, int], op: int, target: str, key: Any = None,
                        timeout: float = 15.0) -> tuple[msg.AdminResult, msg.AdminResult]:
    """Ask ``via`` for its view, then (unless ``op`` is OP_SHOW) for the change, sealed for
    the host that answered; returns (view, result)."""
    async with AdminClient(via, key, timeout) as client:
        view = await client.call(msg.OP_SHOW)
        if op == msg.OP_SHOW:
            return view, view
        return view, await client.call(op, target, to=view.host)
