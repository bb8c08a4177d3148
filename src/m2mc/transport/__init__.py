"""Channels and the M2MP daemon's routing rule (seeds/002 sections 1-4).

The sans-IO core lives in :mod:`m2mc.wire`; the asyncio endpoint that drives it
on a channel is :class:`m2mc.runtime.endpoint.M2MPEndpoint`, and the daemon server
that runs the router is :class:`m2mc.runtime.daemon.M2MPDaemon` (one driver runs
every stack: runtime/driver.py). Everything else here is I/O.
"""

from m2mc.transport.channel import Channel, ChannelClosedError, ChannelStats
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
    "Route",
    "format_channel_url",
    "open_channel",
    "parse_channel_url",
]
