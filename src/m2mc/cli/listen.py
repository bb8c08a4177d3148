"""``m2mc listen [--channel URL] [--prefix HEX] [--count N] [--timeout S]`` (docs/interfaces.md §3).

Prints one JSON object per line for each message received:
``{"id": <message id>, "len": <bytes>, "sha256": "<hex>", "head": "<hex of first 16 bytes>"}``;
stops after N messages or S seconds of silence. ``--prefix`` may be repeated
(several message filters); without it every message matches. Once listening,
one line ``m2mc listen: listening on URL`` goes to stderr. Exit status 1 if
fewer than N messages arrived or a matching message was abandoned. ``--iface
NAME`` puts the channel on that interface (:mod:`m2mc.cli.iface_option`).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from typing import Any

from m2mc.cli.iface_option import add_iface_argument, config_on_iface
from m2mc.cli.send import positive_int
from m2mc.config import Config, add_config_argument, load_config
from m2mc.runtime.endpoint import M2MPEndpoint
from m2mc.transport.channel import ChannelClosedError
from m2mc.wire.m2mp import MessageAbandoned, MessageReceived


def hex_prefix(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"prefix must be hex digits, got {text!r}") from None


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "listen", help="print one JSON line per M2MP message received",
        description="Print one JSON line per M2MP message received: id, len, sha256, head.")
    parser.add_argument("--channel", metavar="URL",
                        help="channel URL (default: m2mp.channel of the configuration)")
    parser.add_argument("--prefix", metavar="HEX", type=hex_prefix, action="append",
                        help="message filter: only messages starting with these bytes "
                             "(repeatable; default: every message)")
    parser.add_argument("--count", metavar="N", type=positive_int,
                        help="stop after N messages")
    parser.add_argument("--timeout", metavar="S", type=positive_float,
                        help="stop after S seconds without a message")
    add_iface_argument(parser, "the channel URL")
    add_config_argument(parser)
    parser.set_defaults(func=run)


def message_json(message: MessageReceived) -> str:
    payload = message.payload
    return json.dumps({"id": message.message_id, "len": len(payload),
                       "sha256": hashlib.sha256(payload).hexdigest(),
                       "head": payload[:16].hex()})


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, overrides={"m2mp.channel": args.channel})
    config = config_on_iface(config, "m2mp", args.iface)
    prefixes = args.prefix if args.prefix else [b""]
    try:
        return asyncio.run(listen(config, prefixes, args.count, args.timeout))
    except BrokenPipeError:
        return 0
    except ChannelClosedError as exc:  # e.g. the daemon went away: the job found a problem
        print(f"m2mc listen: error: {exc}", file=sys.stderr)
        return 1


async def listen(config: Config, prefixes: list[bytes], count: int | None,
                 silence: float | None) -> int:
    received = abandoned = 0
    async with M2MPEndpoint.from_settings(config.m2mp, filters=prefixes,
                                          node=config.node_id) as endpoint:
        print(f"m2mc listen: listening on {endpoint.channel.url}", file=sys.stderr, flush=True)
        loop = asyncio.get_running_loop()
        last_event = loop.time()
        silent = False

        async def silence_guard(seconds: float) -> None:
            # One watchdog instead of a timeout per message (each would cost a task).
            nonlocal silent
            while (left := last_event + seconds - loop.time()) > 0:
                await asyncio.sleep(left)
            silent = True
            await endpoint.close()

        guard = asyncio.ensure_future(silence_guard(silence)) if silence else None
        try:
            while count is None or received < count:
                try:
                    event = await endpoint.receive_event()
                except ChannelClosedError:
                    if silent:
                        break
                    raise
                last_event = loop.time()
                if isinstance(event, MessageAbandoned):
                    abandoned += 1
                    print(f"m2mc listen: message {event.message_id} abandoned "
                          f"({event.reason})", file=sys.stderr, flush=True)
                    continue
                sys.stdout.write(message_json(event) + "\n")
                sys.stdout.flush()
                received += 1
        finally:
            if guard is not None:
                guard.cancel()
    short = count is not None and received < count
    return 1 if short or abandoned else 0
