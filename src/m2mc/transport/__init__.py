"""Channels, the asyncio M2MP runtime and the M2MP daemon (seeds/002 sections 1-4).

The sans-IO core lives in :mod:`m2mc.wire`; everything here is a thin driver.
"""

from m2mc.transport.channel import Channel, ChannelClosedError, ChannelStats
from m2mc.transport.daemon import M2MPDaemon
from m2mc.transport.endpoint import M2MPEndpoint, MessageAbandonedError
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
    "M2MPEndpoint",
    "MessageAbandonedError",
    "Route",
    "format_channel_url",
    "open_channel",
    "parse_channel_url",
]
