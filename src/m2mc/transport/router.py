"""The M2MP daemon's routing rule, sans-IO (seeds/002 section 1, Figure 1).

A datagram from a local process goes to every other local process and to the
external network; it also goes back to its sender, which is the sender's
loopback (the daemon channel's M2MP layer discards it by message ID after using
it for flow control). A datagram from the network goes to every local process.

If the external channel loops our own sends back (multicast does), those copies
must not reach the local processes a second time: the router remembers what it
sent out (bounded, with a time to live) and drops each copy once.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from m2mc.wire.packet import HEADER_SIZE, MAX_DATAGRAM


@dataclass(frozen=True, slots=True)
class Route:
    """Where one datagram goes: these local clients (sender included), and maybe the network."""

    datagram: bytes
    clients: tuple[int, ...]
    network: bool


@dataclass(slots=True)
class RouterStats:
    from_clients: int = 0
    from_network: int = 0
    malformed: int = 0  # not an M2MP packet by size; dropped
    own_loopback: int = 0  # our own sends coming back from the network; dropped
    clients_refused: int = 0  # connections beyond max_clients

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class DaemonRouter:
    def __init__(self, *, external_loops_back: bool, max_clients: int = 64,
                 loopback_ttl: float = 5.0, max_loopback_entries: int = 65536) -> None:
        if max_clients < 1 or max_loopback_entries < 1 or loopback_ttl <= 0:
            raise ValueError("max_clients, max_loopback_entries and loopback_ttl must be > 0")
        self.external_loops_back = external_loops_back
        self.max_clients = max_clients
        self.loopback_ttl = loopback_ttl
        self.max_loopback_entries = max_loopback_entries
        self.stats = RouterStats()
        self._next_id = 1
        self._clients: tuple[int, ...] = ()
        # datagram -> [copies still expected back from the network, expiry]
        self._expected: OrderedDict[bytes, list[float]] = OrderedDict()

    @property
    def clients(self) -> tuple[int, ...]:
        return self._clients

    def connect(self) -> int | None:
        """A new local process; its client id, or None if ``max_clients`` are connected."""
        if len(self._clients) >= self.max_clients:
            self.stats.clients_refused += 1
            return None
        client = self._next_id
        self._next_id += 1
        self._clients = (*self._clients, client)
        return client

    def disconnect(self, client: int) -> None:
        self._clients = tuple(c for c in self._clients if c != client)

    def from_client(self, client: int, datagram: bytes, now: float) -> Route | None:
        self.stats.from_clients += 1
        if not HEADER_SIZE <= len(datagram) <= MAX_DATAGRAM:
            self.stats.malformed += 1
            return None
        if self.external_loops_back:
            self._expect(datagram, now)
        return Route(datagram, self._clients, True)

    def from_network(self, datagram: bytes, now: float) -> Route | None:
        self.stats.from_network += 1
        if not HEADER_SIZE <= len(datagram) <= MAX_DATAGRAM:
            self.stats.malformed += 1
            return None
        expected = self._expected.get(datagram)
        if expected is not None and expected[1] > now:
            self.stats.own_loopback += 1
            expected[0] -= 1
            if expected[0] <= 0:
                del self._expected[datagram]
            return None
        return Route(datagram, self._clients, False)

    @property
    def expected_loopbacks(self) -> int:
        return len(self._expected)

    # The driver's core interface (runtime/driver.py): the router keeps no timer, as
    # its expected copies expire when the next send reads the front of the table.
    def next_deadline(self) -> float | None:
        return None

    def on_timer(self, now: float) -> None:
        return None

    def _expect(self, datagram: bytes, now: float) -> None:
        expected = self._expected
        entry = expected.get(datagram)
        if entry is None:
            expected[datagram] = [1, now + self.loopback_ttl]
        else:
            entry[0] += 1
            entry[1] = now + self.loopback_ttl
            expected.move_to_end(datagram)
        # Entries are in expiry order: forget the expired and the excess from the front.
        while expected:
            first = next(iter(expected.values()))
            if first[1] > now and len(expected) <= self.max_loopback_entries:
                break
            expected.popitem(last=False)
