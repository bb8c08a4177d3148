"""``HostDriver``: one infrastructure-mode host on real sockets (``m2mc host``),
run by the one asyncio driver (runtime/driver.py); this module is its adapter.

Backbone: TCP to every other host (listen address + peers). Cell: the host
broadcasts on its cell's multicast group and receives members' frames on its
uplink UDP address, which its beacons advertise. With a deployment key
(``HostSettings.key``) every frame is sealed and checked (docs/security.md). With a
data directory (``HostSettings.data_dir``) the host keeps its promise and log there
(m2mc.infra_runtime.host_store), takes them up at start, and the driver commits each save
before the output it covers leaves (docs/infra.md, "Durable hosts").

An uplink on the address of a cell interface given by name follows that address
(:mod:`m2mc.infra_runtime.uplink`): when a DHCP renewal or a roam changes it, the
uplink is bound again on the new one and the core advertises it at once
(:meth:`~m2mc.infra.host.HostCore.move_uplink`).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from m2mc.errors import ConfigError
from m2mc.infra.config import InfraConfig
from m2mc.infra.host import HostCore, HostIdentity, HostSend
from m2mc.infra.ids import NO_EPOCH
from m2mc.infra.pieces import PieceStats
from m2mc.infra.wire import InfraWire
from m2mc.infra_runtime.host_store import FILE_NAME as HOST_FILE
from m2mc.infra_runtime.host_store import SqliteHostStore
from m2mc.infra_runtime.keying import deployment_auth
from m2mc.infra_runtime.net import (
    Backbone,
    fitted_to_cell,
    format_address,
    multicast_spec,
    parse_address,
)
from m2mc.infra_runtime.uplink import FollowedUplink, follows_interface
from m2mc.log import node_logger
from m2mc.metrics.views import HostView
from m2mc.runtime.driver import Driver
from m2mc.runtime.tracing import open_trace
from m2mc.transport.iface import interface_address

if TYPE_CHECKING:
    from m2mc.metrics.server import MetricsServer


@dataclass
class HostSettings:
    host_id: str
    listen: tuple[str, int]
    cell: str
    uplink: tuple[str, int]
    peers: list[tuple[str, int]] = field(default_factory=list)
    config: InfraConfig = field(default_factory=InfraConfig)
    trace_dir: str | Path | None = None
    run_id: str = ""
    group: str = "infra"
    key: Any = None  # the deployment key source (DeploymentKey); None: unauthenticated
    metrics: str | None = None  # serve Prometheus metrics on this ADDR:PORT (docs/operations.md)
    data_dir: str | Path | None = None  # durable: promise, log, commit point (None: memory)
    sync: str = "full"  # with data_dir: "full" survives a power cut, "normal" a kill -9


class HostDriver:
    """A host's adapter (its links: the backbone, the uplink socket, the cell it
    broadcasts to) and the one driver that runs its core (runtime/driver.py)."""

    def __init__(self, settings: HostSettings) -> None:
        self.s = settings
        self.log = node_logger("m2mc.infra.host", settings.host_id)
        self.core: HostCore | None = None
        self.driver: Driver | None = None
        self.backbone: Backbone | None = None
        self.uplink: FollowedUplink | None = None
        self.pieces = PieceStats()  # frames cut and put together (m2mc.infra.pieces)
        cell = multicast_spec(settings.cell)
        self._cell_addr = (cell.group, cell.port)
        self._iface = cell.iface
        self._iface_address = interface_address(cell.iface)  # a name must have one now
        self._configured = set(settings.peers)  # trusted: the operator named them
        self.bad_addresses = 0  # unusable addresses from the network, never sent to
        self.untrusted_addresses = 0  # advertised by nobody we can trust, never used
        self._closed = asyncio.Event()
        self.retired = asyncio.Event()  # set once this host learned it was retired for good
        self.failed = asyncio.Event()  # set once a commit of its log failed (it stops)
        self._trace_close: object = None
        self._addr_of: dict[str, tuple[str, int]] = {}
        self.metrics: MetricsServer | None = None
        self.store: SqliteHostStore | None = None

    def now(self) -> float:
        assert self.driver is not None
        return self.driver.now()

    async def start(self) -> None:
        s = self.s
        if s.metrics is not None:  # first: a port in use stops the host before it starts
            from m2mc.metrics import start_metrics
            from m2mc.metrics.infra import host_snapshot

            self.metrics = start_metrics(s.metrics, lambda: host_snapshot(self.metrics_view()),
                                         s.host_id)
        try:
            if s.data_dir is not None:  # first: a bad saved state stops the host at once
                self.store = SqliteHostStore(Path(s.data_dir) / HOST_FILE, s.host_id,
                                             sync=s.sync, retention_age=s.config.retention_age,
                                             retention_bytes=s.config.retention_bytes,
                                             clock=time.time, checkpoint_thread=True)
            await self._open()
        except BaseException:
            if self.metrics is not None:
                await self.metrics.aclose()
                self.metrics = None
            if self.store is not None:
                self.store.close()
                self.store = None
            raise

    async def _open(self) -> None:
        s = self.s
        loop = asyncio.get_running_loop()
        sink, self._trace_close = open_trace(s.trace_dir, s.host_id, s.run_id, loop.time,
                                             flush_every=1)
        cfg = fitted_to_cell(s.config, self._iface)
        wire = InfraWire(None if s.key is None else deployment_auth(
            s.key, s.host_id, replay_window=cfg.replay_window,
            max_senders=cfg.max_auth_senders))
        # The uplink first: the core's identity advertises its address.
        self.uplink = FollowedUplink(
            self._iface, s.uplink, self._on_uplink, on_change=self._uplink_moved,
            follow=follows_interface(self._iface, s.uplink[0], self._iface_address),
            logger=self.log, mtu=cfg.cell_mtu, piece_stats=self.pieces)
        await self.uplink.open()
        ident = HostIdentity(s.host_id, s.listen[0], s.listen[1], s.cell,
                             format_address(self.uplink.address))
        self.core = HostCore(ident, cfg, random.Random(os.urandom(16)),
                             expected_hosts=1 + len(s.peers), trace=sink, run_id=s.run_id,
                             group=s.group, incarnation=int(time.time() * 1000) & 0x7FFF_FFFF,
                             wire=wire, durable=self.store is not None)
        store = self.store
        if store is not None:  # before any link opens: a bad saved state stops it here
            self.core.restore(store.load(), loop.time())
            log = self.core.log
            if log.high or log.promised != NO_EPOCH:
                self.log.info("restored from %s: promised %s, log %s..%s, committed %s",
                              store.path, log.promised, log.low, log.high, log.applied)
        self.driver = Driver(self.core, self, commit=None if store is None else store.commit,
                             on_failure=self._commit_failed)
        await self.driver.start()
        self.core.start(self.now())
        self.log.info("host up: backbone %s, cell %s, uplink %s", format_address(s.listen),
                      s.cell, ident.uplink)
        self.driver.poke()

    def metrics_view(self) -> HostView:
        """This host as its metrics see it (:mod:`m2mc.metrics.infra`)."""
        backbone = self.backbone
        return HostView(self.s.host_id, self.s.group, self.core, self.bad_addresses,
                        self.untrusted_addresses,
                        backbone.refused_connections if backbone is not None else 0,
                        backbone.bad_streams if backbone is not None else 0,
                        self.pieces)

    def _commit_failed(self, exc: BaseException) -> None:
        """The log could not be written: the host stops (fail-stop, runtime/driver.py);
        what it holds on disk is what it promised, and a restart takes it up."""
        self.log.error("stopping: the log could not be written: %s", exc)
        self.failed.set()

    async def serve_forever(self) -> None:
        await self._closed.wait()

    async def close(self) -> None:
        if self.metrics is not None:
            await self.metrics.aclose()
            self.metrics = None
        if self.driver is not None:
            await self.driver.close()
        elif self.uplink is not None:
            self.uplink.close()
        if callable(self._trace_close):
            self._trace_close()
        if self.store is not None:
            self.store.close()
        self._closed.set()

    # ------------------------------------------------------------ adapter: links
    async def open_links(self, driver: Driver) -> None:
        s, cfg = self.s, self.s.config
        self.backbone = Backbone(s.host_id, s.listen, list(s.peers), self._on_frame,
                                 max_frame=cfg.max_backbone_frame,
                                 max_connections=cfg.max_backbone_connections,
                                 on_return=self._on_return)
        await self.backbone.start()

    async def close_links(self) -> None:
        if self.backbone is not None:
            await self.backbone.close()
        if self.uplink is not None:
            self.uplink.close()

    def _uplink_moved(self, moved: bool) -> None:
        """The uplink was bound again on the cell interface's new address: advertised
        at once (a beacon now, the status at its next interval), so members follow
        within a beacon interval and the other hosts' directories within a status one."""
        core, up = self.core, self.uplink
        if not moved or core is None or up is None or self.driver is None \
                or self.driver.closed:
            return
        uplink = format_address(up.address)
        if not core.move_uplink(uplink, self.now()):
            return
        self.log.warning("interface %s changed address: uplink now %s (beacons advertise it)",
                         self._iface, uplink)
        self.driver.poke()

    # ------------------------------------------------------------ inputs
    def _on_frame(self, src: str, data: bytes) -> None:
        core, driver = self.core, self.driver
        if core is None or driver is None or driver.closed:
            return
        core.receive_backbone(src, data, driver.now())
        driver.poke_soon()  # everything that arrives this loop iteration, served at once

    def _on_return(self, addr: tuple[str, int], data: bytes) -> None:
        """A frame on our own connection to ``addr``: from the host whose status names
        that address (in a keyed deployment the core takes the sealed sender anyway)."""
        assert self.core is not None
        for host, entry in self.core.directory.hosts.items():
            if (entry.status.address, entry.status.port) == addr:
                self._on_frame(host, data)
                return
        self._on_frame(format_address(addr), data)

    def _on_uplink(self, data: bytes, addr: tuple[str, int]) -> None:
        core, driver = self.core, self.driver
        if core is None or driver is None or driver.closed:
            return  # (the uplink opens before the core exists)
        core.receive_cell(format_address(addr), data, driver.now())
        driver.poke_soon()

    # ------------------------------------------------------------ adapter: outputs
    def take_output(self, now: float) -> list[HostSend]:
        core = self.core
        if core is None or self.backbone is None or self.uplink is None:
            return []
        out = core.drain(now)
        # Acks of uplink frames acknowledge nothing a save holds: they leave now, before
        # the commit of this step's save (its disk flush), which the rest waits for.
        early = [s for s in out if s.unsaved]
        if early:
            self.transmit(early, now)
            out = [s for s in out if not s.unsaved]
        return out

    def transmit(self, output: list[HostSend], now: float) -> int:
        """The core's frames onto the links: the backbone (a host, all hosts, or an
        operator's connection), the cell's multicast group, a member's uplink."""
        core, bb, up = self.core, self.backbone, self.uplink
        if core is None or bb is None or up is None:
            return 0
        sent = 0
        for s in output:
            sent += 1
            if s.link == "backbone":
                if s.dest is None:
                    bb.broadcast(s.data)
                else:
                    addr = self._address(s.dest)
                    if addr is not None:
                        bb.send(addr, s.data)
                    else:  # a host we have no address for, but that connected to us
                        bb.write_back(s.dest, s.data)
            elif s.link == "admin":
                if s.dest is not None:
                    bb.write_back(s.dest, s.data)  # an operator's command line
            elif s.dest is None:
                up.send(s.data, self._cell_addr)
            else:
                dest = self._checked(s.dest, "member address")
                if dest is not None:
                    up.send(s.data, dest)
        for text in core.notices:  # what the operator must know (no host holds the log...)
            self.log.warning("%s", text)
        core.notices.clear()
        if core.retired_self and not self.retired.is_set():
            self.log.error("%s: %s; stopping", self.s.host_id, core.retired_self)
            self.retired.set()
        return sent

    def _address(self, host: str) -> tuple[str, int] | None:
        """Where host ``host``'s backbone is: what its status advertises, if trusted."""
        assert self.core is not None and self.backbone is not None
        st = self.core.directory.status(host)
        known = self._addr_of.get(host)
        if st is None:
            return known
        addr = self._checked(format_address((st.address, st.port)), f"status of {host}")
        if addr is None or addr == known:
            return known
        if not self._trusted(host, addr):
            self.untrusted_addresses += 1
            self.log.debug("not connecting to %s for %s: nobody we trust gave it", addr, host)
            return known
        if known is not None and known not in self._configured:
            self.backbone.forget(known)  # the host moved (restarted elsewhere)
        self._addr_of[host] = addr
        self.backbone.connect(addr)  # a host we discovered
        return addr

    def _trusted(self, host: str, addr: tuple[str, int]) -> bool:
        """A configured peer; a status sealed with the deployment key (its sender holds
        the key); unkeyed, an address the host really reached us from."""
        assert self.core is not None and self.backbone is not None
        return addr in self._configured or self.core.wire.keyed \
            or addr[0] in self.backbone.inbound_ips(host)

    def stats(self) -> dict[str, int]:
        """What the core and the sockets refused (docs/security.md), for logs and tests."""
        out = self.core.security_stats() if self.core is not None else {}
        out["bad_addresses"] = self.bad_addresses
        out["untrusted_addresses"] = self.untrusted_addresses
        out.update(self.pieces.counters())
        if self.backbone is not None:
            out["refused_connections"] = self.backbone.refused_connections
            out["bad_streams"] = self.backbone.bad_streams
        return out

    def _checked(self, text: str, what: str) -> tuple[str, int] | None:
        """An address from the network (a status, a datagram's source), if usable."""
        try:
            return parse_address(text, what)
        except ConfigError as exc:
            self.bad_addresses += 1
            self.log.debug("not sending: %s", exc)
            return None


def settings_from_strings(host_id: str | None, listen: str, cell: str, uplink: str | None,
                          peers: list[str], config: InfraConfig, trace_dir: str | None,
                          run_id: str, key: Any = None) -> HostSettings:
    """Settings from the command line's strings; ConfigError names the bad one. The
    uplink defaults to the cell's interface (members reach the host there), any port."""
    iface = interface_address(multicast_spec(cell).iface)  # a name: its address now
    lst = parse_address(listen, "--listen")
    if uplink:
        up = parse_address(uplink, "--uplink", ipv6=False)
    elif iface != "0.0.0.0":
        up = (iface, 0)
    elif ":" not in lst[0]:
        up = (lst[0], 0)
    else:
        raise ConfigError("--uplink: give an IPv4 address (the cell's iface is 0.0.0.0 and "
                          "--listen is IPv6)")
    peer_addrs = [parse_address(p, "--peer") for p in peers if p]
    return HostSettings(host_id or format_address(lst), lst, cell, up,
                        [a for a in peer_addrs if a != lst], config, trace_dir, run_id,
                        key=key)
