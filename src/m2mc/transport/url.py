"""Channel URLs (docs/interfaces.md §2): parse them, and open the channel they name.

Opening is here, above the channels (each channel module is imported when its
first channel opens); the syntax -- parsing, formatting, the specs the channels are
built from -- is :mod:`m2mc.transport.url_syntax`, below them, and its names are
re-exported: this module is the one applications import.
"""

from __future__ import annotations

from m2mc.transport.channel import DEFAULT_MAX_INBOUND, Channel
from m2mc.transport.url_syntax import (
    DEFAULT_CHANNEL_URL,
    DEFAULT_DAEMON_PORT,
    DEFAULT_GROUP,
    DEFAULT_MULTICAST_PORT,
    DEFAULT_RCVBUF,
    IFACE_NAME_MAX,
    SCHEMES,
    Address,
    ChannelSpec,
    DaemonSpec,
    MemSpec,
    MulticastSpec,
    NullSpec,
    UdpSpec,
    channel_on_iface,
    format_channel_url,
    is_iface_name,
    parse_channel_url,
    parse_iface,
)

__all__ = ["DEFAULT_CHANNEL_URL", "DEFAULT_DAEMON_PORT", "DEFAULT_GROUP", "DEFAULT_MULTICAST_PORT",
           "DEFAULT_RCVBUF", "IFACE_NAME_MAX", "SCHEMES", "Address", "ChannelSpec", "DaemonSpec",
           "MemSpec", "MulticastSpec", "NullSpec", "UdpSpec", "channel_on_iface",
           "format_channel_url", "is_iface_name", "open_channel", "parse_channel_url",
           "parse_iface"]


def open_channel(url: str | ChannelSpec, *, max_inbound: int = DEFAULT_MAX_INBOUND) -> Channel:
    """The (not yet started) channel a URL names. Start it with ``await ch.start()``."""
    spec = parse_channel_url(url) if isinstance(url, str) else url
    text = url if isinstance(url, str) else format_channel_url(spec)
    if isinstance(spec, MulticastSpec):
        from m2mc.transport.multicast import MulticastChannel

        return MulticastChannel(spec, text, max_inbound=max_inbound)
    if isinstance(spec, UdpSpec):
        from m2mc.transport.udp import UdpChannel

        return UdpChannel(spec, text, max_inbound=max_inbound)
    if isinstance(spec, DaemonSpec):
        from m2mc.transport.daemon_channel import DaemonChannel

        return DaemonChannel(spec, text, max_inbound=max_inbound)
    if isinstance(spec, MemSpec):
        from m2mc.transport.mem import MemChannel

        return MemChannel(spec, text, max_inbound=max_inbound)
    from m2mc.transport.null import NullChannel

    return NullChannel(text, max_inbound=max_inbound)
