"""The syntax of channel URLs (docs/interfaces.md §2): parse and format them (pure).

Every mistake raises :class:`ConfigError` with one line naming the URL and the fault.
Parsing is pure: ``iface=`` is an IPv4 address or an interface name whose spelling
is checked here; whether that interface exists is asked when the channel opens
(:mod:`m2mc.transport.iface`). Channels are IPv4 only: an IPv6 address anywhere in
a URL gets an error that says so.

The channels import their specs from here; :mod:`m2mc.transport.url`, above them,
opens the channel a URL names (and is where applications import all of this from).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl

from m2mc.errors import ConfigError
from m2mc.wire.packet import MAX_DATAGRAM, MAX_PACKET

DEFAULT_GROUP = "239.255.77.77"
DEFAULT_MULTICAST_PORT = 7777
DEFAULT_CHANNEL_URL = f"udp-multicast://{DEFAULT_GROUP}:{DEFAULT_MULTICAST_PORT}?iface=127.0.0.1&ttl=1"
DEFAULT_DAEMON_PORT = 5678
DEFAULT_RCVBUF = 4 * 1024 * 1024  # asked of the kernel; it caps at net.core.rmem_max
SCHEMES = ("udp-multicast", "udp", "daemon", "mem", "null")
IFACE_NAME_MAX = 15  # bytes of an interface name: IFNAMSIZ - 1 on Linux, BSD and macOS

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MulticastSpec:
    group: str
    port: int
    iface: str = "127.0.0.1"
    ttl: int = 1
    rcvbuf: int = DEFAULT_RCVBUF
    # UDP segmentation offload where the kernel has it (transport/offload.py): several
    # packets per system call; the datagrams on the wire are the same.
    offload: bool = True
    # The M2MP packet size this channel's senders use (``packet=``, docs/m2mp.md):
    # 508 unless the user names more, up to MAX_DATAGRAM.
    packet: int = MAX_PACKET


@dataclass(frozen=True, slots=True)
class UdpSpec:
    peers: tuple[Address, ...]
    bind: Address = ("127.0.0.1", 0)
    rcvbuf: int = DEFAULT_RCVBUF
    packet: int = MAX_PACKET


@dataclass(frozen=True, slots=True)
class DaemonSpec:
    host: str = "127.0.0.1"
    port: int = DEFAULT_DAEMON_PORT


@dataclass(frozen=True, slots=True)
class MemSpec:
    name: str
    packet: int = MAX_PACKET


@dataclass(frozen=True, slots=True)
class NullSpec:
    pass


ChannelSpec = MulticastSpec | UdpSpec | DaemonSpec | MemSpec | NullSpec

_MEM_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
# Interface names as they appear in the wild (eth0, wlp2s0, enp0s31f6, br-1a2b, eth0.100,
# ethernet_32768): characters a URL carries unescaped, so a URL with a name round-trips.
_IFACE_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_DOTTED = re.compile(r"[0-9.]+")


class _Bad(Exception):
    """Internal: a fault in one part of the URL; parse_channel_url adds the URL."""


def parse_channel_url(url: str) -> ChannelSpec:
    """Parse a channel URL of docs/interfaces.md §2; raise ConfigError if it is not one."""
    if not isinstance(url, str):
        raise ConfigError(f"bad channel URL {url!r}: not a string")
    try:
        return _parse(url.strip())
    except _Bad as exc:
        raise ConfigError(f"bad channel URL {url!r}: {exc}") from None


def _parse(url: str) -> ChannelSpec:
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise _Bad(f"expected SCHEME://..., with SCHEME one of {', '.join(SCHEMES)}")
    scheme = scheme.lower()
    netloc, _, query_text = rest.partition("?")
    netloc = netloc.rstrip("/")
    query = _query(query_text)
    if scheme == "udp-multicast":
        return _multicast(netloc, query)
    if scheme == "udp":
        return _udp(netloc, query)
    if scheme == "daemon":
        _no_query(query)
        host, port = _address(netloc or "127.0.0.1", default_port=DEFAULT_DAEMON_PORT)
        if not ipaddress.IPv4Address(host).is_loopback:
            raise _Bad(f"the daemon is local: host must be in 127.0.0.0/8, got {host}")
        if port == 0:
            raise _Bad("daemon port must be 1..65535")
        return DaemonSpec(host, port)
    if scheme == "mem":
        packet = _packet(query)
        _no_query(query)
        if not _MEM_NAME.match(netloc):
            raise _Bad("mem:// needs a NAME of letters, digits, '_', '.' or '-'")
        return MemSpec(netloc, packet)
    if scheme == "null":
        _no_query(query)
        if netloc:
            raise _Bad("null:// takes no address")
        return NullSpec()
    raise _Bad(f"unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")


def _query(text: str) -> dict[str, str]:
    if not text:
        return {}
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise _Bad(f"malformed query {text!r}") from None
    query: dict[str, str] = {}
    for key, value in pairs:
        if key in query:
            raise _Bad(f"parameter {key!r} given twice")
        query[key] = value
    return query


def _no_query(query: dict[str, str]) -> None:
    if query:
        raise _Bad(f"unexpected parameter(s) {', '.join(sorted(query))}")


def _take_int(query: dict[str, str], key: str, default: int, low: int, high: int) -> int:
    text = query.pop(key, None)
    if text is None:
        return default
    try:
        value = int(text, 10)
    except ValueError:
        raise _Bad(f"{key} must be an integer, got {text!r}") from None
    if not low <= value <= high:
        raise _Bad(f"{key} must be in {low}..{high}, got {value}")
    return value


def _packet(query: dict[str, str]) -> int:
    """``packet=``: bytes per M2MP packet sent, MAX_PACKET (the default) to MAX_DATAGRAM."""
    return _take_int(query, "packet", MAX_PACKET, MAX_PACKET, MAX_DATAGRAM)


def _ipv4(text: str, what: str) -> str:
    if text == "localhost":
        return "127.0.0.1"
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        _refuse_ipv6(text, what)
        raise _Bad(f"{what} must be an IPv4 address, got {text!r}") from None


def _refuse_ipv6(text: str, what: str, instead: str = "an IPv4 address") -> None:
    """A clear word for an IPv6 address (with or without brackets or a %zone)."""
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        ipaddress.IPv6Address(bare.partition("%")[0])
    except ValueError:
        return
    raise _Bad(f"{what} {text!r} is an IPv6 address; m2mc channels are IPv4 only: "
               f"give {instead}")


def parse_iface(text: str) -> str:
    """``iface=``: an IPv4 address, or the name of an interface (eth0, wlan0).

    Only the spelling of a name is checked (no socket is opened); ConfigError says
    what is wrong. ``localhost`` is 127.0.0.1, as elsewhere in URLs.
    """
    try:
        return _iface(text)
    except _Bad as exc:
        raise ConfigError(str(exc)) from None


def _iface(text: str) -> str:
    if not text:
        raise _Bad("iface is empty; give an interface name (eth0) or address (127.0.0.1)")
    if text == "localhost" or _DOTTED.fullmatch(text):  # meant as an address
        return _ipv4(text, "iface")
    _refuse_ipv6(text, "iface", "an IPv4 address or an interface name (eth0)")
    if not _IFACE_NAME.fullmatch(text):
        raise _Bad(f"iface {text!r} is neither an IPv4 address nor an interface name "
                   "(letters, digits, '_', '.', '-')")
    if len(text) > IFACE_NAME_MAX:
        raise _Bad(f"iface {text!r} is too long for an interface name "
                   f"(at most {IFACE_NAME_MAX} characters)")
    return text


def is_iface_name(iface: str) -> bool:
    """Whether a parsed ``iface`` value is a name (else it is an IPv4 address)."""
    return not _DOTTED.fullmatch(iface)


def _address(text: str, *, default_port: int | None = None, allow_zero: bool = False) -> Address:
    if text.count(":") > 1 and not text.startswith("["):
        _refuse_ipv6(text, "host")  # a bare IPv6 address has colons of its own
    host, sep, port_text = text.rpartition(":")
    if not sep:
        if default_port is None:
            raise _Bad(f"expected HOST:PORT, got {text!r}")
        host, port_text = text, str(default_port)
    if not host:
        raise _Bad(f"missing host in {text!r}")
    try:
        port = int(port_text, 10)
    except ValueError:
        raise _Bad(f"port must be an integer, got {port_text!r}") from None
    if not (0 if allow_zero else 1) <= port <= 65535:
        raise _Bad(f"port must be in {0 if allow_zero else 1}..65535, got {port}")
    return _ipv4(host, "host"), port


def _multicast(netloc: str, query: dict[str, str]) -> MulticastSpec:
    group, port = _address(netloc or f"{DEFAULT_GROUP}:{DEFAULT_MULTICAST_PORT}",
                           default_port=DEFAULT_MULTICAST_PORT)
    if not ipaddress.IPv4Address(group).is_multicast:
        raise _Bad(f"{group} is not a multicast group (224.0.0.0/4)")
    iface = _iface(query.pop("iface", "127.0.0.1"))
    ttl = _take_int(query, "ttl", 1, 0, 255)
    rcvbuf = _take_int(query, "rcvbuf", DEFAULT_RCVBUF, 1024, 1 << 30)
    offload = _take_int(query, "offload", 1, 0, 1) == 1
    packet = _packet(query)
    _no_query(query)
    return MulticastSpec(group, port, iface, ttl, rcvbuf, offload, packet)


def _udp(netloc: str, query: dict[str, str]) -> UdpSpec:
    if not netloc:
        raise _Bad("udp:// needs at least one HOST:PORT peer")
    peers = tuple(_address(part.strip()) for part in netloc.split(","))
    if any(ipaddress.IPv4Address(host).is_multicast for host, _ in peers):
        raise _Bad("a udp:// peer is a multicast group; use udp-multicast://")
    bind_text = query.pop("bind", None)
    bind = _address(bind_text, allow_zero=True) if bind_text is not None else ("127.0.0.1", 0)
    rcvbuf = _take_int(query, "rcvbuf", DEFAULT_RCVBUF, 1024, 1 << 30)
    packet = _packet(query)
    _no_query(query)
    return UdpSpec(peers, bind, rcvbuf, packet)


def channel_on_iface(url: str, iface: str) -> str:
    """``url`` with its ``iface=`` replaced, the rest kept (``--iface NAME``).

    ConfigError if ``url`` is not a udp-multicast:// URL or ``iface`` is misspelt.
    """
    spec = parse_channel_url(url)
    if not isinstance(spec, MulticastSpec):
        raise ConfigError(f"iface applies to udp-multicast:// channels, not {url!r}")
    iface = parse_iface(iface)
    if iface == spec.iface:
        return url
    return format_channel_url(MulticastSpec(spec.group, spec.port, iface, spec.ttl, spec.rcvbuf,
                                            spec.offload, spec.packet))


def format_channel_url(spec: ChannelSpec) -> str:
    """The canonical URL of a spec (parse_channel_url(format_channel_url(s)) == s)."""
    if isinstance(spec, MulticastSpec):
        extra = "" if spec.rcvbuf == DEFAULT_RCVBUF else f"&rcvbuf={spec.rcvbuf}"
        extra += "" if spec.offload else "&offload=0"
        extra += "" if spec.packet == MAX_PACKET else f"&packet={spec.packet}"
        return f"udp-multicast://{spec.group}:{spec.port}?iface={spec.iface}&ttl={spec.ttl}{extra}"
    if isinstance(spec, UdpSpec):
        peers = ",".join(f"{h}:{p}" for h, p in spec.peers)
        extra = "" if spec.rcvbuf == DEFAULT_RCVBUF else f"&rcvbuf={spec.rcvbuf}"
        extra += "" if spec.packet == MAX_PACKET else f"&packet={spec.packet}"
        return f"udp://{peers}?bind={spec.bind[0]}:{spec.bind[1]}{extra}"
    if isinstance(spec, DaemonSpec):
        return f"daemon://{spec.host}:{spec.port}"
    if isinstance(spec, MemSpec):
        return f"mem://{spec.name}" + (
            "" if spec.packet == MAX_PACKET else f"?packet={spec.packet}")
    return "null://"
