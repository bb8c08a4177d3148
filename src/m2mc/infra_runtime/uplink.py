"""The uplink socket of a host or a member, kept on its interface's address.

A host receives its members' frames on a unicast UDP socket (its *uplink*, which its
beacons advertise and which its cell's multicast leaves from); a member sends its
frames to its gateway from one too. Both bind on an address of the cell's
interface. When the interface is named (``iface=wlan0``) that address belongs to the
network, not to us: a DHCP renewal or a roam replaces it, and a socket bound on the
old one is dead. :class:`FollowedUplink` watches the interface
(:func:`~m2mc.transport.linkwatch.watch_interface` with ``follow``, on rtnetlink) and
binds the socket again on the new address, on the same port when it is free, then
tells its owner, who advertises the new address (a host) or just goes on (a member:
its next greeting, from the new address, tells its gateway). docs/decisions.md,
"Infrastructure interfaces follow their address", says why we bind again rather
than bind to INADDR_ANY.

:func:`rebind_targets` and :func:`follows_interface` are the
decisions, sans-IO; the rest is the sockets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from m2mc.errors import ConfigError
from m2mc.infra.pieces import PieceStats
from m2mc.infra_runtime.net import Udp
from m2mc.transport.linkwatch import AddressState, LinkWatcher, watch_interface
from m2mc.transport.url import is_iface_name

log = logging.getLogger("m2mc.infra.uplink")

Log = logging.Logger | logging.LoggerAdapter[Any]


def rebind_targets(current: str | None, bound: tuple[str, int]) -> list[tuple[str, int]]:
    """Where to bind a socket bound on ``bound`` when its interface's address to use
    is ``current`` (None: it has none): nothing while that is where it is bound or
    there is no address to move to (the socket is kept: the same address may come
    back); otherwise the new address on the same port (a member's or an operator's
    port stays what it was), then on any port if that one is taken there."""
    address, port = bound
    if current is None or current == address:
        return []
    if port == 0:
        return [(current, 0)]
    return [(current, port), (current, 0)]


def follows_interface(iface: str, bound: str, iface_address: str) -> bool:
    """Whether an uplink bound on ``bound`` follows the cell interface ``iface``: when
    the interface is given by name and the uplink is on the address it had at start
    (a member's uplink, a host's default one, or an ``--uplink`` naming that address:
    once the address is gone, the only place the uplink can work is the new one). An
    uplink on another address (another interface's) stays where the operator put it."""
    return is_iface_name(iface) and bound == iface_address


class FollowedUplink:
    """A unicast UDP socket (:class:`~m2mc.infra_runtime.net.Udp`) bound on
    ``bind``, whose multicast leaves by ``iface``; with ``follow``, bound again on
    the interface's new address whenever it changes.

    ``on_change(moved)`` tells the owner: True as soon as the socket was bound again
    on a new address (read :attr:`address`), False when the interface came back, or
    got its address back, with the socket where it was (the owner may join its groups
    again). While the interface has no address the socket is kept as it is (sends
    fail) and nobody is told."""

    def __init__(self, iface: str, bind: tuple[str, int],
                 on_datagram: Callable[[bytes, tuple[str, int]], None], *,
                 follow: bool, on_change: Callable[[bool], None] | None = None,
                 logger: Log = log, mtu: int = 0, piece_stats: PieceStats | None = None
                 ) -> None:
        self.iface = iface
        self.mtu = mtu  # the cells' MTU (0: the interface's): larger frames go in pieces
        self.piece_stats = piece_stats
        self._bind = bind
        self._follow = follow
        self._on_datagram = on_datagram
        self._on_change = on_change
        self._log = logger
        self.udp: Udp | None = None
        self.moves = 0  # times bound again on a new address
        self._watcher: LinkWatcher | None = None
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._without = False  # said that the interface has no address left

    async def open(self) -> None:
        """Bind (ConfigError if that cannot be done), then watch the interface."""
        self.udp = await Udp.unicast(self._bind, self._on_datagram, self.iface, self.mtu,
                                     self.piece_stats)
        if self._follow:
            self._watcher = watch_interface(self.iface, self._changed,
                                            asyncio.get_running_loop(),
                                            follow=self.address[0])
            if self._watcher is None:
                self._log.info("interface %s cannot be watched here: the uplink stays on %s",
                               self.iface, self.address[0])

    @property
    def address(self) -> tuple[str, int]:
        assert self.udp is not None
        return self.udp.address

    def send(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.udp is not None:
            self.udp.send(data, addr)

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self.udp is not None:
            self.udp.close()

    # ------------------------------------------------------------ following
    def _changed(self) -> None:
        """The watcher's call: bind again in a task (one at a time; a change that comes
        while one runs is looked at when it is done)."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._follow_address())

    async def _follow_address(self) -> None:
        moved = False
        while True:
            self._again = False
            moved = await self._rebind()  # a move is told at once, in the same step
            if not self._again:
                break
        if not moved and not self._without and self._watcher is not None:
            self._tell(False)  # back, where it was: the owner may join its groups again

    def _tell(self, moved: bool) -> None:
        if self._on_change is None:
            return
        try:
            self._on_change(moved)
        except Exception:  # the owner's bug must not stop the following
            self._log.exception("uplink change callback failed")

    async def _rebind(self) -> bool:
        watcher, old = self._watcher, self.udp
        if watcher is None or old is None or not isinstance(watcher.state, AddressState):
            return False
        current = watcher.state.current
        if current is None:
            if not self._without:
                self._without = True
                self._log.warning("interface %s has no IPv4 address: nothing reaches %s "
                                  "until it has one", self.iface, _fmt(old.address))
            return False
        self._without = False
        targets = rebind_targets(current, old.address)
        problem: ConfigError | None = None
        for target in targets:
            try:
                new = await Udp.unicast(target, self._on_datagram, self.iface, self.mtu,
                                        self.piece_stats)
            except ConfigError as exc:  # taken, or gone again meanwhile: the next try
                problem = exc
                continue
            if self._watcher is None:  # closed while binding
                new.close()
                return False
            self.udp = new
            old.close()
            self.moves += 1
            self._log.info("interface %s: uplink %s -> %s", self.iface, _fmt(old.address),
                           _fmt(new.address))
            # Told before anything else runs: nothing leaves the new socket naming the
            # old address (a host's beacons name its uplink).
            self._tell(True)
            return True
        if problem is not None:
            self._log.warning("interface %s is now at %s, but the uplink cannot bind there "
                              "(%s): it stays on %s", self.iface, current, problem,
                              _fmt(old.address))
        return False


def _fmt(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"
