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
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from m2mc.cli.iface_option import add_iface_argument, config_on_iface
from m2mc.cli.send import positive_int
from m2mc.config import Config, add_config_argument, load_config
from m2mc.runtime.endpoint import M2MPEndpoint, MessageAbandonedError
from m2mc.runtime.stream_io import IncomingMessage
from m2mc.transport.channel import ChannelClosedError
from m2mc.wire.packet import MAX_FRAGMENT


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
                        help="channel URL (default: m2mp.channel of the configuration); "
                             "packets of any size are read (&packet=BYTES is for senders)")
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


STREAM_THRESHOLD = 64 * 1024


async def digest(incoming: IncomingMessage, touch: Callable[[], None]) -> str:
    """The JSON line of one incoming message, computed as its pieces arrive (``touch``
    after each: the silence timer counts them). Raises MessageAbandonedError."""
    sha = hashlib.sha256()
    size = 0
    head = b""
    async for piece in incoming:
        touch()
        sha.update(piece)
        size += len(piece)
        if len(head) < 16:
            head = (head + piece[:16])[:16]
    return json.dumps({"id": incoming.message_id, "len": size, "sha256": sha.hexdigest(),
                       "head": head.hex()})


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
    settings = config.m2mp
    base = settings.layer_config()
    threshold = max(MAX_FRAGMENT, min(STREAM_THRESHOLD, base.max_message_bytes))
    layer = replace(base, stream_threshold=threshold,
                    max_message_bytes=max(threshold, base.max_message_bytes))
    endpoint = M2MPEndpoint.from_settings(settings, node=config.node_id, filters=prefixes,
                                          config=layer)
    async with endpoint:
        print(f"m2mc listen: listening on {endpoint.channel.url}", file=sys.stderr, flush=True)
        loop = asyncio.get_running_loop()
        last_event = loop.time()
        silent = False
        enough = asyncio.Event()

        def touch() -> None:
            nonlocal last_event
            last_event = loop.time()

        async def silence_guard(seconds: float) -> None:
            # One watchdog instead of a timeout per message (each would cost a task).
            nonlocal silent
            while (left := last_event + seconds - loop.time()) > 0:
                await asyncio.sleep(left)
            silent = True
            await endpoint.close()

        async def read(incoming: IncomingMessage) -> None:
            # Each message in a task of its own: several senders' messages may
            # arrive at once, each read as it comes.
            nonlocal received, abandoned
            try:
                line = await digest(incoming, touch)
            except MessageAbandonedError as exc:
                abandoned += 1
                print(f"m2mc listen: message {incoming.message_id} abandoned "
                      f"({exc.event.reason})", file=sys.stderr, flush=True)
                return
            except ChannelClosedError:
                return
            if count is not None and received >= count:
                return
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            received += 1
            if count is not None and received >= count:
                enough.set()

        guard = asyncio.ensure_future(silence_guard(silence)) if silence else None
        readers: set[asyncio.Task[None]] = set()

        async def accept_all() -> None:
            while True:
                incoming = await endpoint.accept()
                touch()
                task = asyncio.ensure_future(read(incoming))
                readers.add(task)
                task.add_done_callback(readers.discard)

        accepting = asyncio.ensure_future(accept_all())
        done_waiting = asyncio.ensure_future(enough.wait())
        try:
            await asyncio.wait({accepting, done_waiting}, return_when=asyncio.FIRST_COMPLETED)
            if accepting.done() and not silent:
                accepting.result()  # the channel closed under us: raise it
            if readers and not enough.is_set():
                await asyncio.wait(readers)  # let messages in progress end (or fail)
        finally:
            for task in (guard, accepting, done_waiting, *readers):
                if task is not None:
                    task.cancel()
    short = count is not None and received < count
    return 1 if short or abandoned else 0
