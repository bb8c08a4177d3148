"""``MemberDriver``: one infrastructure-mode member on real sockets, run by the one
asyncio driver (runtime/driver.py); this module is its adapter (links: the uplink
socket and the cell's multicast socket).

It listens on the multicast group of the cell it is "in" and sends its uplink
frames from its own UDP socket to the gateway's uplink address (from the
beacons), which answers there (ACK, TRANSFER, MOVE). Moving to another cell
(load balancing, a silent host, or :meth:`MemberDriver.move`) leaves one
multicast group and joins another: the protocol does the rest (seeds/001 2.4).

With a store (``NodeConfig.data_dir``) the driver commits the core's save before
anything leaves it (docs/infra.md "Switch-off and power-on"; the core refuses to
hand out frames or events before); :meth:`MemberDriver.close` services the core
one last time, so a clean switch-off saves everything.

Every socket is on the interface of the member's first cell (``iface=``): cells
named by other hosts' directories are joined on it too. The gateway uplink a
beacon advertises is used only when the beacon came from that very address (the
core checks it: a gateway beacons from its uplink socket), so a forged beacon cannot
make members send to a third party (docs/security.md, "Infrastructure mode").
An interface given by name must have an IPv4 address when the member starts: its
uplink socket binds on it, and follows it (:mod:`m2mc.infra_runtime.uplink`): when
the address changes the socket is bound again on the new one and the cell's group
joined again (by index), and the member's next greeting, on the next beacon, tells
the gateway where it is now (the gateway keys members by node id, not address).
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable

from m2mc.errors import ConfigError
from m2mc.infra.config import InfraConfig
from m2mc.infra.member import MemberCore, MemberEvent, MoveRequest, Uplink
from m2mc.infra.persist import MemberStore
from m2mc.infra.pieces import PieceStats
from m2mc.infra.wire import InfraWire
from m2mc.infra_runtime.net import (
    Udp,
    cell_on,
    fitted_to_cell,
    format_address,
    multicast_spec,
    parse_address,
)
from m2mc.infra_runtime.uplink import FollowedUplink, follows_interface
from m2mc.runtime.driver import Driver
from m2mc.trace.schema import TraceJournal, TraceSink
from m2mc.transport.iface import interface_address, resolve_interface
from m2mc.transport.linkwatch import rejoin_group

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
        self.core = MemberCore(node, fitted_to_cell(config, self.iface),
                               rng or random.Random(os.urandom(16)), group=group, trace=trace,
                               run_id=run_id, wire=wire, store=store,
                               trace_journal=trace_journal)
        self.core.configured = tuple(self.cells)  # where to look when no host is heard
        self.on_events = on_events
        # The driver commits the core's saves to the store, then writes their trace.
        self.driver = Driver(self.core, self, commit=None if store is None else store.commit,
                             trace=trace, journal=trace_journal)
        self.uplink: FollowedUplink | None = None
        self.cell_sock: Udp | None = None
        self.cell: str | None = None
        self._start_cell: str | None = None
        self.bad_addresses = 0  # gateway uplinks that are no unicast IPv4 address, never used
        self.pieces = PieceStats()  # frames cut and put together (m2mc.infra.pieces)
        self.moves = 0

    def now(self) -> float:
        return self.driver.now()

    async def start(self, cell: str | None = None) -> None:
        self._start_cell = cell if cell is not None else (self.cells[0] if self.cells else None)
        await self.driver.start()

    async def move(self, cell: str | None) -> None:
        """Be in ``cell`` from now on (None: out of every cell)."""
        if cell is not None:
            cell = cell_on(cell, self.iface)
        if self.driver.closed or (cell == self.cell
                                  and (cell is None or self.cell_sock is not None)):
            return
        if self.cell_sock is not None:
            self.cell_sock.close()
            self.cell_sock = None
        if cell is not None:
            self.cell_sock = await Udp.multicast(cell, self._on_datagram,
                                                 self.core.cfg.cell_mtu, self.pieces)
            if cell not in self.cells:
                self.cells.append(cell)
        self.cell = cell
        self.moves += 1
        self.core.on_attach(cell, self.now())
        self.service()

    async def close(self) -> None:
        self.service()  # the last frames out, the last state saved
        await self.driver.close()

    @property
    def decode_errors(self) -> int:
        return self.core.stats.decode_errors

    def poke(self) -> None:
        """Serve the core once this loop iteration is over (inputs batched)."""
        self.driver.poke_soon()

    def service(self) -> None:
        """Serve the core now: its save, its frames, its events."""
        self.driver.poke()

    # ------------------------------------------------------------ adapter: links
    async def open_links(self, driver: Driver) -> None:
        address = interface_address(self.iface)
        self.uplink = FollowedUplink(self.iface, (address, 0), self._on_datagram,
                                     follow=follows_interface(self.iface, address, address),
                                     on_change=self._interface_changed, logger=log,
                                     mtu=self.core.cfg.cell_mtu, piece_stats=self.pieces)
        await self.uplink.open()
        await self.move(self._start_cell)

    @property
    def address_changes(self) -> int:
        """Times the uplink was bound again on the interface's new address."""
        return 0 if self.uplink is None else self.uplink.moves

    def _interface_changed(self, moved: bool) -> None:
        """The interface has a (new) address, or came back: join the cell's group again
        (by index: the kernel may have dropped it with the address or the link, and a
        fresh join tells IGMP-snooping switches from the new address at once), then
        serve the core: what waits for a retransmission leaves from the new socket."""
        sock = self.cell_sock.sock if self.cell_sock is not None else None
        if sock is not None and self.cell is not None and not self.driver.closed:
            spec = multicast_spec(self.cell)
            try:
                mreq = resolve_interface(spec.iface).membership(spec.group)
            except ConfigError as exc:
                log.warning("interface %s cannot be used: %s", spec.iface, exc)
            else:
                rejoin_group(sock, mreq, f"{spec.group} on {spec.iface}")
        self.driver.poke()

    async def close_links(self) -> None:
        if self.cell_sock is not None:
            self.cell_sock.close()
        if self.uplink is not None:
            self.uplink.close()

    def _on_datagram(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.driver.closed:
            return
        if self.core.receive_frame(data, self.now(), format_address(addr)):
            self.driver.poke_soon()

    # ------------------------------------------------------------ adapter: outputs
    def take_output(self, now: float) -> tuple[list[tuple[Uplink, bytes]], list[MemberEvent]]:
        frames = self.core.drain_frames() if self.uplink is not None else []
        return frames, self.core.events()

    def transmit(self, output: tuple[list[tuple[Uplink, bytes]], list[MemberEvent]],
                 now: float) -> int:
        """Frames to the gateway's uplink; then the events (a move asked for: done
        here; the rest: the owner's)."""
        frames, events = output
        sent = 0
        up = self.uplink
        if up is not None:
            for u, data in frames:
                if u.addr:
                    try:
                        dest = parse_address(u.addr, "gateway uplink", ipv6=False)
                    except ConfigError:
                        self.bad_addresses += 1  # a beacon named an address we never use
                        continue
                    up.send(data, dest)
                    sent += 1
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
                    self.driver.loop.create_task(self.move(target))
            if self.on_events is not None:
                self.on_events(events)
        return sent
