"""``MemberDriver``: one infrastructure-mode member on real sockets.

It listens on the multicast group of the cell it is "in" and sends its uplink
frames from its own UDP socket to the gateway's uplink address (from the
beacons), which answers there (ACK, TRANSFER, MOVE). Moving to another cell
(load balancing, a silent host, or :meth:`MemberDriver.move`) leaves one
multicast group and joins another: the protocol does the rest (seeds/001 2.4).

With a store (``NodeConfig.data_dir``) the core saves its state before anything
leaves it (docs/infra.md "Switch-off and power-on"); :meth:`MemberDriver.close`
services the core one last time, so a clean switch-off saves everything.

Every socket is on the interface of the member's first cell (``iface=``): cells
named by other hosts' directories are joined on it too. The gateway uplink a
beacon advertises is used only when the beacon came from that very address (the
core checks it: a gateway beacons from its uplink socket), so a forged beacon cannot
make members send to a third party (docs/security.md, "Infrastructure mode").
An interface given by name must have an IPv4 address when the member starts: its
uplink socket binds on it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from m2mc.errors import ConfigError
from m2mc.infra.config import InfraConfig
from m2mc.infra.member import MemberCore, MemberEvent, MoveRequest
from m2mc.infra.persist import MemberStore
from m2mc.infra.wire import InfraWire
from m2mc.infra_runtime.net import Udp, cell_on, format_address, multicast_spec, parse_address
from m2mc.trace.schema import TraceJournal, TraceSink
from m2mc.transport.iface import interface_address

log = logging.getLogger("m2mc.infra.member")


class MemberDriver:
    def __init__(self, node: str, cells: list[str], config: InfraConfig, *,
                 trace: TraceSink | None = None, run_id: str = "", group: str = "infra",
                 on_events: Callable[[list[MemberEvent]], None] | None = None,
                 rng: random.Random | None = None, wire: InfraWire | None = None,
                 store: MemberStore | None = None,
                 trace_journal: TraceJournal | None = None) -> None:
        self.iface = multicast_spec(cells[0]).iface if cells else "127.0.0.1"
        self.cells = [cell_on(c, self.iface) for c in cells]
        self.core = MemberCore(node, config, rng or random.Random(), group=group, trace=trace,
                               run_id=run_id, wire=wire, store=store,
                               trace_journal=trace_journal)
        self.core.configured = tuple(self.cells)  # where to look when no host is heard
        self.on_events = on_events
        self.loop = asyncio.get_event_loop()
        self.uplink: Udp | None = None
        self.cell_sock: Udp | None = None
        self.cell: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._poked = False
        self._closed = False
        self.bad_addresses = 0  # gateway uplinks that are no unicast IPv4 address, never used
        self.moves = 0

    def now(self) -> float:
        return self.loop.time()

    async def start(self, cell: str | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        address = interface_address(self.iface)
        self.uplink = await Udp.unicast((address, 0), self._on_datagram, address)
        await self.move(cell if cell is not None else (self.cells[0] if self.cells else None))

    async def move(self, cell: str | None) -> None:
        """Be in ``cell`` from now on (None: out of every cell)."""
        if cell is not None:
            cell = cell_on(cell, self.iface)
        if cell == self.cell and (cell is None or self.cell_sock is not None):
            return
        if self.cell_sock is not None:
            self.cell_sock.close()
            self.cell_sock = None
        if cell is not None:
            self.cell_sock = await Udp.multicast(cell, self._on_datagram)
            if cell not in self.cells:
                self.cells.append(cell)
        self.cell = cell
        self.moves += 1
        self.core.on_attach(cell, self.now())
        self.service()

    async def close(self) -> None:
        self.service()  # the last frames out, the last state saved
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        if self.cell_sock is not None:
            self.cell_sock.close()
        if self.uplink is not None:
            self.uplink.close()

    @property
    def decode_errors(self) -> int:
        return self.core.stats.decode_errors

    def _on_datagram(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.core.receive_frame(data, self.now(), format_address(addr)):
            self.poke()

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self.core.on_timer(self.now())
        self.service()

    def poke(self) -> None:
        if not self._poked:
            self._poked = True
            self.loop.call_soon(self.service)

    def service(self) -> None:
        self._poked = False
        if self._closed:
            return
        up = self.uplink
        if up is not None:
            for u, data in self.core.drain_frames():
                if u.addr:
                    try:
                        dest = parse_address(u.addr, "gateway uplink", ipv6=False)
                    except ConfigError:
                        self.bad_addresses += 1  # a beacon named an address we never use
                        continue
                    up.send(data, dest)
        events = self.core.events()
        if events:
            for ev in events:
                if not isinstance(ev, MoveRequest):
                    continue
                try:
                    target = cell_on(ev.target.cell, self.iface)
                except ConfigError:
                    self.bad_addresses += 1  # not a cell we may join
                    continue
                if target != self.cell:
                    self.loop.create_task(self.move(target))
            if self.on_events is not None:
                self.on_events(events)
        deadline = self.core.next_deadline()
        if deadline is None or deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self.loop.call_at(max(deadline, self.now()), self._on_timer)
