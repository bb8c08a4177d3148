"""``null://`` channel: discards everything and receives nothing (seeds/002 NullChannel)."""

from __future__ import annotations

from m2mc.transport.channel import Channel, ChannelClosedError


class NullChannel(Channel):
    @property
    def loops_back(self) -> bool:
        return False

    async def _open(self) -> None:
        return None

    def _shutdown(self) -> None:
        return None

    def send_nowait(self, datagram: bytes) -> bool:
        if self.closed:
            raise ChannelClosedError(f"channel {self.url} is closed")
        self.stats.datagrams_out += 1
        return True

    async def send(self, datagram: bytes) -> None:
        self.send_nowait(datagram)
