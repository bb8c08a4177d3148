"""Watch the interface of a channel: tell the owner when it comes back (docs/group.md
section 4, "Coming back into range").

A node that walks out of a Wi-Fi network and back, or whose cable is unplugged and
plugged in again, sees its interface go down and come up, or lose its address and get
it back. On Linux the kernel announces both on an rtnetlink socket (``RTM_NEWLINK``,
``RTM_DELLINK``, ``RTM_NEWADDR``, ``RTM_DELADDR``, groups ``RTMGRP_LINK`` and
``RTMGRP_IPV4_IFADDR``): :class:`LinkWatcher` reads them from the event loop and calls
``on_up`` each time the interface becomes usable again (up, running, and holding its
address). If rtnetlink cannot be opened (a restricted container) it looks at
``/sys/class/net/<name>/`` once a second instead. Elsewhere there is no such signal
and :func:`watch_interface` returns None: the group layer then notices a return by
hearing the others again after a silence.

An interface watched by name can also be *followed* (infrastructure mode: an uplink
socket bound on the interface's address, docs/infra.md "Addresses"):
:class:`AddressState` keeps the interface's IPv4 addresses and says which one to use,
and the watcher then calls back when that address changes as well.

:class:`LinkState` and :class:`AddressState` are the sans-IO parts (messages in, "came
back" or "moved" out) and :func:`parse_messages` decodes rtnetlink datagrams; all are
tested without a kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from m2mc.transport.iface import ipv4_address

log = logging.getLogger("m2mc.transport.linkwatch")

# rtnetlink (linux/rtnetlink.h, linux/if_link.h, linux/if_addr.h, linux/if.h)
NETLINK_ROUTE = 0
RTMGRP_LINK = 0x1
RTMGRP_IPV4_IFADDR = 0x10
NLMSG_ERROR, NLMSG_DONE = 2, 3
RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR, RTM_DELADDR, RTM_GETADDR = 16, 17, 20, 21, 22
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
IFLA_IFNAME = 3
IFA_ADDRESS, IFA_LOCAL = 1, 2
IFF_UP, IFF_RUNNING = 0x1, 0x40
_NLMSGHDR = struct.Struct("=IHHII")  # length, type, flags, seq, pid
_IFINFOMSG = struct.Struct("=BxHiII")  # family, type, index, flags, change
_IFADDRMSG = struct.Struct("=BBBBi")  # family, prefix length, flags, scope, index
_RTATTR = struct.Struct("=HH")  # length, type
POLL_INTERVAL = 1.0  # seconds between looks at /sys when rtnetlink is not available


class LinkChange(StrEnum):
    """What an rtnetlink message says happened."""

    LINK = "link"  # a link's flags changed
    DELLINK = "dellink"  # a link was deleted
    ADDR = "addr"  # an IPv4 address was added
    DELADDR = "deladdr"  # an IPv4 address was removed


@dataclass(frozen=True, slots=True)
class LinkMessage:
    """One change of a link (``kind``, :class:`LinkChange`)."""

    kind: LinkChange
    index: int
    flags: int = 0
    name: str = ""
    address: str = ""


def _align(n: int) -> int:
    return (n + 3) & ~3


def _attributes(data: bytes, offset: int, end: int) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    while offset + _RTATTR.size <= end:
        length, kind = _RTATTR.unpack_from(data, offset)
        if length < _RTATTR.size or offset + length > end:
            break
        out[kind] = data[offset + _RTATTR.size:offset + length]
        offset += _align(length)
    return out


def parse_messages(data: bytes) -> list[LinkMessage]:
    """The link and IPv4 address messages of one rtnetlink datagram (others skipped,
    a truncated or malformed part ends the parse)."""
    out: list[LinkMessage] = []
    offset = 0
    while offset + _NLMSGHDR.size <= len(data):
        length, kind, _, _, _ = _NLMSGHDR.unpack_from(data, offset)
        if length < _NLMSGHDR.size or offset + length > len(data):
            break
        body = offset + _NLMSGHDR.size
        end = offset + length
        if kind in (RTM_NEWLINK, RTM_DELLINK) and body + _IFINFOMSG.size <= end:
            _, _, index, flags, _ = _IFINFOMSG.unpack_from(data, body)
            attrs = _attributes(data, body + _IFINFOMSG.size, end)
            name = attrs.get(IFLA_IFNAME, b"").split(b"\0", 1)[0].decode(errors="replace")
            change = LinkChange.LINK if kind == RTM_NEWLINK else LinkChange.DELLINK
            out.append(LinkMessage(change, index, flags, name))
        elif kind in (RTM_NEWADDR, RTM_DELADDR) and body + _IFADDRMSG.size <= end:
            family, _, _, _, index = _IFADDRMSG.unpack_from(data, body)
            attrs = _attributes(data, body + _IFADDRMSG.size, end)
            raw = attrs.get(IFA_LOCAL) or attrs.get(IFA_ADDRESS) or b""
            if family == socket.AF_INET and len(raw) == 4:
                change = LinkChange.ADDR if kind == RTM_NEWADDR else LinkChange.DELADDR
                out.append(LinkMessage(change, index, address=socket.inet_ntoa(raw)))
        offset += _align(length)
    return out


class LinkState:
    """Whether the watched interface is usable: up, running, and (when watched by its
    address) holding that address. :meth:`feed` returns True when it becomes usable
    again after it was not, which is the moment to call the owner back."""

    def __init__(self, index: int, name: str, address: str | None) -> None:
        self.index = index
        self.name = name
        self.address = address  # None: any address will do (watched by name)
        self.link_up = True  # the channel opened on it, so it was usable at the start
        self.has_address = True
        self.returns = 0

    @property
    def usable(self) -> bool:
        return self.link_up and self.has_address

    def feed(self, message: LinkMessage) -> bool:
        before = self.usable
        if (message.kind == LinkChange.LINK and message.name == self.name
                and message.index != self.index):
            self.index = message.index  # the interface was made again (a USB dongle)
        if message.index != self.index:
            return False
        if message.kind == LinkChange.LINK:
            self.link_up = bool(message.flags & IFF_UP) and bool(message.flags & IFF_RUNNING)
        elif message.kind == LinkChange.DELLINK:
            self.link_up = False
        elif self.address is None or message.address == self.address:
            self.has_address = message.kind == LinkChange.ADDR
        if self.usable and not before:
            self.returns += 1
            return True
        return False


class AddressState:
    """The IPv4 address to use on an interface followed by name, and whether the
    interface is usable (up, running, holding an address).

    :attr:`current` stays what it is while the interface holds it (a second address
    added beside it changes nothing: a roam that adds the new address before removing
    the old one moves once, when the old one goes); when it is removed the oldest
    address left takes its place, and None means none is left. :meth:`feed` returns
    True when :attr:`current` changed or the interface became usable again after it
    was not: the moments the owner has something to do (bind again, join again)."""

    def __init__(self, index: int, name: str, current: str | None) -> None:
        self.index = index
        self.name = name
        self.current = current  # the address in use (the owner's socket is bound on it)
        self.addresses: list[str] = [] if current is None else [current]  # oldest first
        self.link_up = True  # the owner opened on it, so it was usable at the start
        self.moves = 0

    @property
    def usable(self) -> bool:
        return self.link_up and bool(self.addresses)

    def feed(self, message: LinkMessage) -> bool:
        before = self.current, self.usable
        if (message.kind == LinkChange.LINK and message.name == self.name
                and message.index != self.index):
            self.index = message.index  # the interface was made again: its addresses went
            self.addresses = []
        if message.index != self.index:
            return False
        if message.kind == LinkChange.LINK:
            self.link_up = bool(message.flags & IFF_UP) and bool(message.flags & IFF_RUNNING)
        elif message.kind == LinkChange.DELLINK:
            self.link_up = False
            self.addresses = []
        elif message.kind == LinkChange.ADDR:
            if message.address not in self.addresses:
                self.addresses.append(message.address)
        elif message.address in self.addresses:
            self.addresses.remove(message.address)
        return self._settle(before)

    def reset(self, addresses: list[str]) -> bool:
        """A fresh look at the interface's addresses (a dump, after events were lost or
        where rtnetlink is missing), in the kernel's order; True as for :meth:`feed`."""
        before = self.current, self.usable
        self.addresses = list(dict.fromkeys(addresses))
        return self._settle(before)

    def _settle(self, before: tuple[str | None, bool]) -> bool:
        if self.current not in self.addresses:
            self.current = self.addresses[0] if self.addresses else None
        moved = self.current != before[0]
        if moved:
            self.moves += 1
        return moved or (self.usable and not before[1])


