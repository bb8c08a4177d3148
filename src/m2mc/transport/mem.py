"""``mem://NAME`` channel: an in-process broadcast bus, for tests and embedding.

Every channel open on the same NAME in this process receives every datagram any
of them sends, the sender included, like a broadcast medium with loopback.
"""

from __future__ import annotations

from m2mc.transport.channel import DEFAULT_MAX_INBOUND, Channel, ChannelClosedError
from m2mc.transport.url_syntax import MemSpec

_BUSES: dict[str, set[MemChannel]] = {}


class MemChannel(Channel):
    def __init__(self, spec: MemSpec, url: str, *,
                 max_inbound: int = DEFAULT_MAX_INBOUND) -> None:
        super().__init__(url, max_inbound=max_inbound)
        self.name = spec.name
        self.packet_size = spec.packet
        self._members: set[MemChannel] | None = None

    @property
    def loops_back(self) -> bool:
        return True

    async def _open(self) -> None:
        self._members = _BUSES.setdefault(self.name, set())
        self._members.add(self)

    def _shutdown(self) -> None:
        members, self._members = self._members, None
        if members is not None:
            members.discard(self)
            if not members:
                _BUSES.pop(self.name, None)

    def send_nowait(self, datagram: bytes) -> bool:
        members = self._members
        if members is None:
            raise ChannelClosedError(f"channel {self.url} is closed")
        self.stats.datagrams_out += 1
        for member in tuple(members):
            member._deliver(datagram)
        return True

    async def send(self, datagram: bytes) -> None:
        self.send_nowait(datagram)
