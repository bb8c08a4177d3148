"""``m2mc send [--channel URL] [--redundancy N] [--file PATH]`` (docs/interfaces.md §3).

Sends stdin (or the file) as one M2MP message, then prints one JSON line:
``{"id": <message id>, "len": <bytes>, "sha256": "<hex>"}``. The message is written
in pieces as it is read (seeds/002 2.2), so a file of any size goes out without
being held in memory; the receivers abandon it if the input pauses longer than
their message timeout (``m2mp.message_timeout``) between two pieces. ``--iface NAME``
puts the channel on that interface (:mod:`m2mc.cli.iface_option`). If the system
refused every datagram (the interface is down, say), a line on stderr says so
and the exit status is 1.

M2MP never sends a packet again (seeds/002): a message is lost whole if a receiver
misses any of its packets in every copy, which a receiver that falls behind its
socket buffer for a moment does. A message of ``LARGE`` bytes or more (a file of
that size, or stdin once that much is read) gets one warning line on stderr naming
the group layer's streams, which repair what is lost (docs/m2mp.md, "Large messages
and loss").
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import stat
import sys
from typing import Any, BinaryIO

from m2mc.cli.iface_option import add_iface_argument, config_on_iface
from m2mc.config import Config, add_config_argument, load_config
from m2mc.errors import UsageError
from m2mc.runtime.endpoint import M2MPEndpoint
from m2mc.transport.channel import ChannelClosedError


def positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


# Four times the 4 MiB socket buffer the channel asks for: a message larger than a
# few receive buffers is lost whole if a receiver falls behind for a moment.
LARGE = 16 << 20
WARNING = ("m2mc send: warning: this message is {size} or more: M2MP does not send a "
           "lost packet again, so a receiver that misses one (say it falls behind its "
           "socket buffer) loses the whole message; for large files use the group "
           "layer's streams (Group.send_stream, docs/api.md), which repair losses")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "send", help="send stdin (or a file) as one M2MP message",
        description="Send stdin (or --file) as one M2MP message; print its id, length and "
                    "SHA-256 as one JSON line. M2MP does not repair lost packets: a "
                    "message is lost whole if a receiver misses one of its packets in "
                    f"every copy. From {LARGE >> 20} MiB on a warning on stderr says so; "
                    "for large files use the group layer's streams (Group.send_stream), "
                    "which repair losses.")
    parser.add_argument("--channel", metavar="URL",
                        help="channel URL (default: m2mp.channel of the configuration); "
                             "&packet=BYTES (508..65507) sends larger packets")
    parser.add_argument("--redundancy", metavar="N", type=positive_int,
                        help="send every packet N times (default: m2mp.redundancy)")
    parser.add_argument("--file", metavar="PATH", help="send this file instead of stdin")
    add_iface_argument(parser, "the channel URL")
    add_config_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, overrides={
        "m2mp.channel": args.channel, "m2mp.redundancy": args.redundancy})
    config = config_on_iface(config, "m2mp", args.iface)
    source = _open_source(args.file)
    refused: list[int] = []
    try:
        with source:
            message_id, size, sha256 = asyncio.run(
                send_stream(config, source, stdin=args.file is None, refused=refused))
    except ChannelClosedError as exc:  # e.g. the daemon went away mid-message
        print(f"m2mc send: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        raise UsageError(f"cannot read {args.file or 'stdin'}: {exc.strerror or exc}") from None
    print(json.dumps({"id": message_id, "len": size, "sha256": sha256}), flush=True)
    if refused:
        print(f"m2mc send: error: the system refused all {refused[0]} datagrams of the "
              f"message on {config.m2mp.channel} (is the interface up?)", file=sys.stderr)
        return 1
    return 0


PIECE = 64 * 1024


async def send_stream(config: Config, source: BinaryIO, *, stdin: bool = False,
                      refused: list[int] | None = None) -> tuple[int, int, str]:
    """Send everything ``source`` holds as one M2MP message, written in pieces as it is
    read (never held whole); return its ID, length and SHA-256. ``stdin``: read in a
    thread (a pipe may keep us waiting; the event loop goes on meanwhile)."""
    sha = hashlib.sha256()
    size = 0
    warned = _warn_if_large(_known_size(source))
    async with M2MPEndpoint.from_settings(config.m2mp, node=config.node_id) as endpoint:
        async with endpoint.open_message() as out:
            while True:
                piece = (await asyncio.to_thread(source.read, PIECE) if stdin
                         else source.read(PIECE))
                if not piece:
                    break
                sha.update(piece)
                size += len(piece)
                if not warned:
                    warned = _warn_if_large(size)
                await out.write(piece)
        await endpoint.drain()
        _note_refused(endpoint, refused)
        return out.message_id, size, sha.hexdigest()


def _known_size(source: BinaryIO) -> int:
    """The bytes a regular file holds from here (0 for a pipe or a terminal)."""
    try:
        st = os.fstat(source.fileno())
        return max(0, st.st_size - source.tell()) if stat.S_ISREG(st.st_mode) else 0
    except (OSError, AttributeError, ValueError):
        return 0


def _warn_if_large(size: int) -> bool:
    """Warn once (stderr) if ``size`` is past ``LARGE``; True if it was."""
    if size < LARGE:
        return False
    print(WARNING.format(size=f"{LARGE >> 20} MiB"), file=sys.stderr, flush=True)
    return True


def _note_refused(endpoint: M2MPEndpoint, refused: list[int] | None) -> None:
    stats = endpoint.channel.stats
    if refused is not None and stats.send_errors and not stats.datagrams_out:
        refused.append(stats.send_errors)


def _open_source(path: str | None) -> BinaryIO:
    if path is None:
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