def find_interface(iface: str) -> tuple[int, str, str | None] | None:
    """(index, name, address or None) of the interface a channel names by IPv4 address
    or by name; None if it cannot be told (not Linux, no such address or interface)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        address = str(ipaddress.IPv4Address(iface))
    except ValueError:
        try:
            return socket.if_nametoindex(iface), iface, None
        except OSError:
            return None
    for index, found in _address_dump():
        if found == address:
            try:
                return index, socket.if_indextoname(index), address
            except OSError:
                return None
    return None


def _address_dump() -> list[tuple[int, str]]:
    """(interface index, IPv4 address) of every address on this host (rtnetlink dump)."""
    return _try_address_dump() or []


def addresses_of(index: int, name: str) -> list[str]:
    """The IPv4 addresses interface ``index`` holds, in the kernel's order (primary
    first); where rtnetlink cannot be opened, the one address the system gives."""
    dump = _try_address_dump()
    if dump is not None:
        return [address for found, address in dump if found == index]
    address = ipv4_address(name)
    return [] if address is None else [address]


def _try_address_dump() -> list[tuple[int, str]] | None:
    """As :func:`_address_dump`; None where rtnetlink cannot be opened."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
    except (OSError, AttributeError):
        return None
    out: list[tuple[int, str]] = []
    with sock:
        sock.settimeout(2.0)
        request = _IFADDRMSG.pack(socket.AF_INET, 0, 0, 0, 0)
        sock.send(_NLMSGHDR.pack(_NLMSGHDR.size + len(request), RTM_GETADDR,
                                 NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + request)
        try:
            while True:
                data = sock.recv(65536)
                out += [(m.index, m.address) for m in parse_messages(data) if m.kind == "addr"]
                if _done(data):
                    break
        except OSError:
            pass
    return out


def _done(data: bytes) -> bool:
    offset = 0
    while offset + _NLMSGHDR.size <= len(data):
        length, kind, _, _, _ = _NLMSGHDR.unpack_from(data, offset)
        if kind in (NLMSG_DONE, NLMSG_ERROR):
            return True
        if length < _NLMSGHDR.size:
            return True
        offset += _align(length)
    return False


class LinkWatcher:
    """Calls ``on_up`` from the event loop each time the interface is usable again (and,
    following an :class:`AddressState`, each time the address to use changed)."""

    def __init__(self, state: LinkState | AddressState, on_up: Callable[[], None]) -> None:
        self.state = state
        self.on_up = on_up
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._poller: asyncio.Task[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
            sock.bind((0, RTMGRP_LINK | RTMGRP_IPV4_IFADDR))
            sock.setblocking(False)
        except (OSError, AttributeError) as exc:
            log.info("no rtnetlink (%s): looking at /sys/class/net/%s every %g s", exc,
                     self.state.name, POLL_INTERVAL)
            self._poller = loop.create_task(self._poll())
            return
        self._sock = sock
        loop.add_reader(sock.fileno(), self._readable)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(sock.fileno())
            sock.close()
        if self._poller is not None:
            self._poller.cancel()
            self._poller = None

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        while True:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # ENOBUFS: events were lost; look at the interface now
                log.info("rtnetlink: %s", exc)
                self._check_sysfs()
                return
            for message in parse_messages(data):
                if self.state.feed(message):
                    self._call()

    def _call(self) -> None:
        try:
            self.on_up()
        except Exception:  # the owner's bug must not stop the watcher
            log.exception("link-up callback failed")

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_INTERVAL)
            self._check_sysfs()

    def _check_sysfs(self) -> None:
        """The interface's flags from /sys (the fallback, and after lost rtnetlink events)."""
        state = self.state
        try:
            flags = int((Path("/sys/class/net") / state.name / "flags").read_text(), 16)
            carrier = (Path("/sys/class/net") / state.name / "carrier").read_text().strip()
        except (OSError, ValueError):
            flags, carrier = 0, "0"
        if carrier == "1":
            flags |= IFF_RUNNING
        else:
            flags &= ~IFF_RUNNING
        changed = state.feed(LinkMessage(LinkChange.LINK, state.index, flags, state.name))
        if isinstance(state, AddressState):  # what was missed of its addresses, too
            changed = state.reset(addresses_of(state.index, state.name)) or changed
        if changed:
            self._call()


def watch_interface(iface: str, on_up: Callable[[], None], loop: asyncio.AbstractEventLoop,
                    *, follow: str | None = None) -> LinkWatcher | None:
    """Start watching the interface ``iface`` (an IPv4 address or a name); None where
    that cannot be done (not Linux, the interface not found).

    ``follow``: the address the owner uses on an interface ``iface`` names by name. Its
    addresses are followed too (:class:`AddressState`, as :attr:`LinkWatcher.state`):
    ``on_up`` is also called when the address to use changed, which ``state.current``
    then says (None: the interface has none left). An interface named by its address
    has nothing to follow and is only watched."""
    found = find_interface(iface)
    if found is None:
        return None
    index, name, address = found
    if follow is None or address is not None:
        watcher = LinkWatcher(LinkState(index, name, address), on_up)
        watcher.start(loop)
        return watcher
    state = AddressState(index, name, follow)
    watcher = LinkWatcher(state, on_up)
    watcher.start(loop)
    # Listening first, then the dump: a change between the two is in the dump or in
    # the messages that follow it (adding or removing an address twice is harmless).
    if state.reset(addresses_of(index, name)):
        loop.call_soon(watcher._call)
    return watcher


def rejoin_group(sock: socket.socket, mreq: bytes, what: str) -> bool:
    """Join the group of ``mreq`` (an IP_ADD_MEMBERSHIP argument) again, dropping it
    first: the kernel may or may not have kept the membership across the interface
    going down. True if the join took."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, mreq)
    try:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    except OSError as exc:
        log.warning("could not join %s again: %s", what, exc.strerror or exc)
        return False
    return True
