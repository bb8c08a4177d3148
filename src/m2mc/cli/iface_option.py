"""``--iface NAME``: the short form of ``iface=`` in the channel URL a command uses.

``m2mc chat``, ``listen``, ``send``, ``daemon`` and ``host`` take it. The flag
replaces the ``iface`` of the channel URL the command would use otherwise (from
``--channel``, the configuration or the default) and keeps the rest (group, port,
ttl). A name is checked when the flags are read: one that does not exist is a
one-line error listing the interfaces there are (exit status 2).
"""

from __future__ import annotations

import argparse

from m2mc.config import Config
from m2mc.errors import ConfigError, UsageError
from m2mc.transport.iface import check_interface
from m2mc.transport.url import channel_on_iface

IFACE_HELP = ("network interface, by name (eth0, wlan0; 'ip link' lists them) or IPv4 "
              "address: replaces iface= in {what}, keeping the rest (default: the URL's "
              "iface, loopback unless set){extra}")


def add_iface_argument(parser: argparse.ArgumentParser, what: str = "the channel URL",
                       extra: str = "") -> None:
    parser.add_argument("--iface", metavar="NAME", type=iface_argument,
                        help=IFACE_HELP.format(what=what, extra=extra))


def iface_argument(text: str) -> str:
    """argparse type of ``--iface``: a well-formed address, or the name of an interface here."""
    try:
        return check_interface(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def on_iface(url: str, iface: str | None, source: str = "the channel") -> str:
    """``url`` with ``--iface`` applied (unchanged without it); UsageError if not multicast."""
    if iface is None:
        return url
    try:
        return channel_on_iface(url, iface)
    except ConfigError:
        raise UsageError(f"--iface applies to a udp-multicast:// channel; {source} is "
                         f"{url}") from None


def config_on_iface(config: Config, section: str, iface: str | None) -> Config:
    """``config`` with ``--iface`` applied to ``<section>.channel`` (m2mp or daemon)."""
    if iface is None:
        return config
    url = config.section(section).channel
    return config.replace(section, channel=on_iface(url, iface, f"{section}.channel"))
