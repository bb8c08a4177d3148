"""The network interface a channel URL names (``iface=``), as the socket layer uses it.

:mod:`m2mc.transport.url_syntax` only checks how an ``iface`` is spelt; this module asks
the system, when a channel opens or a command checks its ``--iface`` flag.

An address (``iface=192.168.1.23``) is used as it is, as always.

A name (``iface=wlan0``) must exist: if not, :class:`ConfigError` says so and lists
the interfaces there are, in one line. On Linux the socket then joins the group
and sends by the interface's *index* (``struct ip_mreqn``), not by its address, so

- an interface whose address changes (DHCP on Wi-Fi, a new network) keeps working
  without a restart;
- an interface that is down, has no link or no IPv4 address yet (a laptop whose
  Wi-Fi connects after the chat started) is accepted: the channel opens, a warning
  says what is missing, nothing is sent or received meanwhile (sends count as
  send errors), and traffic flows as soon as the interface is up with an address.

Where ``ip_mreqn`` is not available (not Linux) a name stands for the IPv4 address
the interface has when the channel opens; an interface without one is an error.
Infrastructure mode needs an address at start (its uplink binds on it and beacons
advertise it): :func:`interface_address`; it follows a name's address from then on
(:mod:`m2mc.infra_runtime.uplink`).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
from dataclasses import dataclass

from m2mc.errors import ConfigError
from m2mc.transport.url_syntax import is_iface_name, parse_iface

# Join and send by interface index (struct ip_mreqn): Linux. Tests turn it off to
# exercise the by-address path on Linux too.
BY_INDEX = sys.platform.startswith("linux")

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

# ioctl requests on struct ifreq (16 bytes of name, then a union of 24 at most)
if sys.platform.startswith("linux"):
    _SIOCGIFFLAGS, _SIOCGIFADDR, _SIOCGIFMTU = 0x8913, 0x8915, 0x8921
else:  # BSD and macOS: _IOWR('i', 17 / 33 / 51, struct ifreq)
    _SIOCGIFFLAGS, _SIOCGIFADDR, _SIOCGIFMTU = 0xC0206911, 0xC0206921, 0xC0206933
_IFREQ = struct.Struct("16s24x")
_IFF_UP, _IFF_RUNNING = 0x1, 0x40  # the same bits on Linux, BSD and macOS

# What keeps an interface from carrying traffic: short (in lists), and as a sentence.
_PROBLEMS = {
    "down": "is down",
    "no link": "has no link (cable or Wi-Fi not connected)",
    "no IPv4 address": "has no IPv4 address (yet)",
    "address unknown": "has an IPv4 address this system cannot look up",
}


@dataclass(frozen=True, slots=True)
class Interface:
    """An interface resolved for a socket: by index (a name, on Linux) or by address."""

    label: str            # as the URL names it
    index: int            # > 0: join and send by index; 0: by ``address``
    address: str | None   # its IPv4 address now (None: none yet, or unknown)
    problem: str = ""     # why nothing may flow yet (a key of _PROBLEMS); "" when ready

    @property
    def why(self) -> str:
        """The problem as a sentence after the name: ``wlan0 is down``."""
        return _PROBLEMS.get(self.problem, self.problem)

    def membership(self, group: str) -> bytes:
        """The IP_ADD_MEMBERSHIP argument for ``group`` on this interface."""
        if self.index:
            return socket.inet_aton(group) + bytes(4) + struct.pack("@i", self.index)
        assert self.address is not None
        return socket.inet_aton(group) + socket.inet_aton(self.address)

    def multicast_if(self) -> bytes:
        """The IP_MULTICAST_IF argument: multicast leaves by this interface."""
        if self.index:
            return bytes(8) + struct.pack("@i", self.index)
        assert self.address is not None
        return socket.inet_aton(self.address)


def interface_names() -> list[str]:
    """The interfaces of this machine (network namespace), in index order."""
    with contextlib.suppress(AttributeError, OSError):
        return [name for _, name in sorted(socket.if_nameindex())]
    return []


def describe_interfaces() -> str:
    """One line: every interface with its IPv4 address, or why it has none."""
    parts = []
    for name in interface_names():
        address, problem = _address_and_problem(name)
        detail = [item for item in (address, problem and f"({problem})") if item]
        parts.append(" ".join([name, *detail]))
    return ", ".join(parts) if parts else "none found"


def check_interface(iface: str) -> str:
    """``iface`` (an address or a name) checked: a name must exist here.

    Returns the parsed value; ConfigError (one line, listing the interfaces there
    are) otherwise.
    """
    iface = parse_iface(iface)
    if is_iface_name(iface):
        _index_of(iface)
    return iface


def resolve_interface(iface: str) -> Interface:
    """What a multicast socket needs to use ``iface``; ConfigError if it cannot."""
    iface = parse_iface(iface)
    if not is_iface_name(iface):
        return Interface(iface, 0, iface)
    index = _index_of(iface)
    address, problem = _address_and_problem(iface)
    if BY_INDEX:
        return Interface(iface, index, address, problem)
    if address is None:
        raise ConfigError(f"interface {iface} {_PROBLEMS.get(problem, problem)}; on this "
                          "system a name stands for the interface's IPv4 address: connect "
                          "it, or give iface=ADDRESS")
    return Interface(iface, 0, address, problem)


def interface_address(iface: str) -> str:
    """The IPv4 address ``iface`` has now (itself, for an address); ConfigError if none."""
    iface = parse_iface(iface)
    if not is_iface_name(iface):
        return iface
    _index_of(iface)
    address, problem = _address_and_problem(iface)
    if address is None:
        raise ConfigError(f"interface {iface} {_PROBLEMS.get(problem, problem)}; "
                          "infrastructure mode needs its address (connect it, or give "
                          "iface=ADDRESS)")
    return address


def ipv4_address(name: str) -> str | None:
    """The IPv4 address the interface ``name`` has now (its primary one); None if none."""
    return _address_and_problem(name)[0]


def interface_mtu(iface: str) -> int | None:
    """The MTU of ``iface`` (a name, or the IPv4 address of one of ours; a loopback
    address is the loopback interface's); None when this system does not say."""
    iface = parse_iface(iface)
    if is_iface_name(iface):
        return _mtu_of(iface)
    try:
        names = [name for _, name in socket.if_nameindex()]
    except (AttributeError, OSError):  # pragma: no cover - a system without it
        return None
    loopback = iface.startswith("127.")
    for name in names:
        address = ipv4_address(name)
        if address == iface or (loopback and address is not None
                                and address.startswith("127.")):
            return _mtu_of(name)
    return None


def _mtu_of(name: str) -> int | None:
    if fcntl is None:  # pragma: no cover - not POSIX
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            reply = fcntl.ioctl(sock.fileno(), _SIOCGIFMTU, _IFREQ.pack(name.encode()))
        except OSError:
            return None
    mtu = int(struct.unpack_from("@i", reply, 16)[0])
    return mtu if mtu > 0 else None


def _index_of(name: str) -> int:
    try:
        nametoindex = socket.if_nametoindex
    except AttributeError:  # pragma: no cover - a Python without it
        raise ConfigError(f"iface {name!r}: this system cannot look interfaces up by name; "
                          "give iface=ADDRESS") from None
    try:
        return nametoindex(name)
    except OSError:
        raise ConfigError(f"no network interface {name!r} here; interfaces: "
                          f"{describe_interfaces()}") from None


def _address_and_problem(name: str) -> tuple[str | None, str]:
    """The interface's IPv4 address (None if none) and what keeps it from working
    (a key of _PROBLEMS, "" if nothing)."""
    if fcntl is None:  # pragma: no cover - not POSIX: no ioctl to ask with
        return None, "address unknown"
    request = _IFREQ.pack(name.encode())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            reply = fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request)
            flags = struct.unpack_from("@H", reply, 16)[0]
        except OSError:  # gone since it was listed: nothing to say about it
            flags = _IFF_UP | _IFF_RUNNING
        try:
            reply = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
            address: str | None = socket.inet_ntoa(reply[20:24])
        except OSError:  # EADDRNOTAVAIL: no IPv4 address
            address = None
    if not flags & _IFF_UP:
        return address, "down"
    if not flags & _IFF_RUNNING:
        return address, "no link"
    return address, "" if address is not None else "no IPv4 address"
