"""``m2mc bench throughput --receivers N --count N --size B``: group-layer throughput.

Starts N receiver processes and one sender process on a fresh loopback multicast
channel (random 239.255.x.y group, iface 127.0.0.1, TTL 1). All join one S_b
group with NACK repair and the SQLite log on. The sender uses the plain API as an
application would: ``await group.send(payload)`` in a loop, ``--count`` messages
of ``--size`` bytes, as fast as back-pressure lets it, and it never reads the
group (its own messages are handed back to it unread, as ``NodeConfig.deliver_own``
does by default; ``--no-deliver-own`` turns that off). Each receiver reads with
``receive_many`` and counts deliveries. The last stdout line is::

    {"sent": .., "received_min": .., "msgs_per_s": .., "seconds": ..}

``msgs_per_s`` is the per-receiver delivery rate (the slowest receiver's
messages delivered divided by the time from the first send to its last delivery);
``seconds`` the time until the last receiver finished. Exit status 1 if some
receiver did not deliver every message within ``--timeout``.
``--key-passphrase TEXT`` keys the group (every message sealed and checked,
``--key-suite``, default hmac-sha256): the cost of authentication end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from m2mc.errors import UsageError
from m2mc.kinds import Order


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("bench", help="measure throughput of the group layer",
                                   description="Benchmarks of the group layer over loopback.")
    sub = parser.add_subparsers(dest="bench", metavar="{throughput}", parser_class=type(parser))
    t = sub.add_parser("throughput", help="messages/s per receiver through the group layer",
                       description="\n\n".join(__doc__.split("\n\n")[1:]) if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(t)
    t.add_argument("--receivers", type=_positive, default=3, help="receiver processes (3)")
    t.add_argument("--timeout", type=float, default=120.0, help="give up after S seconds")
    t.add_argument("--channel", default=None, help="channel URL (default: a random loopback "
                   "multicast group)")
    t.add_argument("--verbose-stats", action="store_true",
                   help="also print each process's counters and CPU time")
    t.set_defaults(func=run_throughput)
    for role in ("_receiver", "_sender"):
        r = sub.add_parser(role)  # internal: the processes the benchmark starts
        _common(r)
        r.add_argument("--channel", required=True)
        r.add_argument("--pid", required=True)
        r.add_argument("--members", type=int, default=1)
        r.add_argument("--data", default=None)
        r.set_defaults(func=run_role, role=role)
    parser.set_defaults(func=lambda args: _usage(parser))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--count", type=_positive, default=20_000, help="messages to send (20000)")
    p.add_argument("--size", type=_nonnegative, default=100, help="payload bytes (100)")
    p.add_argument("--redundancy", type=_positive, default=1,
                   help="M2MP copies of each packet (1: repair does the rest)")
    p.add_argument("--no-durable", dest="durable", action="store_false",
                   help="keep the message log in memory instead of SQLite")
    p.add_argument("--no-deliver-own", dest="deliver_own", action="store_false",
                   help="NodeConfig(deliver_own=False): the sender's own messages are not "
                   "handed back to it")
    p.add_argument("--key-passphrase", default=None, metavar="TEXT",
                   help="key the group with this passphrase (authenticated group)")
    p.add_argument("--key-suite", default="hmac-sha256",
                   choices=("hmac-sha256", "aes-256-gcm", "chacha20-poly1305"),
                   help="suite of the keyed group (hmac-sha256)")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _nonnegative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


# ----------------------------------------------------------------- orchestrator
def run_throughput(args: argparse.Namespace) -> int:
    from m2mc.demo.tour import Child, random_multicast_url

    if args.size > 60_000:
        raise UsageError("--size must be at most 60000 bytes")
    url = args.channel or random_multicast_url(random.Random())
    common = ["--count", str(args.count), "--size", str(args.size),
              "--redundancy", str(args.redundancy), "--channel", url,
              "--members", str(args.receivers + 1)]
    if not args.durable:
        common.append("--no-durable")
    if not args.deliver_own:
        common.append("--no-deliver-own")
    if args.key_passphrase is not None:
        common += ["--key-passphrase", args.key_passphrase, "--key-suite", args.key_suite]
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    with tempfile.TemporaryDirectory(prefix="m2mc-bench-") as tmp:
        receivers = [Child(["bench", "_receiver", *common, "--pid", f"r{i}", "--data",
                            str(Path(tmp) / f"r{i}")], env=env)
                     for i in range(args.receivers)]
        sender = None
        try:
            for child in receivers:
                child.wait_stderr("ready", 30.0)
            sender = Child(["bench", "_sender", *common, "--pid", "s", "--data",
                            str(Path(tmp) / "s")], env=env)
            results: list[dict[str, Any]] = []
            for child in receivers:
                status = child.finish(args.timeout)
                rows = child.json_lines()
                if status != 0 or not rows:
                    print(f"receiver failed ({status}): {' | '.join(child.stderr[-3:])}",
                          file=sys.stderr)
                results.append(rows[-1] if rows else {"received": 0, "last": None})
            start = _sender_start(sender)
        finally:
            for child in [*receivers, *([sender] if sender else [])]:
                child.kill()
    received = [int(r.get("received", 0)) for r in results]
    lasts = [r["last"] for r in results if r.get("last") is not None]
    seconds = max(lasts) - start if lasts and start is not None else None
    rates = [r["received"] / (r["last"] - start) for r in results
             if r.get("last") is not None and start is not None and r["last"] > start]
    summary = {"sent": _sender_sent(sender), "received_min": min(received),
               "msgs_per_s": round(min(rates), 1) if len(rates) == len(results) else 0.0,
               "seconds": round(seconds, 3) if seconds is not None else None}
    if args.verbose_stats:
        print(json.dumps({"receivers": results,
                          "sender": [line for line in (sender.stderr if sender else [])
                                     if line.startswith("sent")]}), flush=True)
    print(json.dumps(summary), flush=True)
    return 0 if min(received) == args.count else 1


def _sender_sent(sender: Any) -> int | None:
    """Messages the sender handed to the group layer (its ``sent N ...`` line)."""
    for line in sender.stderr if sender is not None else []:
        if line.startswith("sent "):
            return int(line.split()[1])
    return None


def _sender_start(sender: Any) -> float | None:
    try:
        line = sender.wait_stderr("start ", 5.0)
    except TimeoutError:
        return None
    try:
        return float(line.split()[-1])
    except ValueError:
        return None


# ------------------------------------------------------------------------ roles
def run_role(args: argparse.Namespace) -> int:
    return asyncio.run(_receiver(args) if args.role == "_receiver" else _sender(args))


def _node_config(args: argparse.Namespace) -> Any:
    from m2mc.api import NodeConfig
    from m2mc.wire.m2mp import M2MPConfig

    return NodeConfig(pid=args.pid, channel=args.channel,
                      data_dir=args.data if args.durable else None,
                      m2mp=M2MPConfig(redundancy=args.redundancy),
                      deliver_own=args.deliver_own)


def _key(args: argparse.Namespace) -> dict[str, Any]:
    if args.key_passphrase is None:
        return {}
    return {"passphrase": args.key_passphrase, "suite": args.key_suite}


async def _receiver(args: argparse.Namespace) -> int:
    from m2mc.api import AdhocNode

    async with AdhocNode(_node_config(args)) as node:  # reads the ad hoc stack's counters
        group = await node.join("bench", order=Order.SB, **_key(args))
        print("ready", file=sys.stderr, flush=True)
        received = 0
        last = None
        while received < args.count:
            try:
                batch = await group.receive_many(timeout=30.0)
            except TimeoutError:
                break
            received += len(batch)
            last = time.time()
        stack = node._node()
        print(json.dumps({"received": received, "last": last, "cpu": time.process_time(),
                          "stats": node.stats(), "group": stack.group_stats("bench"),
                          "m2mp": stack.m2mp.stats.as_dict(),
                          "channel": node._drv().channel.stats.as_dict()}), flush=True)
        await asyncio.sleep(0.3)  # answer the others' last repairs
    return 0 if received >= args.count else 1


async def _sender(args: argparse.Namespace) -> int:
    from m2mc.api import Node

    async with Node(_node_config(args)) as node:
        group = await node.join("bench", order=Order.SB, **_key(args))
        deadline = time.monotonic() + 30.0
        while len(group.members) < args.members and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        payload = os.urandom(args.size)
        print(f"start {time.time()}", file=sys.stderr, flush=True)
        for _ in range(args.count):  # the plain loop: no reading, no replies
            await group.send(payload)
        print(f"sent {args.count} {time.time()} cpu {time.process_time()}", file=sys.stderr,
              flush=True)
        await asyncio.sleep(3600)  # keep answering repairs until the bench kills us
    return 0
