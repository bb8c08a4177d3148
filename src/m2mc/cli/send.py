"""``m2mc send [--channel URL] [--redundancy N] [--file PATH]`` (docs/interfaces.md §3).

Sends stdin (or the file) as one M2MP message, then prints one JSON line:
``{"id": <message id>, "len": <bytes>, "sha256": "<hex>"}``. ``--iface NAME``
puts the channel on that interface (:mod:`m2mc.cli.iface_option`). If the system
refused every datagram (the interface is down, say), a line on stderr says so
and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from typing import Any

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


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "send", help="send stdin (or a file) as one M2MP message",
        description="Send stdin (or --file) as one M2MP message; print its id, length and "
                    "SHA-256 as one JSON line.")
    parser.add_argument("--channel", metavar="URL",
                        help="channel URL (default: m2mp.channel of the configuration)")
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
    payload = _read_payload(args.file)
    refused: list[int] = []
    try:
        message_id = asyncio.run(send_message(config, payload, refused))
    except ChannelClosedError as exc:  # e.g. the daemon went away mid-message
        print(f"m2mc send: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"id": message_id, "len": len(payload),
                      "sha256": hashlib.sha256(payload).hexdigest()}), flush=True)
    if refused:
        print(f"m2mc send: error: the system refused all {refused[0]} datagrams of the "
              f"message on {config.m2mp.channel} (is the interface up?)", file=sys.stderr)
        return 1
    return 0


async def send_message(config: Config, payload: bytes, refused: list[int] | None = None) -> int:
    """Send one message on the configured channel; return once every packet is out.

    When the system refused every datagram (none went out), their number is
    appended to ``refused``."""
    async with M2MPEndpoint.from_settings(config.m2mp, node=config.node_id) as endpoint:
        message_id = await endpoint.send(payload)
        await endpoint.drain()
        stats = endpoint.channel.stats
        if refused is not None and stats.send_errors and not stats.datagrams_out:
            refused.append(stats.send_errors)
        return message_id


def _read_payload(path: str | None) -> bytes:
    if path is None:
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
