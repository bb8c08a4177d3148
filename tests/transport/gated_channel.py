"""Test channels shared by the transport tests (imported as a sibling module, like
tests/netns/netns_lab.py)."""

from __future__ import annotations

import asyncio

from m2mc.transport.channel import Channel


class GatedChannel(Channel):
    """A channel that takes datagrams only while its gate is open (tests back-pressure)."""

    def __init__(self) -> None:
        super().__init__("gated://")
        self.gate = asyncio.Event()
        self.sent: list[bytes] = []

    @property
    def loops_back(self) -> bool:
        return False

    async def _open(self) -> None:
        return None

    def _shutdown(self) -> None:
        return None

    def send_nowait(self, datagram: bytes) -> bool:
        if not self.gate.is_set():
            return False
        self.sent.append(datagram)
        return True

    async def send(self, datagram: bytes) -> None:
        await self.gate.wait()
        self.sent.append(datagram)
