"""Channels and the M2MP daemon (seeds/002 sections 1-4).

The sans-IO core lives in :mod:`m2mc.wire`; the asyncio endpoint that drives it
on a channel is :class:`m2mc.runtime.endpoint.M2MPEndpoint` (one driver runs every
stack: runtime/driver.py). Everything here is I/O.
"""

from m2mc.transport.channel import Channel, ChannelClosedError, ChannelStats
from m2mc.transport.daemon import M2MPDaemon
from m2mc.transport.router import DaemonRouter, Route
from m2mc.transport.url import (
    DEFAULT_CHANNEL_URL,
    DEFAULT_DAEMON_PORT,
    ChannelSpec,
    format_channel_url,
    open_channel,
    parse_channel_url,
)

__all__ = [
    "DEFAULT_CHANNEL_URL",
    "DEFAULT_DAEMON_PORT",
    "Channel",
    "ChannelClosedError",
    "ChannelSpec",
    "ChannelStats",
    "DaemonRouter",
    "M2MPDaemon",
    "Route",
    "format_channel_url",
    "open_channel",
    "parse_channel_url",
]
